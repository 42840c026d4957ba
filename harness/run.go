package harness

import (
	"cmp"
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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness/internal/inject"
	"github.com/kubeprop/kubeprop/harness/internal/record"
	"github.com/kubeprop/kubeprop/harness/kubelet"
	"github.com/kubeprop/kubeprop/properties"
)

// Field managers of the harness's own writers.
const (
	ManagerFaults = "kubeprop-faults"
	ManagerUser   = "kubeprop-user"
)

// Report is the outcome of one case.
type Report struct {
	// Namespace is the case's (kp-N): its objects' namespace, and the
	// zone of its nodes.
	Namespace string
	Plan      []faults.Step
	// Failures are the properties that failed, in the Spec's order. A
	// failure found while a step settles that more trace cannot change (a
	// safety property violated, a retry streak beyond its budget, a fight)
	// ends the case; after the heal, the first failure in the Spec's order
	// does, once the properties before it are decided. The properties
	// still undecided then are not among them.
	Failures []Failure
	// Timeline is the case, step by step, for the log.
	Timeline []string
	// Trace is everything recorded.
	Trace *properties.Trace
	// NoOps are the indices in Plan of the steps that no longer applied
	// (a NodeRecover of a node never lost): the shrinker drops them first.
	NoOps []int
	// Unrun are the indices in Plan of the steps not run because a
	// property had failed before them: the shrinker drops them first too.
	Unrun []int
	// ForeignWrites are the controller's writes into other cases'
	// namespaces ("create pods in kp-7"), each once: such a controller
	// cannot share the cluster with cases running beside it.
	ForeignWrites []string
	// Teardown is what ending the case had to force or left behind.
	Teardown Teardown
	// Times is where the case's wall time went.
	Times Times
	// ControllerLog is the controller's own log for the case (a Manager's
	// or a Func's logr output, a Process's stdout and stderr), its last
	// 5 MiB (evidenceLimit); complete once Run returns.
	ControllerLog []byte
	// Events are the case namespace's Events when a failed case was
	// judged, oldest first (none for a pass).
	Events []corev1.Event
	// Shrinking: in a search, the case ran a candidate of the shrink, not
	// a plan drawn.
	Shrinking bool
	// watched are the resources an in-process controller watched: where
	// the search's probe aims its stale views.
	watched []string
}

// Times is where a case's wall time went: setup (namespace, nodes,
// fixtures, the controller, the first settle), each step with the settle
// after it, the heal and the properties' judging, and teardown.
type Times struct {
	// Reference is the reference run's, when the case ran one (zero when
	// an earlier case's was reused).
	Reference              time.Duration
	Setup, Judge, Teardown time.Duration
	Steps                  []time.Duration
}

// Total is the case's wall time.
func (t Times) Total() time.Duration {
	total := t.Reference + t.Setup + t.Judge + t.Teardown
	for _, s := range t.Steps {
		total += s
	}
	return total
}

func (t Times) String() string {
	steps := make([]string, len(t.Steps))
	for i, s := range t.Steps {
		steps[i] = fmt.Sprintf("%.1fs", s.Seconds())
	}
	reference := ""
	if t.Reference > 0 {
		reference = fmt.Sprintf("reference %.1fs, ", t.Reference.Seconds())
	}
	return fmt.Sprintf("%ssetup %.1fs, steps [%s], judge %.1fs, teardown %.1fs", reference, t.Setup.Seconds(), strings.Join(steps, " "), t.Judge.Seconds(), t.Teardown.Seconds())
}

// Failure is one property that did not hold.
type Failure struct {
	Property string
	index    int
	// Message is deterministic: what rapid compares while shrinking.
	Message string
	// Detail has the times and counts.
	Detail string
	// Evidence is what the failure rests on: the timeline page draws it.
	Evidence properties.Evidence
}

// Failed reports whether any property failed.
func (r *Report) Failed() bool { return len(r.Failures) > 0 }

// FailedOn reports whether the named property failed; with the name empty,
// whether any did.
func (r *Report) FailedOn(property string) bool {
	return slices.ContainsFunc(r.Failures, func(f Failure) bool { return property == "" || f.Property == property })
}

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

// Run runs one plan on env without rapid: a fresh namespace, nodes and
// controller, the fixtures, each step followed by a settle, then the heal
// and the properties' verdicts. The error is for the harness's own
// failures; the properties' failures are in the report.
func Run(ctx context.Context, env *Env, spec Spec, plan []faults.Step) (*Report, error) {
	return run(ctx, env, spec, plan, nil)
}

// run is Run; judged, when set, gets the report as soon as the properties
// judged it, before the teardown (which writes the report's Teardown,
// Timeline and Times until run returns).
func run(ctx context.Context, env *Env, spec Spec, plan []faults.Step, judged func(*Report)) (rep *Report, err error) {
	spec = spec.withDefaults()
	if err := spec.validate(); err != nil {
		return nil, err
	}
	// The reference run comes first: it is a case of its own.
	var times Times
	var reference *properties.ReferenceRun
	var skip []int // the user changes the reference run could not make
	var referenceLine string
	if p := spec.referenced(); p != nil {
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

func (c *caseRun) setup(ctx context.Context, n int64) error {
	env := c.env
	var err error
	if c.faultClient, err = client.New(env.Config(), client.Options{Scheme: c.spec.Scheme, Mapper: env.mapper}); err != nil {
		return fmt.Errorf("creating the faults' client: %w", err)
	}
	c.faultClient = client.WithFieldOwner(c.faultClient, ManagerFaults)
	user, err := client.NewWithWatch(env.userConfig, client.Options{Scheme: c.spec.Scheme, Mapper: env.mapper})
	if err != nil {
		return fmt.Errorf("creating the user's client: %w", err)
	}
	c.userClient = client.WithFieldOwner(c.trackUserChanges(user), ManagerUser)
	if err := c.userClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.namespace}}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", c.namespace, err)
	}
	names := make([]string, c.spec.Nodes)
	for i := range names {
		names[i] = fmt.Sprintf("%s-node-%d", c.namespace, i)
	}
	env.nodes.claim(c.namespace, names...)
	for _, name := range names {
		// A zone of its own: the node lifecycle controller computes zone
		// states and eviction rates per case.
		node, err := env.Kubelets().AddNodeWithLabels(ctx, name, map[string]string{corev1.LabelTopologyZone: c.namespace})
		if err != nil {
			return err
		}
		c.nodes = append(c.nodes, node)
	}
	c.fixtures = c.spec.Fixtures(c.namespace)
	resources, err := c.watchedResources()
	if err != nil {
		return err
	}
	if c.audit, err = record.NewAuditReader(env.Cluster().AuditLogPath(), c.namespace); err != nil {
		return err
	}
	if err := c.recorder.Watch(ctx, env.dynamic, c.namespace, resources); err != nil {
		return err
	}
	for _, f := range c.fixtures {
		f.SetNamespace(c.namespace)
	}
	if err := c.keepDesired(c.fixtures); err != nil {
		return err
	}
	for _, f := range c.fixtures {
		if err := c.userClient.Create(ctx, f); err != nil {
			return fmt.Errorf("creating fixture %s: %w", f.GetName(), err)
		}
	}
	stop, err := c.spec.Controller.start(ctx, c)
	if err != nil {
		return err
	}
	c.stopController = stop
	c.recorder.Acted()
	c.logf("setup: namespace, %d nodes, %d fixtures, controller started", len(c.nodes), len(c.fixtures))
	if err := c.awaitController(ctx); err != nil {
		return err
	}
	if err := c.awaitGoals(ctx); err != nil {
		return err
	}
	// Spec.Setup bounds the whole: what the controller's start left.
	if err := c.settle(ctx, max(c.spec.Setup-time.Since(c.started), c.spec.SettleQuiet)); err != nil {
		if errors.Is(err, errDecided) {
			c.logf("a property failed before the first step: %s", c.failedSoFar())
		}
		return err
	}
	c.logf("settled")
	return nil
}

// awaitController waits, within Spec.Setup, until the controller has
// acted on the fixtures: its first write of its own kinds, or Spec.Ready
// holding; or until it panicked or exited, which NoPanics reports.
// kube-controller-manager (ControllerManager) acts as itself, not through
// the harness: its cases settle as they are.
func (c *caseRun) awaitController(ctx context.Context) error {
	if _, shared := c.spec.Controller.(controllerManager); shared {
		return nil
	}
	start := time.Now()
	var notReady error
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, c.spec.Setup, true, func(context.Context) (bool, error) {
		select {
		case <-c.ctlFaults.Acted():
			return true, nil
		default:
		}
		if c.recorder.Panics() > 0 {
			return true, nil
		}
		if c.spec.Ready == nil {
			return false, nil
		}
		notReady = c.spec.Ready(properties.State{At: time.Now(), Objects: c.recorder.Current()})
		return notReady == nil, nil
	})
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil && c.spec.Ready != nil:
		return fmt.Errorf("the controller did not act on the fixtures within %v of its start: it made no write of its own kinds in namespace %s (a lease renewal or an Event does not count), and Spec.Ready did not hold (%v): check that it watches the case's namespace and the fixtures' kinds, or raise Spec.Setup", c.spec.Setup, c.namespace, notReady)
	case err != nil:
		return fmt.Errorf("the controller did not act on the fixtures within %v of its start: it made no write of its own kinds in namespace %s (a lease renewal or an Event does not count): check that it watches the case's namespace and the fixtures' kinds (and wins its leader election), raise Spec.Setup, or, for a controller with nothing to write, say when it is ready with Spec.Ready", c.spec.Setup, c.namespace)
	}
	c.logf("the controller acted %.1fs after its start", time.Since(start).Seconds())
	return nil
}

// awaitGoals waits, within what is left of Spec.Setup, until the
// predicate of every properties.Goal holds on the fixtures: the first
// step then lands on the system the controller has brought to rest.
// Quiet alone does not tell: under load the kubelets' and the built-in
// controllers' updates (a StatefulSet's ready members) can come more than
// the settle's quiet period after the controller's last write, and the
// controller's answer to them after that. A goal that does not hold in
// time is logged and the steps go on: the properties judge the case.
func (c *caseRun) awaitGoals(ctx context.Context) error {
	var goals []properties.Goal
	for _, p := range c.spec.Properties {
		if g, ok := p.(properties.Goal); ok {
			goals = append(goals, g)
		}
	}
	if len(goals) == 0 {
		return nil
	}
	start := time.Now()
	var unmet error
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, max(c.spec.Setup-time.Since(c.started), c.spec.SettleQuiet), true, func(context.Context) (bool, error) {
		if c.recorder.Panics() > 0 {
			return true, nil // NoPanics reports it
		}
		state := properties.State{At: time.Now(), Objects: c.recorder.Current()}
		for _, g := range goals {
			if unmet = g.Goal()(state); unmet != nil {
				unmet = fmt.Errorf("%s: %w", g.Name(), unmet)
				return false, nil
			}
		}
		return true, nil
	})
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		c.logf("setup: a goal did not hold within Spec.Setup (%v); the steps go on", unmet)
	default:
		c.logf("setup: the goals held %.1fs after the controller acted", time.Since(start).Seconds())
	}
	return nil
}

// watchedResources are the fixtures' kinds, Pods and Spec.Watch.
func (c *caseRun) watchedResources() ([]schema.GroupVersionResource, error) {
	gvks := []schema.GroupVersionKind{corev1.SchemeGroupVersion.WithKind("Pod"), corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim")}
	for _, f := range c.fixtures {
		gvk, err := apiutil.GVKForObject(f, c.spec.Scheme)
		if err != nil {
			return nil, fmt.Errorf("fixture %s: %w; add its type to Spec.Scheme", f.GetName(), err)
		}
		gvks = append(gvks, gvk)
	}
	gvks = append(gvks, c.spec.Watch...)
	seen := map[schema.GroupVersionResource]bool{}
	var out []schema.GroupVersionResource
	for _, gvk := range gvks {
		m, err := c.env.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, fmt.Errorf("kind %s is not served: %w; install its CRD through EnvOptions.CRDDirectoryPaths", gvk, err)
		}
		if !seen[m.Resource] {
			seen[m.Resource] = true
			out = append(out, m.Resource)
		}
	}
	return out, nil
}

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
	p := c.spec.referenced()
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
