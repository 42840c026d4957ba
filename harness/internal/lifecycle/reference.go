package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness/storage"
	"github.com/kubeprop/kubeprop/properties"
)

// The reference run (properties.MatchesReference): a case's plan with
// every fault left out, on the same fixtures, run to a settled end. Its
// end state is the one the case must come to.

// ReferenceSteps are the steps of plan its reference run makes (a plan
// that runs as a case, as the search does with a failed reference): the
// user's changes; another writer's (a conflicting writer's value on a
// fixture is a desired state the controller follows); and a node loss
// that no later step recovers, whose pods outlast the heal on a node that
// stays lost (a change of the world the case ends in, not a passing
// fault: a StatefulSet's pod there is never replaced). The passing
// faults are left out, and so are the changes of a burst that later ones
// of it make again (faults.BurstStep.Net): a controller must end where
// the last of them takes it. nodes is the spec's node count.
func ReferenceSteps(plan []faults.Step, nodes int) []faults.Step {
	var out []faults.Step
	for _, i := range referenceIndices(plan, nodes) {
		st := plan[i]
		if b, ok := st.(faults.BurstStep); ok {
			st = b.Net()
		}
		out = append(out, st)
	}
	return out
}

// netted: a burst of plan makes changes that later changes of it make
// again, which its reference run leaves out.
func netted(plan []faults.Step) bool {
	return slices.ContainsFunc(plan, func(st faults.Step) bool {
		b, ok := st.(faults.BurstStep)
		return ok && nettedBurst(b)
	})
}

func nettedBurst(b faults.BurstStep) bool {
	net, ok := b.Net().(faults.BurstStep)
	return !ok || len(net.Steps) < len(b.Steps)
}

// referenceIndices are the indices in plan of its ReferenceSteps.
func referenceIndices(plan []faults.Step, nodes int) []int {
	var out []int
	for i, s := range plan {
		switch s := s.(type) {
		case faults.NodeLossStep:
			recovered := slices.ContainsFunc(plan[i+1:], func(later faults.Step) bool {
				r, ok := later.(faults.NodeRecoverStep)
				return ok && modulo(r.Node, nodes) == modulo(s.Node, nodes)
			})
			if !recovered {
				out = append(out, i)
			}
		default:
			if faults.IsUserChange(s) || s.Fault() == "ConflictingWriter" {
				out = append(out, i)
			}
		}
	}
	return out
}

// asReferenceNamed is plan with its user changes as its reference run
// named them (named: the reference's steps as they acted, nil for one
// that did not apply), so that the case grows the claim the reference
// grew; skip are the indices in plan of the user changes the reference
// could not make (a claim not bound in time under load): the case makes
// them no more than its reference did.
func asReferenceNamed(plan, named []faults.Step, nodes int) (out []faults.Step, skip []int) {
	indices := referenceIndices(plan, nodes)
	if len(named) != len(indices) {
		return plan, nil
	}
	out = slices.Clone(plan)
	for j, i := range indices {
		burst, isBurst := plan[i].(faults.BurstStep)
		switch {
		case isBurst: // not named; its reference made its net changes
			if named[j] == nil && !nettedBurst(burst) {
				skip = append(skip, i)
			}
		case named[j] == nil && faults.IsUserChange(plan[i]):
			skip = append(skip, i)
		case faults.IsUserChange(named[j]):
			out[i] = named[j]
		}
	}
	return out, skip
}

// modulo is i modulo n, from 0 to n-1 (as caseRun.node picks a node).
func modulo(i, n int) int { return (i%n + n) % n }

// Referenced is the spec's property judged against a reference run, or
// nil.
func (s Spec) Referenced() properties.Referenced {
	for _, p := range s.Properties {
		if r, ok := p.(properties.Referenced); ok {
			return r
		}
	}
	return nil
}

// referenceCacheSize bounds the reference runs an Env keeps.
const referenceCacheSize = 64

// references are an Env's reference runs, by property (one Spec's) and
// the reference's plan, for its life.
type references struct {
	mu      sync.Mutex
	entries map[referenceKey]*referenceEntry
	order   []referenceKey // oldest first, for eviction
}

type referenceKey struct {
	property properties.Referenced
	plan     string
}

type referenceEntry struct {
	done chan struct{}
	run  *properties.ReferenceRun
	// steps are the reference's steps as they acted (see
	// faults.Target.NameStep), nil where one did not apply.
	steps []faults.Step
	err   error
}

// reference is the reference run of plan for spec's property p: the
// cached one, or run now (a case asking for the same while it runs waits
// for it), and its steps as they acted. took is the time it ran to its
// verdict, zero when it was cached. A reference run now is told as soon
// as it is judged, and tears down while its case runs: tornDown returns
// once it has (the case waits for it before it returns).
func (env *Env) reference(ctx context.Context, spec Spec, p properties.Referenced, plan []faults.Step) (run *properties.ReferenceRun, named []faults.Step, namespace string, took time.Duration, tornDown func(), err error) {
	steps := ReferenceSteps(plan, spec.Nodes)
	key := referenceKey{property: p, plan: faults.FormatPlan(steps)}
	refs := &env.references
	for {
		refs.mu.Lock()
		if refs.entries == nil {
			refs.entries = map[referenceKey]*referenceEntry{}
		}
		e, ok := refs.entries[key]
		if !ok {
			e = &referenceEntry{done: make(chan struct{})}
			refs.entries[key] = e
			refs.order = append(refs.order, key)
			if len(refs.order) > referenceCacheSize {
				delete(refs.entries, refs.order[0])
				refs.order = refs.order[1:]
			}
		}
		refs.mu.Unlock()
		if ok {
			select {
			case <-ctx.Done():
				return nil, nil, "", 0, func() {}, ctx.Err()
			case <-e.done:
			}
			if e.err == nil {
				return e.run, e.steps, "", 0, func() {}, nil
			}
			continue // its case was cut short: run it here
		}
		start := time.Now()
		e.run, e.steps, namespace, tornDown, e.err = runReference(ctx, env, spec, steps)
		if e.err != nil {
			refs.mu.Lock()
			if refs.entries[key] == e {
				delete(refs.entries, key)
				refs.order = slices.DeleteFunc(refs.order, func(k referenceKey) bool { return k == key })
			}
			refs.mu.Unlock()
		}
		close(e.done)
		return e.run, e.steps, namespace, time.Since(start), tornDown, e.err
	}
}

// runReference runs steps on spec with no fault and the spec's other
// properties, to a settled end, and returns once it is judged; tornDown
// returns once it has torn down.
func runReference(ctx context.Context, env *Env, spec Spec, steps []faults.Step) (_ *properties.ReferenceRun, _ []faults.Step, namespace string, tornDown func(), _ error) {
	var props []properties.Property
	for _, p := range spec.Properties {
		if _, ok := p.(properties.Referenced); !ok {
			props = append(props, p)
		}
	}
	spec.Properties = append(props, settledEnd)
	rep, tornDown, err := runJudged(ctx, env, spec, steps)
	if err != nil {
		return nil, nil, "", tornDown, err
	}
	ref := &properties.ReferenceRun{Trace: rep.Trace}
	if rep.Failed() {
		f := rep.Failures[0]
		ref.Failed, ref.FailedProperty = errors.New(f.Message), f.Property
	}
	acted := slices.Clone(rep.Plan)
	for _, i := range rep.NoOps {
		acted[i] = nil
	}
	return ref, acted, rep.Namespace, tornDown, nil
}

// runJudged runs a case of its own for the harness (a reference run, the
// search's probe) and returns its report as soon as it is judged; its
// teardown goes on, and tornDown returns once it has ended.
func runJudged(ctx context.Context, env *Env, spec Spec, plan []faults.Step) (_ *Report, tornDown func(), _ error) {
	judged := make(chan *Report, 1)
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		_, err = run(ctx, env, spec, plan, func(rep *Report) { judged <- rep })
	}()
	tornDown = func() { <-done }
	select {
	case rep := <-judged:
		return rep, tornDown, nil
	case <-done:
		if err != nil {
			return nil, tornDown, err
		}
		return <-judged, tornDown, nil // judged before it returned
	}
}

// settledEnd is the end of a reference run: 2 s with no write, and
// nothing on its way, within 30 s of the heal.
var settledEnd = referenceSettled{quiet: 2 * time.Second, within: 30 * time.Second, motion: true}

// Probe runs plan as the search's probe: no fault, each change settled
// as its end is (quietEnd), judged by quietEnd alone. It returns as soon
// as the probe is judged, with the resources the controller watched;
// tornDown returns once its teardown has ended.
func Probe(ctx context.Context, env *Env, spec Spec, plan []faults.Step) (_ *Report, watched []string, tornDown func(), _ error) {
	spec.Properties = []properties.Property{quietEnd}
	// Each change settles as the probe's end does: a write that comes
	// seconds after its change (a claim resized once the operator has
	// waited for its members) is the change's, not the next one's.
	spec.SettleQuiet, spec.SettleCap = max(spec.SettleQuiet, quietEnd.quiet), max(spec.SettleCap, quietEnd.within)
	rep, tornDown, err := runJudged(ctx, env, spec, plan)
	if err != nil {
		return nil, nil, tornDown, err
	}
	return rep, rep.watched, tornDown, nil
}

// quietEnd is the end of the search's probe: 2 s with no write. It wants
// the writes each user change provokes, not an end state, and waits for
// no pod that may never be ready.
var quietEnd = referenceSettled{quiet: 2 * time.Second, within: 30 * time.Second}

// referenceSettled holds a reference run, once healed, until it has
// seen no write for quiet (lastActivity), no claim waits for the hollow
// provisioner's volume, and (motion) no object is on its way (a pod
// starting, a workload short of its replicas: but what a deletion holds;
// see properties.State.InMotion), or within
// has passed: its end state is then the one to compare with. It never
// fails. Under load the binder and the provisioner leave more than quiet
// between their writes; a reference ended there had its claims Pending
// and its members not ready, and every case of its user changes differed
// from it. So does a busy controller manager between a StatefulSet's pod
// deleted and made again: a reference ended with the pod missing.
type referenceSettled struct {
	quiet, within time.Duration
	motion        bool // wait while an object is on its way
}

func (referenceSettled) Name() string             { return "reference-settled" }
func (p referenceSettled) Horizon() time.Duration { return p.within }
func (p referenceSettled) Check(tr *properties.Trace) properties.Verdict {
	if tr.Healed.IsZero() {
		return properties.Verdict{Detail: "faults not healed yet"}
	}
	quiet := tr.End.Sub(lastActivity(tr))
	switch {
	case tr.Final:
	case quiet < p.quiet:
		return properties.Verdict{Detail: "writes go on"}
	case len(tr.States) > 0 && provisioning(tr.States[len(tr.States)-1]):
		return properties.Verdict{Detail: "claims wait for their volumes"}
	case p.motion && len(tr.States) > 0:
		if what := tr.States[len(tr.States)-1].InMotion(); what != "" {
			return properties.Verdict{Detail: what + " is on its way"}
		}
	}
	return properties.Verdict{Done: true, Detail: fmt.Sprintf("quiet for %v", quiet.Round(time.Millisecond))}
}

// lastActivity is when the run last moved: its last step, its last
// write seen, or its last write request in the namespace (an object of a
// kind not watched; not a lease renewed, not an Event). Not its heal: a
// plan of user changes heals nothing, and each step's settle already
// waited for quiet (the probe's as long as its end's), so quiet counted
// from the heal made the end wait out a second quiet period after the
// first (2 s a probe case, in its first wave).
func lastActivity(tr *properties.Trace) time.Time {
	last := tr.Start
	if n := len(tr.Events); n > 0 {
		last = maxTime(last, tr.Events[n-1].At)
	}
	for _, w := range tr.Writes {
		last = maxTime(last, w.At)
	}
	for _, r := range tr.Requests {
		if r.ChangesState() {
			last = maxTime(last, r.At)
		}
	}
	return last
}

// provisioning: a claim of the state is handed to the hollow provisioner
// and not bound yet.
func provisioning(s properties.State) bool {
	for _, c := range s.ByKind("PersistentVolumeClaim") {
		phase, _, _ := unstructured.NestedString(c.Object, "status", "phase")
		if c.GetDeletionTimestamp() == nil && phase == string(corev1.ClaimPending) && storage.HandedToDriver(c.GetAnnotations()) {
			return true
		}
	}
	return false
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
