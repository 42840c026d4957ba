package lifecycle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/properties"
)

// errDecided ends a case's steps: a property failed, and more trace
// cannot change that.
var errDecided = errors.New("a property failed")

// check judges the trace so far with the properties whose verdict is not
// in. open is set while a property is undecided within its horizon from
// healed (zero before the heal). decided is set when the case's outcome
// is in: during the steps, when a property failed; after the heal, when
// one failed during the steps, or when one failed and every property
// before it in the Spec's order is decided. After the heal the first
// failure in the Spec's order is the one reported, so that a property
// whose deadline is short (quiescent) does not take the place of the one
// before it that waits out a longer one (converges): the same plan is
// reported by the same property, run after run.
func (c *caseRun) check(final bool, healed time.Time) (tr *properties.Trace, open, decided bool, err error) {
	return c.checkTrace(final, healed, false)
}

// checkTrace is check; inBackground: made while a settle waits, so a
// failure counts only once confirmed (see confirmInBackground).
func (c *caseRun) checkTrace(final bool, healed time.Time, inBackground bool) (tr *properties.Trace, open, decided bool, err error) {
	c.checkMu.Lock()
	defer c.checkMu.Unlock()
	start := time.Now()
	defer func() {
		c.checkTook.Store(int64(time.Since(start)))
		c.checkEnded.Store(time.Now().UnixNano())
	}()
	requests, err := c.audit.Read()
	if err != nil {
		return nil, false, false, err
	}
	tr = c.recorder.Trace(requests, final)
	tr.Reference = c.reference
	verdicts := c.judgeTrace(tr, inBackground, start)
	if !inBackground && c.failsAnew(verdicts) {
		// A failure must hold on every change up to now (see
		// Recorder.CatchUp): judged again once the watches caught up.
		if err := c.catchUp(); err != nil {
			return nil, false, false, err
		}
		if requests, err = c.audit.Read(); err != nil {
			return nil, false, false, err
		}
		tr = c.recorder.Trace(requests, final)
		tr.Reference = c.reference
		verdicts = c.judgeTrace(tr, false, start)
		if alt, err := c.alternativeReference(tr, verdicts); err != nil {
			return nil, false, false, err
		} else if alt {
			tr.Reference = c.reference
			verdicts = c.judgeTrace(tr, false, start)
		}
	}
	for i, p := range c.spec.Properties {
		if !c.verdicts[i].Done {
			c.verdicts[i] = verdicts[i]
		}
		v := c.verdicts[i]
		if v.Err != nil && (healed.IsZero() || c.failedInSteps || !open) {
			decided = true
		}
		open = open || !v.Done && (healed.IsZero() || time.Since(healed) < p.Horizon())
	}
	if decided && healed.IsZero() {
		c.failedInSteps = true
	}
	return tr, open, decided, nil
}

// judgeTrace is each undecided property's verdict on tr (the zero
// verdict where decided); c.checkMu is held.
func (c *caseRun) judgeTrace(tr *properties.Trace, inBackground bool, start time.Time) []properties.Verdict {
	verdicts := make([]properties.Verdict, len(c.spec.Properties))
	for i, p := range c.spec.Properties {
		if c.verdicts[i].Done {
			continue
		}
		verdicts[i] = p.Check(tr)
		if inBackground {
			verdicts[i] = c.confirmInBackground(i, verdicts[i], start)
		}
	}
	return verdicts
}

// failsAnew reports whether a property undecided so far fails.
func (c *caseRun) failsAnew(verdicts []properties.Verdict) bool {
	for i, v := range verdicts {
		if !c.verdicts[i].Done && v.Err != nil {
			return true
		}
	}
	return false
}

// catchUpWithin bounds the wait for the case's watches to bring every
// change up to now.
const catchUpWithin = 30 * time.Second

// catchUp waits for the case's watches to bring every change up to now.
func (c *caseRun) catchUp() error {
	ctx, cancel := context.WithTimeout(c.ctx, catchUpWithin)
	defer cancel()
	at := time.Now()
	if err := c.recorder.CatchUp(ctx); err != nil {
		return fmt.Errorf("judging a failure: %w", err)
	}
	if waited := time.Since(at); waited > time.Second {
		c.logf("the watches took %v to bring every change up to now before a failure was judged", waited.Round(time.Millisecond))
	}
	return nil
}

// alternativeReference attaches to the case's reference run the one of
// its plan without the user changes that later ones set again before the
// case had carried them out (see properties.ReferenceRun.Alternative),
// once, when the referenced property fails anew and there are such
// changes: carried out means the case's state just before the change that
// set them again matched the reference's then. It reports whether it
// attached one. c.checkMu is held.
func (c *caseRun) alternativeReference(tr *properties.Trace, verdicts []properties.Verdict) (bool, error) {
	p := c.spec.Referenced()
	i := slices.IndexFunc(c.spec.Properties, func(q properties.Property) bool { return q == properties.Property(p) })
	// The end state is judged after the heal (before it, only the claims
	// deleted, which no other reference changes).
	if i < 0 || tr.Healed.IsZero() || c.reference == nil || c.reference.Failed != nil || c.alternativeTried || c.verdicts[i].Done || verdicts[i].Err == nil {
		return false, nil
	}
	c.alternativeTried = true
	setAgain := faults.SetAgain(c.plan)
	if len(setAgain) == 0 {
		return false, nil
	}
	// The k-th user change of the case is the k-th of its reference run.
	ordinal, n := map[int]int{}, 0
	for j, st := range c.plan {
		if faults.IsUserChange(st) {
			ordinal[j] = n
			n++
		}
	}
	caseTimes, refTimes := tr.UserChanges(), c.reference.Trace.UserChanges()
	var left []int
	for _, j := range slices.Sorted(maps.Keys(setAgain)) {
		k, ok := ordinal[setAgain[j]]
		if ok && k < len(caseTimes) && k < len(refTimes) && !p.Reached(tr, caseTimes[k], refTimes[k]) {
			left = append(left, j)
		}
	}
	if len(left) == 0 {
		return false, nil
	}
	var numbers []string // as plans count steps, from 1
	for _, j := range left {
		numbers = append(numbers, fmt.Sprint(j+1))
	}
	steps := "step " + strings.Join(numbers, ", ")
	if len(numbers) > 1 {
		steps = "steps " + strings.Join(numbers, ", ")
	}
	var plan []faults.Step
	for j, st := range c.plan {
		if !slices.Contains(left, j) {
			plan = append(plan, st)
		}
	}
	run, _, namespace, took, tornDown, err := c.env.reference(c.ctx, c.spec, p, plan)
	c.alternativeTornDown = tornDown
	if err != nil {
		return false, fmt.Errorf("the reference run without the user changes set again (%s): %w", steps, err)
	}
	if run.Failed != nil {
		c.logf("the reference run without the user changes set again before the case carried them out (%s) failed: %v", steps, run.Failed)
		return false, nil
	}
	alt := *run
	alt.NetOfBursts = c.reference.NetOfBursts || netted(plan)
	ref := *c.reference
	ref.Alternative = &alt
	c.reference = &ref
	where := "the one of an earlier case"
	if namespace != "" {
		where = fmt.Sprintf("%s, %.1fs", namespace, took.Seconds())
	}
	c.logf("reference run without the user changes set again before the case carried them out (%s): %s", steps, where)
	return true, nil
}

// backgroundCheckEvery is the least time between two checks made while a
// settle waits.
const backgroundCheckEvery = time.Second

// backgroundCheck is the check made while a settle waits (see
// caseRun.checkInBackground).
type backgroundCheck struct {
	running atomic.Bool
	wg      sync.WaitGroup
	mu      sync.Mutex // guards err
	// err ends the settles: errDecided once a check found a failure, or
	// the error a check met.
	err error
}

// checkInBackground starts a check of the trace so far, unless one is
// running or the last ended less than backgroundCheckEvery ago (or three
// times its duration: a check of a long trace takes long itself). It runs
// beside the settle, so it delays no step (an armed step's window is timed
// for the steps after it), and a failure that more trace cannot undo (a
// fight loop, a retry streak past its back-off, a safety property) ends
// the case as it happens, not after the settle's cap and the rest of the
// plan.
func (c *caseRun) checkInBackground() {
	b := &c.background
	gap := max(backgroundCheckEvery, 3*time.Duration(c.checkTook.Load()))
	if time.Since(time.Unix(0, c.checkEnded.Load())) < gap || !b.running.CompareAndSwap(false, true) {
		return
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer b.running.Store(false)
		_, _, decided, err := c.checkTrace(false, time.Time{}, true)
		if decided {
			err = cmp.Or(err, errDecided)
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		b.err = cmp.Or(b.err, err)
	}()
}

// confirmAfter is how long after a check in the background first found a
// property failing a later check must find it failing too.
const confirmAfter = time.Second

// confirmInBackground is the verdict a check made at `at`, while a settle
// waits, keeps: a failure once a check confirmAfter or more before found
// it too, nothing else (a pass or a first sighting stays undecided, for
// the next check). Each resource has its own watch stream, so a change
// can arrive after later changes of another resource (a ReplicaSet's
// status before the deletions of its pods, written earlier); the
// recorder then rebuilds the states after it, and a state judged before
// it arrived may never have existed. After a settle every change is in;
// while one waits, the second sighting is what shows it.
func (c *caseRun) confirmInBackground(i int, v properties.Verdict, at time.Time) properties.Verdict {
	undecided := properties.Verdict{Detail: v.Detail}
	if !v.Done || v.Err == nil {
		delete(c.suspected, i)
		return undecided
	}
	first, ok := c.suspected[i]
	if !ok {
		if c.suspected == nil {
			c.suspected = map[int]time.Time{}
		}
		c.suspected[i] = at
		return undecided
	}
	if at.Sub(first) < confirmAfter {
		return undecided
	}
	return v
}

// backgroundVerdict is errDecided once a check in the background found a
// failure, or the error it met.
func (c *caseRun) backgroundVerdict() error {
	c.background.mu.Lock()
	defer c.background.mu.Unlock()
	return c.background.err
}

// failedSoFar names the properties that failed so far.
func (c *caseRun) failedSoFar() string {
	// A check in the background may still be writing the verdicts.
	c.checkMu.Lock()
	defer c.checkMu.Unlock()
	var names []string
	for i, v := range c.verdicts {
		if v.Err != nil {
			names = append(names, c.spec.Properties[i].Name())
		}
	}
	return strings.Join(names, ", ")
}

// judge checks the properties on the growing trace until the outcome is
// in or the longest horizon has passed.
func (c *caseRun) judge(ctx context.Context, plan []faults.Step) (*Report, error) {
	healed := time.Now()
	var tr *properties.Trace
	for final := false; ; {
		// The case ends when its outcome is in (see check; the
		// properties undecided then stay so), or when every verdict is in
		// or the undecided ones' horizons have passed: safety properties
		// (horizon 0) then get their final verdict on the whole trace.
		var open, decided bool
		var err error
		tr, open, decided, err = c.check(final, healed)
		if err != nil {
			return nil, err
		}
		if final || decided && c.failedInSteps {
			break
		}
		// A failure after the heal ends the case, but the properties
		// before it whose horizon passed undecided (a check of a long
		// trace takes seconds under load: the trace it judged may end
		// short of their deadline) get their final verdict first: one
		// of them may be the failure to report.
		if final = !open || decided; final {
			continue
		}
		// A check of a long trace (a controller that churns thousands of
		// writes) takes long itself: waiting as long again between checks
		// keeps judging to half of one core, whatever the trace's length.
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(max(200*time.Millisecond, time.Duration(c.checkTook.Load()))):
		}
	}
	rep := &Report{Namespace: c.namespace, Plan: plan, Trace: tr, NoOps: c.noOps, Unrun: c.unrun, ForeignWrites: c.ctlFaults.ForeignWrites(), watched: c.ctlFaults.Watched()}
	if len(rep.ForeignWrites) > 0 {
		c.logf("the controller wrote into other cases' namespaces: %s", strings.Join(rep.ForeignWrites, "; "))
	}
	for i, v := range c.verdicts {
		name := c.spec.Properties[i].Name()
		if v.Err != nil {
			rep.Failures = append(rep.Failures, Failure{Property: name, index: i, Message: v.Err.Error(), Detail: v.Detail, Evidence: v.Evidence})
			c.logf("property %s FAILED: %v (%s)", name, v.Err, v.Detail)
		} else if !v.Done {
			// The case ended at an earlier property's failure.
			c.logf("property %s undecided (%s)", name, v.Detail)
		} else {
			if v.NotJudged {
				rep.NotJudged = append(rep.NotJudged, Failure{Property: name, index: i, Message: v.Detail})
			}
			c.logf("property %s holds (%s)", name, v.Detail)
		}
	}
	c.pendingClaims(ctx)
	c.logf("writes per manager: %s", writesPerManager(tr))
	c.logMu.Lock()
	rep.Timeline = append([]string(nil), c.timeline...)
	c.logMu.Unlock()
	return rep, nil
}
