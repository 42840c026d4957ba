package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness/internal/inject"
	"github.com/kubeprop/kubeprop/harness/internal/record"
	"github.com/kubeprop/kubeprop/harness/kubelet"
	"github.com/kubeprop/kubeprop/properties"
)

// caseRun is one case in progress.
type caseRun struct {
	env       *Env
	spec      Spec
	namespace string
	nodes     []*kubelet.Node
	fixtures  []client.Object
	desired   desiredStates // of the fixtures, for Recreate
	// unmade are the fixtures a Recreate deleted but could not create
	// again while the faults went on (see finishRecreates).
	unmade []int
	// waiting are the indices in the plan of the user changes after an
	// unmade Recreate: made after it, in order (see finishUserChanges).
	waiting     []int
	recorder    *record.Recorder
	audit       *record.AuditReader
	faultClient client.Client
	userClient  client.Client
	logger      logr.Logger // the controller's, writing to ctlLog
	ctlLog      *controllerLog
	started     time.Time
	lastStepAt  time.Time // when the step before the one being applied began (SinceLastStep)
	skip        []int     // indices of the plan's user changes its reference run could not make: no-ops

	ctx       context.Context // the case's, for restarts after a crash
	ctlFaults *inject.Faults
	reachable atomic.Bool // the controller talks to the API server through the harness: controller faults apply

	ctlMu          sync.Mutex // guards stopController, crashErr and nextView
	stopController func() error
	nextView       staleView      // the view the controller's next instance is served
	crashErr       error          // a restart after a crash that failed
	crashes        sync.WaitGroup // restarts after crashes under way

	step  int   // the index of the step being applied
	noOps []int // the steps that no longer applied
	unrun []int // the steps after a failure was in

	// verdicts are the properties' verdicts so far, checked at the end of
	// each settle during the steps, and after the heal.
	verdicts []properties.Verdict
	// failedInSteps: a property failed during the steps, which ended them.
	failedInSteps bool
	// armedRan: an armed step ran; the steps are no longer judged at the
	// end of their settles (only beside them, see checkInBackground).
	armedRan bool
	// checkMu serialises the checks: the audit reader reads on from where
	// the last check stopped, and each check updates the verdicts.
	checkMu    sync.Mutex
	checkTook  atomic.Int64 // how long the last check took, in ns
	checkEnded atomic.Int64 // when the last check ended, in unix ns
	background backgroundCheck
	// suspected: when a check in the background first found property i
	// failing (see confirmInBackground); guarded by checkMu.
	suspected map[int]time.Time

	logMu    sync.Mutex // guards timeline and named
	timeline []string
	// named are the steps that the case named as they acted, by index: a
	// CrashAfterWrite by the write it crashed after.
	named map[int]faults.Step
	// reference is the case's reference run, when a property judges
	// against one.
	reference *properties.ReferenceRun
	// plan is the case's plan, its user changes as its reference run
	// named them.
	plan []faults.Step
	// alternativeTried: alternativeReference ran; alternativeTornDown,
	// when set, returns once the reference run it made has torn down.
	alternativeTried    bool
	alternativeTornDown func()
}

var caseSeq atomic.Int64

// caseNamespacePrefix starts the name of every case's namespace.
const caseNamespacePrefix = "kp-"

// isCaseNamespace reports whether a namespace is a case's (this one's or
// another's).
func isCaseNamespace(ns string) bool {
	rest, ok := strings.CutPrefix(ns, caseNamespacePrefix)
	_, err := strconv.ParseUint(rest, 10, 64)
	return ok && err == nil
}

// Run is harness.Run: see its documentation there.
func Run(ctx context.Context, env *Env, spec Spec, plan []faults.Step) (*Report, error) {
	return run(ctx, env, spec, plan, nil)
}

// RunCase is run, for the search.
func RunCase(ctx context.Context, env *Env, spec Spec, plan []faults.Step, judged func(*Report)) (*Report, error) {
	return run(ctx, env, spec, plan, judged)
}

// run is Run; judged, when set, gets the report as soon as the properties
// judged it, before the teardown (which writes the report's Teardown,
// Timeline and Times until run returns).
func run(ctx context.Context, env *Env, spec Spec, plan []faults.Step, judged func(*Report)) (rep *Report, err error) {
	if err := env.running(); err != nil {
		return nil, err
	}
	spec = spec.withDefaults()
	if err := spec.validate(); err != nil {
		return nil, err
	}
	// The reference run comes first: it is a case of its own.
	var times Times
	var reference *properties.ReferenceRun
	var skip []int // the user changes the reference run could not make
	var referenceLine string
	if p := spec.Referenced(); p != nil {
		var namespace string
		var named []faults.Step
		var referenceTornDown func()
		reference, named, namespace, times.Reference, referenceTornDown, err = env.reference(ctx, spec, p, plan)
		// The reference tears down while the case runs.
		defer referenceTornDown()
		if err != nil {
			return nil, fmt.Errorf("the reference run: %w", err)
		}
		plan, skip = asReferenceNamed(plan, named, spec.Nodes)
		if netted(plan) {
			net := *reference
			net.NetOfBursts = true
			reference = &net
		}
		referenceLine = "reference run: the one of an earlier case with these user changes"
		if namespace != "" {
			referenceLine = fmt.Sprintf("reference run: %s, %.1fs", namespace, times.Reference.Seconds())
		}
	}
	n := caseSeq.Add(1)
	c := &caseRun{reference: reference, env: env, spec: spec, namespace: fmt.Sprintf("%s%d", caseNamespacePrefix, n),
		ctlLog: newControllerLog(evidenceLimit), stopController: func() error { return nil }, started: time.Now(), named: map[int]faults.Step{}, skip: skip}
	c.logger = c.ctlLog.logger(c.started)
	c.plan = plan
	defer func() {
		if c.alternativeTornDown != nil {
			c.alternativeTornDown()
		}
	}()
	// A write by the conflicting writer is an event that drives what
	// follows it.
	c.recorder = record.New(record.Options{TimeScale: env.timeScale, Controller: UserController, FaultManagers: []string{faults.ConflictingWriterManager}})
	c.ctlFaults = inject.New(inject.Options{
		Namespace: c.namespace, IsCaseNamespace: isCaseNamespace, Scheme: spec.Scheme, Mapper: env.mapper,
		Refused: func(req properties.Request) {
			req.User = UserController
			c.recorder.InjectedRequest(req)
		},
		Crashed: c.crashed,
		Delivered: func(at time.Time) {
			c.recorder.Event(properties.Event{At: at, Kind: properties.DeliveryEvent, Name: "watch events held back delivered"})
		},
	})
	c.verdicts = make([]properties.Verdict, len(spec.Properties))
	ctx = withCase(ctx, c)
	c.ctx = ctx
	defer trackCase(c)()
	if referenceLine != "" {
		c.logf("%s", referenceLine)
	}
	defer func() {
		c.background.wg.Wait()
		td := c.teardown()
		if rep == nil && err != nil && len(td.Left) > 0 {
			err = fmt.Errorf("%w; teardown left: %s", err, strings.Join(td.Left, "; "))
		}
		if err != nil {
			err = fmt.Errorf("case %s: %w", c.namespace, err)
		}
		if rep != nil {
			rep.Teardown = td
			for _, f := range td.Forced {
				rep.Timeline = append(rep.Timeline, c.stamp("teardown: "+f))
			}
			for _, l := range td.Left {
				rep.Timeline = append(rep.Timeline, c.stamp("teardown left: "+l))
			}
			rep.Timeline = append(rep.Timeline, c.stamp(fmt.Sprintf("teardown took %.1fs (%s)", td.Took.Seconds(), strings.Join(td.Phases, ", "))))
			rep.Times = times
			rep.Times.Teardown = td.Took
			rep.ControllerLog = c.ctlLog.Bytes()
			rep.Timeline = append(rep.Timeline, c.stamp("times: "+rep.Times.String()))
		}
	}()

	// A failure that more trace cannot change ends the steps: the steps
	// after it cannot undo it, and the shrinker drops them at once.
	err = c.setup(ctx, n)
	decided := errors.Is(err, errDecided)
	if err != nil && !decided {
		return nil, err
	}
	times.Setup = time.Since(c.started)
	c.lastStepAt = c.started
	for i, step := range plan {
		if decided {
			c.unrun = append(c.unrun, i)
			continue
		}
		if len(c.unmade) > 0 && faults.IsUserChange(step) {
			// The user's commands run in order: the change is the
			// reference run's after the Recreate's create, and made
			// before it, it would act on the old incarnation's objects.
			c.waiting = append(c.waiting, i)
			c.logf("step %s: after the Recreate not done yet; made once it is", faults.Format(step))
			times.Steps = append(times.Steps, 0)
			continue
		}
		at := time.Now()
		decided, err = c.applyStep(ctx, i, step)
		if err != nil {
			return nil, err
		}
		times.Steps = append(times.Steps, time.Since(at))
		c.lastStepAt = at
	}
	if len(c.unrun) > 0 {
		c.logf("steps not run: %d of %d", len(c.unrun), len(plan))
	}
	// The checks of the steps are over before the heal (see check).
	c.background.wg.Wait()
	healing := time.Now()
	// Heal: every fault stops. Lost nodes may stay lost; crash loops end;
	// a controller killed by a crash is back.
	env.Kubelets().StopCrashLoops(c.namespace)
	c.ctlFaults.Heal()
	c.crashes.Wait()
	if err := c.takeCrashErr(); err != nil {
		return nil, err
	}
	// A case already failed is judged as it is: no name to wait for.
	if !c.failedInSteps {
		if err := c.finishUserChanges(ctx, plan); err != nil {
			return nil, err
		}
	}
	c.unrun = append(c.unrun, c.waiting...)
	slices.Sort(c.unrun)
	c.recorder.Heal(time.Now())
	c.logf("healed: faults stop")
	rep, err = c.judge(ctx, c.namedPlan(plan))
	times.Judge = time.Since(healing)
	if err == nil && rep.Failed() {
		rep.Events = c.events(ctx)
	}
	if err == nil && judged != nil {
		judged(rep)
	}
	return rep, err
}

// applyStep applies the plan's i-th step and settles; decided is set
// when a property failed for good.
func (c *caseRun) applyStep(ctx context.Context, i int, step faults.Step) (decided bool, _ error) {
	c.step = i
	c.armedRan = c.armedRan || faults.IsArmed(step)
	c.recorder.Event(stepEvent(step, time.Now()))
	var err error
	if slices.Contains(c.skip, i) {
		err = fmt.Errorf("%w: the reference run could not make it", faults.ErrNoOp)
	} else {
		err = step.Apply(ctx, c)
	}
	switch {
	case errors.Is(err, errDecided):
		decided = true
		c.logf("step %s", faults.Format(step))
	case errors.Is(err, faults.ErrNoOp):
		c.noOps = append(c.noOps, i)
		c.logf("step %s: %v", faults.Format(step), err)
	case err != nil:
		return false, fmt.Errorf("applying %s: %w", faults.Format(step), err)
	default:
		c.logf("step %s", faults.Format(step))
		// An armed step waits for what comes next (its window may
		// span the next step); any other acts now.
		if !faults.IsArmed(step) {
			c.recorder.Acted()
		}
	}
	if !decided {
		err := c.Settle(ctx)
		decided = errors.Is(err, errDecided)
		if err != nil && !decided {
			return false, err
		}
	}
	if err := c.takeCrashErr(); err != nil {
		return false, err
	}
	if decided {
		c.logf("a property failed: %s", c.failedSoFar())
	} else {
		c.logf("settled")
	}
	return decided, nil
}

// namedPlan is the plan with the steps named as they acted.
func (c *caseRun) namedPlan(plan []faults.Step) []faults.Step {
	c.logMu.Lock()
	defer c.logMu.Unlock()
	if len(c.named) == 0 {
		return plan
	}
	plan = slices.Clone(plan)
	for _, i := range slices.Sorted(maps.Keys(c.named)) {
		s := c.named[i]
		c.timeline = append(c.timeline, c.stamp(fmt.Sprintf("step %d %s is %s", i+1, faults.Format(plan[i]), faults.Format(s))))
		plan[i] = s
	}
	return plan
}

func (c *caseRun) logf(format string, args ...any) {
	c.logMu.Lock()
	defer c.logMu.Unlock()
	c.timeline = append(c.timeline, c.stamp(fmt.Sprintf(format, args...)))
}

// stamp prefixes a timeline line with the case's time.
func (c *caseRun) stamp(line string) string {
	return fmt.Sprintf("%7.2fs  %s", time.Since(c.started).Seconds(), line)
}

// writesPerManager counts writes by field manager, most first.
func writesPerManager(tr *properties.Trace) string {
	counts := map[string]int{}
	for _, w := range tr.Writes {
		counts[w.Manager]++
	}
	var managers []string
	for m := range counts {
		managers = append(managers, m)
	}
	sort.Slice(managers, func(i, j int) bool {
		if counts[managers[i]] != counts[managers[j]] {
			return counts[managers[i]] > counts[managers[j]]
		}
		return managers[i] < managers[j]
	})
	parts := make([]string, len(managers))
	for i, m := range managers {
		parts[i] = fmt.Sprintf("%s %d", m, counts[m])
	}
	return strings.Join(parts, ", ")
}

// stepEvent is the trace's event of a step applied at at: a user change,
// or a fault.
func stepEvent(s faults.Step, at time.Time) properties.Event {
	kind := properties.FaultEvent
	if faults.IsUserChange(s) {
		kind = properties.UserEvent
	}
	return properties.Event{At: at, Kind: kind, Name: faults.Format(s)}
}
