package lifecycle

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kubeprop/kubeprop/harness/internal/inject"
	"github.com/kubeprop/kubeprop/harness/internal/record"
	"github.com/kubeprop/kubeprop/properties"
)

// TestCheckDecides: during the steps any failure decides the case; after
// the heal the first failure in the Spec's order is the one that counts,
// once the properties before it are decided, unless a property failed
// during the steps.
func TestCheckDecides(t *testing.T) {
	auditLog := filepath.Join(t.TempDir(), "audit.log")
	require.NoError(t, os.WriteFile(auditLog, nil, 0o600))
	newCase := func(props ...properties.Property) *caseRun {
		audit, err := record.NewAuditReader(auditLog, "kp-1")
		require.NoError(t, err)
		return &caseRun{spec: Spec{Properties: props}, audit: audit, recorder: record.New(record.Options{}),
			verdicts: make([]properties.Verdict, len(props)), ctx: t.Context()}
	}
	// Undecided for a minute after the heal, as converges waits out its
	// deadline.
	waiting := checkFunc{name: "waiting", horizon: time.Minute, verdict: properties.Verdict{}}
	failing := checkFunc{name: "failing", verdict: properties.Verdict{Done: true, Err: errors.New("failing: violated")}}

	c := newCase(waiting, failing)
	_, open, decided, err := c.check(false, time.Time{})
	require.NoError(t, err)
	require.True(t, decided, "a failure during the steps decides the case")
	require.True(t, open)
	_, _, decided, _ = c.check(false, time.Now())
	require.True(t, decided, "after the heal too, once it failed during the steps")

	c = newCase(waiting, failing)
	_, open, decided, _ = c.check(false, time.Now())
	require.False(t, decided, "after the heal, a failure waits for the properties before it")
	require.True(t, open)
	require.Equal(t, "failing", c.failedSoFar())

	c = newCase(failing, waiting)
	_, _, decided, _ = c.check(false, time.Now())
	require.True(t, decided, "the first property in the Spec's order failed")
}

// TestJudgeGivesFinalVerdicts: a failure after the heal ends the judging,
// but a property before it in the Spec's order whose deadline passed
// undecided gets its final verdict first, and is the failure reported (a
// check of a long trace under load may judge a trace that ends short of
// the deadline).
func TestJudgeGivesFinalVerdicts(t *testing.T) {
	auditLog := filepath.Join(t.TempDir(), "audit.log")
	require.NoError(t, os.WriteFile(auditLog, nil, 0o600))
	audit, err := record.NewAuditReader(auditLog, "kp-1")
	require.NoError(t, err)
	deadline := finalFunc{name: "deadline", horizon: time.Millisecond}
	failing := checkFunc{name: "failing", verdict: properties.Verdict{Done: true, Err: errors.New("failing: violated")}}
	c := &caseRun{spec: Spec{Properties: []properties.Property{deadline, failing}}, audit: audit, recorder: record.New(record.Options{}),
		started: time.Now(), verdicts: make([]properties.Verdict, 2), ctlFaults: inject.New(inject.Options{}), userClient: fake.NewClientBuilder().Build(),
		ctx: t.Context()}
	rep, err := c.judge(t.Context(), nil)
	require.NoError(t, err)
	var failed []string
	for _, f := range rep.Failures {
		failed = append(failed, f.Property)
	}
	require.Equal(t, []string{"deadline", "failing"}, failed, "timeline:\n%s", strings.Join(rep.Timeline, "\n"))
}

// finalFunc is undecided until the trace is final, then fails: a deadline
// missed.
type finalFunc struct {
	name    string
	horizon time.Duration
}

func (p finalFunc) Name() string           { return p.name }
func (p finalFunc) Horizon() time.Duration { return p.horizon }
func (p finalFunc) Check(tr *properties.Trace) properties.Verdict {
	if !tr.Final {
		return properties.Verdict{Detail: "waiting"}
	}
	return properties.Verdict{Done: true, Err: errors.New(p.name + ": missed")}
}

type checkFunc struct {
	name    string
	horizon time.Duration
	verdict properties.Verdict
}

func (p checkFunc) Name() string                               { return p.name }
func (p checkFunc) Horizon() time.Duration                     { return p.horizon }
func (p checkFunc) Check(*properties.Trace) properties.Verdict { return p.verdict }

// TestSettleEndsAtAFailureFoundInBackground: while a settle waits (here
// for a quiet that never comes), checks beside it find a failure that more
// trace cannot undo and end the settle, also after an armed step ran (when
// no check is made at a settle's end).
func TestSettleEndsAtAFailureFoundInBackground(t *testing.T) {
	auditLog := filepath.Join(t.TempDir(), "audit.log")
	require.NoError(t, os.WriteFile(auditLog, nil, 0o600))
	audit, err := record.NewAuditReader(auditLog, "kp-1")
	require.NoError(t, err)
	failing := checkFunc{name: "failing", verdict: properties.Verdict{Done: true, Err: errors.New("failing: violated")}}
	c := &caseRun{spec: Spec{Properties: []properties.Property{failing}, SettleQuiet: time.Hour}, audit: audit,
		recorder: record.New(record.Options{}), verdicts: make([]properties.Verdict, 1), armedRan: true,
		ctlFaults: inject.New(inject.Options{}), ctx: t.Context()}
	c.recorder.Acted() // the quiet of an hour never comes
	err = c.settle(t.Context(), time.Hour)
	c.background.wg.Wait()
	require.ErrorIs(t, err, errDecided)
	require.Equal(t, "failing", c.failedSoFar())
	require.True(t, c.failedInSteps)
}

// TestBackgroundFailureNeedsConfirming: a failure a check found while a
// settle waits counts only when a check confirmAfter later finds it too (a
// state seen before a late watch event arrived may never have existed);
// a pass in between starts over.
func TestBackgroundFailureNeedsConfirming(t *testing.T) {
	c := &caseRun{}
	failed := properties.Verdict{Done: true, Err: errors.New("failing: violated"), Detail: "state 3"}
	held := properties.Verdict{Done: true, Detail: "held"}
	t0 := time.Now()
	require.False(t, c.confirmInBackground(0, failed, t0).Done, "first sighting")
	require.False(t, c.confirmInBackground(0, failed, t0.Add(confirmAfter/2)).Done, "too soon")
	require.False(t, c.confirmInBackground(0, held, t0.Add(confirmAfter)).Done, "a pass is not final while a settle waits")
	require.False(t, c.confirmInBackground(0, failed, t0.Add(2*confirmAfter)).Done, "seen again after a pass: a first sighting")
	require.Equal(t, failed, c.confirmInBackground(0, failed, t0.Add(3*confirmAfter)), "confirmed")
	require.False(t, c.confirmInBackground(1, failed, t0.Add(3*confirmAfter)).Done, "each property has its own sighting")
}
