package search

import (
	"context"
	"slices"
	"sort"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness/internal/lifecycle"
	"github.com/kubeprop/kubeprop/properties"
)

// probed is what the search's probe saw the controller do: its writes,
// and the user changes after which it made each; known is false when no
// probe ran to its end.
type probed struct {
	known    bool
	writes   []faults.WriteMatch
	provoked map[faults.WriteMatch][]string
	setup    map[faults.WriteMatch]bool // made before the first user change
	watched  []string                   // the resources it watched
}

// probeWrites runs the spec's fixtures and one of each of its user
// changes (but bursts), with no fault, each until 2 s quiet (at most
// 30 s), and returns the controller's distinct writes in the case's
// namespace (not its leases and Events: see inject's aimed), each with
// the user changes it followed, and the resources it watched. The user
// changes are faults.ProbeChanges: every probe makes the same ones, and
// the plans aimed at a write make the one that provoked it. It returns as soon as the probe is
// judged, before its teardown (a stateful operator's takes seconds:
// claims and volumes); tornDown returns once that has ended.
func probeWrites(ctx context.Context, env *Env, spec Spec) (_ probed, tornDown func(), _ error) {
	spec = lifecycle.WithDefaults(spec)
	objects := lifecycle.FixtureObjects(spec)
	plan := faults.ProbeChanges(spec.Faults, faults.Config{Nodes: spec.Nodes, Fixtures: len(objects), Objects: objects})
	rep, watched, tornDown, err := lifecycle.Probe(ctx, env, spec, plan)
	if err != nil {
		return probed{}, tornDown, err
	}
	p := controllerWrites(rep.Trace, rep.Namespace, plan)
	p.known, p.watched = true, watched
	return p, tornDown, nil
}

// controllerWrites are the distinct writes the controller made in
// namespace that went through, sorted, and for each the faults of the
// steps of plan (all user changes, as a trace's user events) it came
// after: the last one before it.
func controllerWrites(tr *properties.Trace, namespace string, plan []faults.Step) probed {
	steps := tr.UserChanges()
	p := probed{provoked: map[faults.WriteMatch][]string{}, setup: map[faults.WriteMatch]bool{}}
	for _, r := range tr.Requests {
		if !isControllerWrite(tr, r, namespace) || r.Code >= 300 {
			continue
		}
		w := faults.WriteMatch{Verb: r.Verb, Resource: r.ResourcePath()}
		p.writes = append(p.writes, w)
		// The step before the write: the last to begin at or before it.
		k := sort.Search(len(steps), func(i int) bool { return steps[i].After(r.At) }) - 1
		if k < 0 {
			p.setup[w] = true
		}
		if k >= 0 && k < len(plan) {
			if name := plan[k].Fault(); !slices.Contains(p.provoked[w], name) {
				p.provoked[w] = append(p.provoked[w], name)
			}
		}
	}
	p.writes = faults.SortWrites(p.writes)
	for _, names := range p.provoked {
		slices.Sort(names) // the same plans whatever order the writes came in
	}
	return p
}

// ProbeWrites is the search's probe, whole: the controller's distinct
// writes, the user changes after which it made each, and the resources it
// watched (for the harness's tests).
func ProbeWrites(ctx context.Context, env *Env, spec Spec) ([]faults.WriteMatch, map[faults.WriteMatch][]string, []string, error) {
	p, tornDown, err := probeWrites(ctx, env, spec)
	tornDown()
	return p.writes, p.provoked, p.watched, err
}

// isControllerWrite: r is a write of the controller's in namespace, not
// of its leases or Events.
func isControllerWrite(tr *properties.Trace, r properties.Request, namespace string) bool {
	return r.User == tr.Controller && tr.Controller != "" && r.Namespace == namespace &&
		slices.Contains([]string{"create", "update", "patch", "delete"}, r.Verb) &&
		r.Resource != "leases" && r.Resource != "events"
}

// triedWrites are the distinct writes the controller tried in namespace,
// refused ones too (a fault's errors are those the shrinker narrows to).
func triedWrites(tr *properties.Trace, namespace string) []faults.WriteMatch {
	var writes []faults.WriteMatch
	for _, r := range tr.Requests {
		if isControllerWrite(tr, r, namespace) {
			writes = append(writes, faults.WriteMatch{Verb: r.Verb, Resource: r.ResourcePath()})
		}
	}
	return faults.SortWrites(writes)
}
