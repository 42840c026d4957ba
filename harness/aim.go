package harness

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"

	"pgregory.net/rapid"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/properties"
)

// Plans aimed at the controller (faults.Aimer): half of a search's plans,
// the odd ones, each put one aimed step (a crash after one of the
// controller's writes, errors answered to one of them, a stale view, a
// fight over a field) right before a user change, the aims taken in turn
// from a place drawn from the seed. The controller's writes come from a
// probe: the spec's fixtures and one of each of its user changes, with no
// fault, run in a slot of Parallel while the first unaimed plans run. A
// probe that fails leaves the aims that need no writes. The even plans
// are drawn as before (faults.Plan), so a seed draws the same plans
// whatever Parallel is, as long as the controller's distinct writes are
// the same in every probe.

// planSet is a search's plans, some drawn later.
type planSet struct {
	mu    sync.Mutex
	plans [][]faults.Step // nil: not drawn yet
	drawn chan struct{}   // closed once every plan is drawn
}

// drawnPlans is a planSet of plans all drawn.
func drawnPlans(plans [][]faults.Step) *planSet {
	p := &planSet{plans: plans, drawn: make(chan struct{})}
	close(p.drawn)
	return p
}

func (p *planSet) len() int { return len(p.plans) }

// at is plan i, or nil while it is not drawn.
func (p *planSet) at(i int) []faults.Step {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.plans[i]
}

// fill draws every plan not drawn yet with draw, and tells the search.
func (p *planSet) fill(draw func(i int) []faults.Step) {
	p.mu.Lock()
	for i := range p.plans {
		if p.plans[i] == nil {
			p.plans[i] = draw(i)
		}
	}
	p.mu.Unlock()
	close(p.drawn)
}

// seeds are the seeds of a search's n plans, as rapid.Check's checks
// step them (S, S+1, S+3, S+6, ...).
func seeds(seed uint64, n int) []int {
	out := make([]int, n)
	for i := range out {
		seed += uint64(i)
		out[i] = int(seed)
	}
	return out
}

// searchPlans draws n plans from seed, as rapid.Check's checks do.
func searchPlans(gen *rapid.Generator[[]faults.Step], seed uint64, n int) [][]faults.Step {
	plans := make([][]faults.Step, n)
	for i, s := range seeds(seed, n) {
		plans[i] = gen.Example(s)
	}
	return plans
}

// probed is what the search's probe saw the controller do: its writes,
// and the user changes after which it made each.
type probed struct {
	writes   []faults.WriteMatch
	provoked map[faults.WriteMatch][]string
}

// aimedPlans are the spec's aimed plan generators for the controller's
// writes (none known: nil).
func (s Spec) aimedPlans(p probed) []*rapid.Generator[[]faults.Step] {
	s = s.withDefaults()
	objects := s.fixtureObjects()
	c := faults.Config{Nodes: s.Nodes, Fixtures: len(objects), Objects: objects, Writes: p.writes, Provoked: p.provoked}
	return faults.AimedPlans(s.Faults, c, s.MaxSteps)
}

// aimsNeedWrites reports whether the spec's faults aim at the
// controller's writes, so that the search probes them.
func (s Spec) aimsNeedWrites() bool {
	return len(s.aimedPlans(probed{writes: []faults.WriteMatch{{Verb: "create"}}})) > len(s.aimedPlans(probed{}))
}

// plans are the search's plans: the even ones drawn now, the odd ones
// aimed, drawn now or once the probe (started here, ended by ctx) showed
// the controller's writes.
func (s *searcher) plans(ctx context.Context) *planSet {
	n, seed := s.opts.Checks, s.opts.Seed
	ps := &planSet{plans: make([][]faults.Step, n), drawn: make(chan struct{})}
	ss := seeds(seed, n)
	random := s.spec.Plans()
	for i := 0; i < n; i += 2 {
		ps.plans[i] = random.Example(ss[i])
	}
	maxSteps := s.spec.withDefaults().MaxSteps
	aimed := func(p probed) func(i int) []faults.Step {
		gens := s.spec.aimedPlans(p)
		return func(i int) []faults.Step {
			if len(gens) == 0 {
				return random.Example(ss[i])
			}
			k := i/2 + int(seed%uint64(len(gens)))
			plan := gens[k%len(gens)].Example(ss[i])
			// And the aim half-way round, when the two fit: the aimed
			// half of 20 plans reaches 20 aims, not 10 (a stateful
			// operator has 20-30: a crash and errors at each write, a
			// restart into each user change).
			if len(gens) > 2 {
				second := gens[(k+(len(gens)+1)/2)%len(gens)].Example(ss[i] + 1)
				switch _, burst := plan[len(plan)-1].(faults.BurstStep); {
				case len(plan)+len(second) > maxSteps:
				case burst:
					// A change after a burst makes the controller look
					// again: what the burst left unobserved shows only
					// with none.
					plan = append(second, plan...)
				default:
					plan = append(plan, second...)
				}
			}
			return plan
		}
	}
	if !s.spec.aimsNeedWrites() {
		ps.fill(aimed(probed{}))
		return ps
	}
	s.startCase(func() {
		p, tornDown, _ := probeWrites(ctx, s.env, s.spec)
		ps.fill(aimed(p))
		tornDown() // in the probe's slot
	})
	return ps
}

// probeWrites runs the spec's fixtures and one of each of its user
// changes (but bursts), with no fault, to a settled end, and returns the
// controller's distinct writes in the case's namespace (not its leases
// and Events: see inject's aimed), each with the user changes it
// followed. The user changes are each fault's first example, so that
// every probe makes the same ones. It returns as soon as the probe is
// judged, before its teardown (a stateful operator's takes seconds:
// claims and volumes); tornDown returns once that has ended.
func probeWrites(ctx context.Context, env *Env, spec Spec) (_ probed, tornDown func(), _ error) {
	spec = spec.withDefaults()
	objects := spec.fixtureObjects()
	c := faults.Config{Nodes: spec.Nodes, Fixtures: len(objects), Objects: objects}
	var plan []faults.Step
	for _, f := range spec.Faults {
		st := f.Steps(c).Example(1)
		if _, burst := st.(faults.BurstStep); faults.IsUserChange(st) && !burst {
			plan = append(plan, st)
		}
	}
	spec.Properties = []properties.Property{quietEnd}
	rep, tornDown, err := runJudged(ctx, env, spec, plan)
	if err != nil {
		return probed{}, tornDown, err
	}
	return controllerWrites(rep.Trace, rep.Namespace, plan), tornDown, nil
}

// controllerWrites are the distinct writes the controller made in
// namespace that went through, sorted, and for each the faults of the
// steps of plan (all user changes, as a trace's user events) it came
// after: the last one before it.
func controllerWrites(tr *properties.Trace, namespace string, plan []faults.Step) probed {
	var steps []time.Time
	for _, e := range tr.Events {
		if e.Kind == properties.UserEvent {
			steps = append(steps, e.At)
		}
	}
	p := probed{provoked: map[faults.WriteMatch][]string{}}
	for _, r := range tr.Requests {
		if r.User != tr.Controller || tr.Controller == "" || r.Namespace != namespace || r.Code >= 300 ||
			!slices.Contains([]string{"create", "update", "patch", "delete"}, r.Verb) ||
			r.Resource == "leases" || r.Resource == "events" {
			continue
		}
		resource := r.Resource
		if r.Subresource != "" {
			resource += "/" + r.Subresource
		}
		w := faults.WriteMatch{Verb: r.Verb, Resource: resource}
		p.writes = append(p.writes, w)
		// The step before the write: the last to begin at or before it.
		if k := sort.Search(len(steps), func(i int) bool { return steps[i].After(r.At) }) - 1; k >= 0 && k < len(plan) {
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
