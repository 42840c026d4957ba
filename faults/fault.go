package faults

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"reflect"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"pgregory.net/rapid"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Step is one drawn fault step.
type Step interface {
	// Fault is the name of the fault that drew the step, as scenario files
	// spell it.
	Fault() string
	// Apply carries the step out. An error wrapping ErrNoOp means the step
	// no longer applied.
	Apply(ctx context.Context, t Target) error
}

// Fault draws steps of one kind.
type Fault interface {
	// Name is the fault's name in plans and scenario files.
	Name() string
	// Steps draws a step for a case of the given shape.
	Steps(c Config) *rapid.Generator[Step]
	// Decode reads a step's fields from a scenario file.
	Decode(fields []byte) (Step, error)
}

// What a fault or a step can do beyond drawing and applying is declared by
// the small interfaces below, which a fault written outside this package
// implements as the catalog's do: Validator, Simplifiable,
// DesiredStateChange and Armed.

// Validator is a Fault with options to check: harness.Spec's validation
// calls Validate, so that bad options fail before the first case, with an
// error that names the fault, the option and the fix.
type Validator interface {
	Fault
	Validate() error
}

// Simplifiable is a Step with simpler forms for the shrinker to try once
// it can drop no more steps: the crash after the first write rather than
// the third, one conflicting write rather than five. Steps whose values
// carry no order of simplicity are not Simplifiable.
type Simplifiable interface {
	Step
	// Simpler returns the step's simpler forms, simplest first.
	Simpler() []Step
}

// Simpler returns a step's simpler forms, simplest first, or none.
func Simpler(s Step) []Step {
	if v, ok := s.(Simplifiable); ok {
		return v.Simpler()
	}
	return nil
}

// DesiredStateChange is a Step that is the user changing the desired
// state (ScaleChange, UserChange, VolumeGrowth) rather than a fault: the
// properties judge the controller's answer to it, and the timeline and
// the trace's events mark it as the user's.
type DesiredStateChange interface {
	Step
	UserChange()
}

// Config is the shape of a case that steps are drawn for.
type Config struct {
	Nodes    int // simulated nodes
	Fixtures int // the user's objects
	// Objects are the fixtures as the case creates them, when known:
	// values are drawn next to theirs (a scale to one more replica than
	// the fixture's).
	Objects []client.Object
	// Writes are the controller's distinct writes in a run with no fault,
	// when known (WritesKnown): where aimed steps land (see Aimer).
	Writes []WriteMatch
	// WritesKnown: Writes are what a run showed. When they are not, an
	// aim at a write aims at every write (errors answered to all, a crash
	// after the first writes of any kind), and the aims at what the
	// controller makes (its pods crash-looping, a node lost under them)
	// are taken as if it made pods: what a search aims at before it has
	// seen the controller act.
	WritesKnown bool
	// Provoked are, for each of Writes, the user changes (by fault name)
	// after which the controller made it in that run; a write it made
	// only before any change has none. A plan aimed at a write follows
	// its step with one of them.
	Provoked map[WriteMatch][]string
	// Watched are the resources the controller watched in that run
	// ("pods", "podsets"), sorted: where a stale view of one kind lands.
	Watched []string
}

// Target is what steps act on: one case of the harness.
type Target interface {
	Namespace() string
	// Client writes as the fault injector, a field manager of its own.
	Client() client.Client
	// UserClient writes as the user, for changes of the desired state.
	UserClient() client.Client
	// Fixtures are the user's objects of the case, by index.
	Fixtures() []client.Object
	// Children are the objects the fixtures own, sorted by kind and name.
	Children(ctx context.Context) ([]client.Object, error)
	// Pods are the namespace's pods, sorted by name.
	Pods(ctx context.Context) ([]corev1.Pod, error)
	// LoseNode loses the i-th node and returns once the cluster has
	// reacted: the node tainted unreachable, its evictable pods evicted.
	LoseNode(ctx context.Context, i int) error
	RecoverNode(i int) error
	KillContainer(ctx context.Context, pod, container string, exitCode int32, reason string) error
	// CrashLoop makes a container crash starts times (see CrashLoopStep).
	CrashLoop(ctx context.Context, pod, container string, starts int, exitCode int32) error
	// SetReady overrides a container's readiness.
	SetReady(ctx context.Context, pod, container string, ready bool) error
	// FailLiveness makes a container's liveness probe fail for window.
	FailLiveness(ctx context.Context, pod, container string, window time.Duration) error
	// RestartController stops the controller and starts a new instance;
	// with stale, one served the cluster's view of stale ago (see
	// ControllerRestartStep).
	RestartController(ctx context.Context, stale time.Duration) error
	// SinceLastStep is how long ago the step before the one being applied
	// began; for the first step, how long ago the case's setup began.
	SinceLastStep() time.Duration
	// RecreateFixture deletes the i-th fixture and creates it again under
	// its name from the user's desired state (see RecreateStep); with
	// settle, the system settles between the two.
	RecreateFixture(ctx context.Context, i int, settle bool) error
	// FailWrites answers the controller's API writes that match with
	// err: the next requests of them, or, when requests is 0, all of them
	// for window.
	FailWrites(err APIError, match WriteMatch, requests int, window time.Duration) error
	// NameStep records that the step being applied acted as named: on
	// what it picked by index, now by name (the claim it grew). The
	// report, the shrinker and the scenario file carry the named step,
	// and a case makes the user changes its reference run named as they
	// were named there: the same claim, whatever number of claims the
	// case has when the step comes.
	NameStep(named Step)
	// CrashAfterWrites kills the controller right after its writes-th API
	// write from now on that match names, and starts a new instance.
	CrashAfterWrites(match WriteMatch, writes int) error
	// DelayWatches delays the controller's watch events by delay for
	// window: those of resource's watches, or, when it is "", of all.
	DelayWatches(resource string, delay, window time.Duration) error
	// DropWatches cuts the controller's open watches of resource, or,
	// when it is "", all.
	DropWatches(resource string) error
	// Settle waits until the controller and the cluster are quiet. Its
	// error ends the step: it is also how the harness ends a case whose
	// property failed for good, so return it wrapped with %w or as it is.
	Settle(ctx context.Context) error
}

// ErrNoOp is wrapped by Apply's error when a step no longer applies.
var ErrNoOp = errors.New("no-op")

// noOp returns an error wrapping ErrNoOp that says why.
func noOp(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNoOp, fmt.Sprintf(format, args...))
}

// Default is a sensible set for a controller of replicated pods: nodes
// lost and recovered, containers killed or crash-looping, pods flapping
// readiness, replicas changed by the user (one at a time, or in bursts
// faster than the controller looks), a fixture deleted and created again,
// owned objects deleted, the controller restarted (with a fresh or a stale
// view), and the faults OnController (API errors, a crash between writes,
// stale watches; no-ops on a controller that is not in process).
func Default() []Fault {
	return append([]Fault{
		NodeLoss(), NodeRecover(), ContainerKill(ContainerKillOptions{}), CrashLoop(), ReadinessFlap(), ScaleChange(ScaleOptions{}),
		Burst(), Recreate(), ChildDelete(), ControllerRestart(),
	}, OnController()...)
}

// OnController are the faults that act on the controller under test
// itself, not on the cluster around it: errors answered to its writes, a
// crash between two of its writes, a stale view through its watches.
// They apply to controllers whose requests go through the harness.
func OnController() []Fault {
	return []Fault{APIErrors(), CrashAfterWrite(), StaleWatch()}
}

// Catalog is every fault kubeprop has, with default options: what a
// scenario file may name.
func Catalog() []Fault {
	return append(Default(), ConflictingWriter(ConflictOptions{}), LivenessFailure(), VolumeGrowth())
}

// Plan draws a whole plan up front: between 1 and maxSteps steps. Half of
// the plans draw each step from any of the faults; with swarmFaults
// faults or more, the other half from a subset of them drawn for the
// plan, each fault in it with even odds (swarm testing: Groce et al.,
// ISSTA 2012). A plan of few faults has room for many steps of each and
// lacks the faults that would mask a bug (a restart that clears a stale
// memory). Of two or three faults, a subset mostly leaves out one that a
// bug needs: every plan draws from all of them. Armed steps drawn after
// the plan's last other step are moved before it (ArmedBeforeAction).
func Plan(fs []Fault, c Config, maxSteps int) *rapid.Generator[[]Step] {
	return rapid.Map(drawPlan(fs, c, maxSteps), ArmedBeforeAction)
}

func drawPlan(fs []Fault, c Config, maxSteps int) *rapid.Generator[[]Step] {
	gens := make([]*rapid.Generator[Step], len(fs))
	for i, f := range fs {
		gens[i] = f.Steps(c)
	}
	every := rapid.SliceOfN(rapid.OneOf(gens...), 1, maxSteps)
	if len(gens) < swarmFaults {
		return every
	}
	return rapid.Custom(func(t *rapid.T) []Step {
		if !rapid.Bool().Draw(t, "swarm") {
			return every.Draw(t, "plan")
		}
		var some []*rapid.Generator[Step]
		for i, g := range gens {
			if rapid.Bool().Draw(t, fs[i].Name()) {
				some = append(some, g)
			}
		}
		if len(some) == 0 {
			some = gens
		}
		return rapid.SliceOfN(rapid.OneOf(some...), 1, maxSteps).Draw(t, "plan")
	})
}

// swarmFaults is the fewest faults that plans draw swarms of.
const swarmFaults = 4

// Armed is implemented by the steps whose fault waits for what comes
// after it: the controller's next writes (APIErrors, CrashAfterWrite) or
// watch events (StaleWatch). A controller at rest writes nothing, and the
// heal ends every fault: such a step acts only if a later step makes the
// controller act.
type Armed interface {
	Step
	Armed()
}

// IsArmed reports whether a step is Armed.
func IsArmed(s Step) bool {
	_, ok := s.(Armed)
	return ok
}

// ArmedBeforeAction moves the armed steps that follow a plan's last other
// step to just before it, in their order: drawn uniformly, about half of
// the armed steps of a plan of two faults come after its last action and
// are healed before anything happens (an APIErrors{Conflict} after the
// last ScaleChange refuses nothing). A plan with no other step is
// returned as it is; so is one whose last step is not armed.
func ArmedBeforeAction(plan []Step) []Step {
	last := -1
	for i, s := range plan {
		if !IsArmed(s) {
			last = i
		}
	}
	if last < 0 || last == len(plan)-1 {
		return plan
	}
	out := make([]Step, 0, len(plan))
	out = append(out, plan[:last]...)
	out = append(out, plan[last+1:]...)
	return append(out, plan[last])
}

// Format prints a step on one line: NodeLoss{Node: 1}. A step that is a
// fmt.Stringer prints itself.
func Format(s Step) string {
	if p, ok := s.(fmt.Stringer); ok {
		return p.String()
	}
	v := reflect.ValueOf(s)
	var fields []string
	for i := range v.NumField() {
		tag := v.Type().Field(i).Tag.Get("json")
		if tag == "-" {
			continue // not part of the step's value (a UserChange's name)
		}
		if strings.HasSuffix(tag, ",omitempty") && v.Field(i).IsZero() {
			continue // an option left unset
		}
		fields = append(fields, fmt.Sprintf("%s: %v", v.Type().Field(i).Name, v.Field(i).Interface()))
	}
	return s.Fault() + "{" + strings.Join(fields, ", ") + "}"
}

// FormatPlan prints a plan on one line.
func FormatPlan(plan []Step) string {
	parts := make([]string, len(plan))
	for i, s := range plan {
		parts[i] = Format(s)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// decodeStep reads the fields of a step of type S, rejecting unknown ones.
func decodeStep[S Step](fields []byte) (Step, error) {
	var s S
	if err := yaml.UnmarshalStrict(fields, &s); err != nil {
		return nil, fmt.Errorf("reading a %s step: %w", s.Fault(), err)
	}
	return s, nil
}

// fixture returns the i-th fixture (modulo their number), or an error
// wrapping ErrNoOp when there is none.
func fixture(t Target, i int) (client.Object, error) {
	fixtures := t.Fixtures()
	if len(fixtures) == 0 {
		return nil, noOp("no fixture")
	}
	return fixtures[nth(i, len(fixtures))], nil
}

// podAt returns the i-th pod of the namespace (by name, modulo their
// number) of those the label selector matches (all when empty), or an
// error wrapping ErrNoOp when there is none.
func podAt(ctx context.Context, t Target, selector string, i int) (corev1.Pod, error) {
	all, err := t.Pods(ctx)
	if err != nil {
		return corev1.Pod{}, err
	}
	sel, err := labels.Parse(selector)
	if err != nil {
		return corev1.Pod{}, fmt.Errorf("pod selector %q: %w", selector, err)
	}
	var pods []corev1.Pod
	for _, p := range all {
		if sel.Matches(labels.Set(p.Labels)) {
			pods = append(pods, p)
		}
	}
	if len(pods) == 0 {
		return corev1.Pod{}, noOp("no pod matches %q", selector)
	}
	return pods[nth(i, len(pods))], nil
}

// checkSelector reports a label selector that does not parse.
func checkSelector(fault, selector string) error {
	if _, err := labels.Parse(selector); err != nil {
		return fmt.Errorf("%s: the pod selector %q: %w", fault, selector, err)
	}
	return nil
}

// nth returns i modulo n, for indices drawn before the count was known.
func nth(i, n int) int { return ((i % n) + n) % n }

// intIn draws an int from [lo, hi] (hi at least lo): an index.
func intIn(t *rapid.T, lo, hi int, label string) int {
	return rapid.IntRange(lo, max(lo, hi)).Draw(t, label)
}

// amount draws an amount from [lo, hi] (hi at least lo), one time in two
// one of its edges: lo, hi, or one next to a value of near. Bugs live at
// the ends of ranges and next to the current state (a scale to 0, the
// most rounds of a fight, one replica more than now); uniform draws, and
// rapid's, which favour small values, reach the top rarely.
func amount(t *rapid.T, lo, hi int64, near []int64, label string) int64 {
	if hi <= lo {
		return lo
	}
	edges := []int64{lo, hi}
	for _, n := range near {
		for _, v := range []int64{n - 1, n + 1} {
			if v > lo && v < hi && !slices.Contains(edges, v) {
				edges = append(edges, v)
			}
		}
	}
	if rapid.Bool().Draw(t, label+" at an edge") {
		return edges[fairIndex(t, len(edges), label+" edge")]
	}
	return rapid.Int64Range(lo, hi).Draw(t, label)
}

// fairIndex draws an index below n from fair coin flips, its bits high
// first (two at least): rapid's integers favour the small ones, which
// would make the last edges rarer than a uniform draw of the value.
func fairIndex(t *rapid.T, n int, label string) int {
	if n <= 1 {
		return 0
	}
	i := 0
	for bit := max(2, 1<<(bits.Len(uint(n-1))-1)); bit > 0; bit >>= 1 {
		if rapid.Bool().Draw(t, label+" bit") {
			i |= bit
		}
	}
	return i % n
}

// amountIn is amount for ints, with no value to be near.
func amountIn(t *rapid.T, lo, hi int, label string) int {
	return int(amount(t, int64(lo), int64(max(lo, hi)), nil, label))
}

// IsUserChange reports whether a step is a DesiredStateChange.
func IsUserChange(s Step) bool {
	_, ok := s.(DesiredStateChange)
	return ok
}
