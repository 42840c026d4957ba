package harness

import (
	"cmp"
	"context"
	"math"
	"slices"
	"sort"
	"sync"

	"pgregory.net/rapid"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/properties"
)

// Plans aimed at the controller (faults.Aimer): half of a search's plans,
// the odd ones, each put one aimed step (a crash after one of the
// controller's writes, errors answered to one of them, a stale view, a
// fight over a field) right before a user change, and a second aim when
// it fits. The controller's writes come from a probe: the spec's fixtures
// and one of each of its user changes, with no fault, run in a slot of
// Parallel. The first half of the odd plans do not wait for it: they aim
// at every write (errors answered to all, a crash after each of the first
// writes), at its view (a stale watch), at what the controller may make,
// then at what needs no write, and start with the unaimed plans; the
// rest, drawn once the probe ended, aim at each write it saw (the writes
// the fewest user changes provoke first) and at the aims not taken yet
// (the faults not tried yet first).
// A probe that fails leaves them the aims not taken.
// The even plans are drawn as before (faults.Plan), so a seed draws the
// same plans whatever Parallel is, as long as the controller's distinct
// writes are the same in every probe.

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
// and the user changes after which it made each; known is false when no
// probe ran to its end.
type probed struct {
	known    bool
	writes   []faults.WriteMatch
	provoked map[faults.WriteMatch][]string
	setup    map[faults.WriteMatch]bool // made before the first user change
	watched  []string                   // the resources it watched
}

// aimedPlans are the spec's aimed plan generators for the controller's
// writes (not known: aimed at every write).
func (s Spec) aimedPlans(p probed) []*rapid.Generator[[]faults.Step] {
	s = s.withDefaults()
	objects := s.fixtureObjects()
	c := faults.Config{Nodes: s.Nodes, Fixtures: len(objects), Objects: objects, Writes: p.writes, WritesKnown: p.known, Provoked: p.provoked, Watched: p.watched}
	return faults.AimedPlans(s.Faults, c, s.MaxSteps)
}

// aimKey names an aim by its generator's first example: the same aim
// drawn before and after the probe has the same one.
func aimKey(gen *rapid.Generator[[]faults.Step]) string { return faults.FormatPlan(gen.Example(0)) }

// aimsFirst orders gens: the armed aims first (errors, crashes and stale
// views, which act on what the change after them provokes, seconds after
// the start), their faults taking turns (the first wave of a search
// reaches the first aims of each), then those whose key is not in
// needNoWrite (the aims at what the controller may make, not known yet),
// then the rest from place on, round.
func aimsFirst(gens []*rapid.Generator[[]faults.Step], needNoWrite map[string]bool, place uint64) []*rapid.Generator[[]faults.Step] {
	var armed, first, rest []*rapid.Generator[[]faults.Step]
	for _, g := range gens {
		switch {
		case slices.ContainsFunc(g.Example(0), faults.IsArmed):
			armed = append(armed, g)
		case needNoWrite[aimKey(g)]:
			rest = append(rest, g)
		default:
			first = append(first, g)
		}
	}
	return slices.Concat(byTurns(armed, nil, nil), first, rotated(rest, place))
}

// byTurns orders gens so that the faults they aim (aimedFault) take
// turns, each fault's aims in their order, those of a higher rank (nil:
// none) first; the faults tried fewer times so far (tried, by name)
// first, then in the order they come in gens.
func byTurns(gens []*rapid.Generator[[]faults.Step], tried map[string]int, rank func([]faults.Step) int) []*rapid.Generator[[]faults.Step] {
	var order []string
	of := map[string][]*rapid.Generator[[]faults.Step]{}
	ranks := map[*rapid.Generator[[]faults.Step]]int{}
	for _, g := range gens {
		plan := g.Example(0)
		name := aimedFault(plan)
		if of[name] == nil {
			order = append(order, name)
		}
		of[name] = append(of[name], g)
		if rank != nil {
			ranks[g] = rank(plan)
		}
	}
	slices.SortStableFunc(order, func(a, b string) int { return cmp.Compare(tried[a], tried[b]) })
	for _, name := range order {
		slices.SortStableFunc(of[name], func(a, b *rapid.Generator[[]faults.Step]) int { return cmp.Compare(ranks[b], ranks[a]) })
	}
	out := make([]*rapid.Generator[[]faults.Step], 0, len(gens))
	for i := 0; len(out) < len(gens); i++ {
		for _, name := range order {
			if i < len(of[name]) {
				out = append(out, of[name][i])
			}
		}
	}
	return out
}

// aimedFault names the fault an aimed plan is aimed at: its first armed
// step's, else its first step's that is not a user change (a restart into
// the change before it), else its last step's (a burst ends its plan).
func aimedFault(plan []faults.Step) string {
	if i := slices.IndexFunc(plan, faults.IsArmed); i >= 0 {
		return plan[i].Fault()
	}
	if i := slices.IndexFunc(plan, func(st faults.Step) bool { return !faults.IsUserChange(st) }); i >= 0 {
		return plan[i].Fault()
	}
	return plan[len(plan)-1].Fault()
}

// rarestFirst orders the aims drawn once the probe ended: those at a
// write (faults.AimedAtWrite) by how many user changes provoked it in the
// probe, the setup counted as one, fewest first, taking turns with the
// rest. A write every change provokes (a status update) or the setup
// makes (what a re-create makes again) is on the way of many plans,
// unaimed ones too; one that a single change provokes (a claim resized
// after a storage change) is on a path only that change opens, and only
// an aim there reaches it often. The turns keep the aims that need no
// write (a restart into a re-create, a burst) from waiting behind every
// write. Of the rest, the faults tried fewer times in the plans drawn
// before the probe (tried, by name) come first, taking turns, and a view
// into a change (faults.LooksBack) into the change that provoked the most
// distinct writes first: the more the controller does in a step, the
// more states half-way through it a view can show. Each kind from place
// on, round.
func rarestFirst(gens []*rapid.Generator[[]faults.Step], p probed, tried map[string]int, place uint64) []*rapid.Generator[[]faults.Step] {
	var atWrites, rest []*rapid.Generator[[]faults.Step]
	provokers := map[*rapid.Generator[[]faults.Step]]int{}
	for _, g := range gens {
		w, ok := writeAimedAt(g.Example(0))
		if !ok {
			rest = append(rest, g)
			continue
		}
		n := len(p.provoked[w])
		if p.setup[w] {
			n++
		}
		if n == 0 {
			n = math.MaxInt // made after nothing the probe made
		}
		provokers[g] = n
		atWrites = append(atWrites, g)
	}
	atWrites = rotated(atWrites, place)
	slices.SortStableFunc(atWrites, func(a, b *rapid.Generator[[]faults.Step]) int { return cmp.Compare(provokers[a], provokers[b]) })
	provoked := map[string]int{} // distinct writes, by the change that provoked them
	for _, names := range p.provoked {
		for _, name := range names {
			provoked[name]++
		}
	}
	rest = byTurns(rotated(rest, place), tried, func(plan []faults.Step) int { return provoked[lookedBackAt(plan)] })
	out := make([]*rapid.Generator[[]faults.Step], 0, len(gens))
	for i := range max(len(atWrites), len(rest)) {
		if i < len(atWrites) {
			out = append(out, atWrites[i])
		}
		if i < len(rest) {
			out = append(out, rest[i])
		}
	}
	return out
}

// lookedBackAt is the fault of the step a plan's first step that looks
// back (faults.LooksBack) looks into; "" when none does.
func lookedBackAt(plan []faults.Step) string {
	for i, st := range plan {
		if lb, ok := st.(faults.LooksBack); ok && lb.LooksBack() && i > 0 {
			return plan[i-1].Fault()
		}
	}
	return ""
}

// writeAimedAt is the write plan's first step aimed at a write is aimed
// at; false when none is.
func writeAimedAt(plan []faults.Step) (faults.WriteMatch, bool) {
	for _, st := range plan {
		if a, ok := st.(faults.AimedAtWrite); ok {
			return a.AimedWrite(), true
		}
	}
	return faults.WriteMatch{}, false
}

// rotated is gens from place on, round.
func rotated[T any](gens []T, place uint64) []T {
	if len(gens) == 0 {
		return nil
	}
	k := int(place % uint64(len(gens)))
	return append(slices.Clone(gens[k:]), gens[:k]...)
}

// joinedAims draws plan j of n from gens (none: the random plan of its
// seed) and returns the aims it took: aim j, and, when they fit in
// maxSteps, the aim n further on (half-way round when gens are fewer than
// 2n), so that n plans reach the first 2n aims, each once. Of two aims,
// aim j, the one ranked higher, goes last: the other's change after it
// would make the controller look again, and undo what the aim left (a
// status write refused and never retried, a half-done state, what a
// burst left unobserved), which shows only with no change after it. But
// when only the other ends in a burst, that one goes last: a burst is a
// user change, and a change after it is all it needs to be undone.
func joinedAims(gens []*rapid.Generator[[]faults.Step], n, maxSteps int, random *rapid.Generator[[]faults.Step]) func(j, seed int) ([]faults.Step, []*rapid.Generator[[]faults.Step]) {
	return func(j, seed int) ([]faults.Step, []*rapid.Generator[[]faults.Step]) {
		m := len(gens)
		if m == 0 {
			return random.Example(seed), nil
		}
		aim := gens[j%m]
		plan := aim.Example(seed)
		if m <= 2 {
			return plan, []*rapid.Generator[[]faults.Step]{aim}
		}
		further := n
		if n == 0 || m < 2*n {
			further = (m + 1) / 2
		}
		other := gens[(j+further)%m]
		second := other.Example(seed + 1)
		switch {
		case len(plan)+len(second) > maxSteps:
			return plan, []*rapid.Generator[[]faults.Step]{aim}
		case endsInBurst(second) && !endsInBurst(plan):
			plan = append(plan, second...)
		default:
			plan = append(second, plan...)
		}
		return plan, []*rapid.Generator[[]faults.Step]{aim, other}
	}
}

func endsInBurst(plan []faults.Step) bool {
	_, burst := plan[len(plan)-1].(faults.BurstStep)
	return burst
}

// plans are the search's plans: the even ones drawn now, the odd ones
// aimed, the first half of those drawn now, the rest once the probe
// (started here, ended by ctx) showed the controller's writes.
func (s *searcher) plans(ctx context.Context) *planSet {
	n, seed := s.opts.Checks, s.opts.Seed
	ps := &planSet{plans: make([][]faults.Step, n), drawn: make(chan struct{})}
	ss := seeds(seed, n)
	random := s.spec.Plans()
	for i := 0; i < n; i += 2 {
		ps.plans[i] = random.Example(ss[i])
	}
	maxSteps := s.spec.withDefaults().MaxSteps
	// fillAimed draws the odd plans not drawn yet, plan i being draw's
	// plan i/2 - skip.
	fillAimed := func(draw func(j, seed int) ([]faults.Step, []*rapid.Generator[[]faults.Step]), skip int) {
		ps.fill(func(i int) []faults.Step {
			plan, _ := draw(i/2-skip, ss[i])
			return plan
		})
	}
	odd := n / 2
	unknown := s.spec.aimedPlans(probed{})
	needNoWrite := s.spec.aimedPlans(probed{known: true})
	if len(unknown) == len(needNoWrite) {
		// No aim depends on the writes: no probe.
		fillAimed(joinedAims(rotated(unknown, seed), odd, maxSteps, random), 0)
		return ps
	}
	// Now: the armed aims, those at what the controller may make, then
	// those that need no write (the same once the writes are known).
	early := (odd + 1) / 2
	noWrite := map[string]bool{}
	for _, g := range needNoWrite {
		noWrite[aimKey(g)] = true
	}
	now := joinedAims(aimsFirst(unknown, noWrite, seed), early, maxSteps, random)
	taken, tried := map[string]bool{}, map[string]int{}
	for j := range early {
		plan, aims := now(j, ss[2*j+1])
		ps.plans[2*j+1] = plan
		for _, g := range aims {
			taken[aimKey(g)] = true
			tried[aimedFault(g.Example(0))]++
		}
	}
	s.startCase(func() {
		p, tornDown, _ := s.probe(ctx, s.env, s.spec)
		var rest []*rapid.Generator[[]faults.Step]
		for _, g := range s.spec.aimedPlans(p) {
			if !taken[aimKey(g)] {
				rest = append(rest, g)
			}
		}
		fillAimed(joinedAims(rarestFirst(rest, p, tried, seed), odd-early, maxSteps, random), early)
		tornDown() // in the probe's slot
	})
	return ps
}

// probeWrites runs the spec's fixtures and one of each of its user
// changes (but bursts), with no fault, each until 2 s quiet (at most
// 30 s), and returns the controller's distinct writes in the case's
// namespace (not its leases and Events: see inject's aimed), each with
// the user changes it followed, and the resources it watched. The user changes are each fault's first example, so that
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
	// Each change settles as the probe's end does: a write that comes
	// seconds after its change (a claim resized once the operator has
	// waited for its members) is the change's, not the next one's.
	spec.SettleQuiet, spec.SettleCap = max(spec.SettleQuiet, quietEnd.quiet), max(spec.SettleCap, quietEnd.within)
	rep, tornDown, err := runJudged(ctx, env, spec, plan)
	if err != nil {
		return probed{}, tornDown, err
	}
	p := controllerWrites(rep.Trace, rep.Namespace, plan)
	p.known, p.watched = true, rep.watched
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
		if r.User != tr.Controller || tr.Controller == "" || r.Namespace != namespace || r.Code >= 300 ||
			!slices.Contains([]string{"create", "update", "patch", "delete"}, r.Verb) ||
			r.Resource == "leases" || r.Resource == "events" {
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
