package harness

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
			verdicts: make([]properties.Verdict, len(props))}
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

type checkFunc struct {
	name    string
	horizon time.Duration
	verdict properties.Verdict
}

func (p checkFunc) Name() string                               { return p.name }
func (p checkFunc) Horizon() time.Duration                     { return p.horizon }
func (p checkFunc) Check(*properties.Trace) properties.Verdict { return p.verdict }
