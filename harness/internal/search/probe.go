package search

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"

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

// probePlans are the plans of the search's probe: a case per user change
// of the spec (faults.ProbeChanges; every probe makes the same ones, and
// the plans aimed at a write make the one that provoked it), or one of
// the fixtures alone when it has none. Each change starts from the
// fixtures, as an aimed plan's does, and the probe ends with its slowest
// change rather than after all of them one by one: the plans aimed at
// what it saw start that much sooner (a stateful operator's changes take
// seconds each).
func probePlans(spec Spec) [][]faults.Step {
	spec = lifecycle.WithDefaults(spec)
	objects := lifecycle.FixtureObjects(spec)
	changes := faults.ProbeChanges(spec.Faults, faults.Config{Nodes: spec.Nodes, Fixtures: len(objects), Objects: objects})
	if len(changes) == 0 {
		return [][]faults.Step{nil}
	}
	plans := make([][]faults.Step, len(changes))
	for i, change := range changes {
		plans[i] = []faults.Step{change}
	}
	return plans
}

// probeWrites runs plan, one of probePlans, with no fault, until 2 s
// quiet (at most 30 s) after the fixtures and after its change, and
// returns the controller's distinct writes in the case's namespace (not
// its leases and Events: see inject's aimed), each with the user change
// it followed, and the resources it watched. It returns as soon as the
// probe is judged, before its teardown (a stateful operator's takes
// seconds: claims and volumes); tornDown returns once that has ended.
func probeWrites(ctx context.Context, env *Env, spec Spec, plan []faults.Step) (_ probed, tornDown func(), _ error) {
	rep, watched, tornDown, err := lifecycle.Probe(ctx, env, lifecycle.WithDefaults(spec), plan)
	if err != nil {
		return probed{}, tornDown, err
	}
	p := controllerWrites(rep.Trace, rep.Namespace, plan)
	p.known, p.watched = true, watched
	return p, tornDown, nil
}

// together is what the probes saw together: unknown when one did not run
// to its end.
func together(probes []probed) probed {
	out := probed{known: true, provoked: map[faults.WriteMatch][]string{}, setup: map[faults.WriteMatch]bool{}}
	for _, p := range probes {
		if !p.known {
			return probed{}
		}
		out.writes = append(out.writes, p.writes...)
		for w, names := range p.provoked {
			out.provoked[w] = append(out.provoked[w], names...)
		}
		for w := range p.setup {
			out.setup[w] = true
		}
		out.watched = append(out.watched, p.watched...)
	}
	out.writes = faults.SortWrites(out.writes)
	for w, names := range out.provoked {
		slices.Sort(names) // the same plans whatever order the probes ended in
		out.provoked[w] = slices.Compact(names)
	}
	slices.Sort(out.watched)
	out.watched = slices.Compact(out.watched)
	return out
}

// runProbe runs the probe's plans, each in a slot of Parallel (as many as
// it has before any case of the search starts), and calls seen with what
// they saw together once every one has been judged.
func (s *searcher) runProbe(ctx context.Context, seen func(probed)) {
	plans := probePlans(s.spec)
	results := make([]probed, len(plans))
	var judged sync.WaitGroup
	judged.Add(len(plans))
	probe := func(i int) func() {
		return func() {
			p, tornDown, err := s.probe(ctx, s.env, s.spec, plans[i])
			if err != nil && ctx.Err() == nil {
				s.mu.Lock()
				s.probeErr = cmp.Or(s.probeErr, fmt.Errorf("the harness failed: the search's probe (plan %s): %w", faults.FormatPlan(plans[i]), err))
				s.mu.Unlock()
			}
			results[i] = p
			judged.Done()
			tornDown() // in the probe's slot
		}
	}
	// The slots are free yet: these take theirs before the search's
	// cases do.
	first := min(len(plans), s.opts.Parallel)
	for i := range first {
		s.startCase(probe(i))
	}
	// The others wait for their slots here, not in the search's drawing.
	s.cases.Add(1)
	go func() {
		defer s.cases.Done()
		for i := first; i < len(plans); i++ {
			s.startCase(probe(i))
		}
		judged.Wait()
		seen(together(results))
	}()
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

// ProbeWrites is the search's probe, whole, its plans one after another:
// the controller's distinct writes, the user changes after which it made
// each, and the resources it watched (for the harness's tests).
func ProbeWrites(ctx context.Context, env *Env, spec Spec) ([]faults.WriteMatch, map[faults.WriteMatch][]string, []string, error) {
	var probes []probed
	for _, plan := range probePlans(spec) {
		p, tornDown, err := probeWrites(ctx, env, spec, plan)
		tornDown()
		if err != nil {
			return nil, nil, nil, err
		}
		probes = append(probes, p)
	}
	p := together(probes)
	return p.writes, p.provoked, p.watched, nil
}

// isControllerWrite: r is a write of the controller's in namespace, not
// of its leases or Events.
func isControllerWrite(tr *properties.Trace, r properties.Request, namespace string) bool {
	return r.User == tr.Controller && tr.Controller != "" && r.Namespace == namespace && r.ChangesState()
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
