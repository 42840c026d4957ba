package search

import (
	"cmp"
	"math"
	"slices"

	"pgregory.net/rapid"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness/internal/lifecycle"
)

// Plans aimed at the controller (faults.Aimer): half of a search's plans,
// the odd ones, each put one aimed step (a crash after one of the
// controller's writes, errors answered to one of them, a stale view, a
// fight over a field) right before a user change, and a second aim when
// it fits. The controller's writes come from a probe: a case of the
// spec's fixtures and one of its user changes, with no fault, per user
// change, each in a slot of Parallel. The first half of the odd plans do not wait for it: they aim
// at every write (errors answered to all, a crash after each of the first
// writes), at its view (a stale watch), at what the controller may make,
// then at what needs no write, and start with the unaimed plans; the
// rest, drawn once the probe ended, aim at each write it saw, followed by
// the change that provoked it there, as the probe made it (the writes
// the fewest user changes provoke first) and at the aims not taken yet
// (the faults not tried yet first).
// A probe that fails leaves them the aims not taken, and a search that
// then passes answers the probe's failure (see Find).
// The even plans are drawn as before (faults.Plan), so a seed draws the
// same plans whatever Parallel is, as long as the controller's distinct
// writes are the same in every probe.

// aimedPlans are the spec's aimed plan generators for the controller's
// writes (not known: aimed at every write).
func aimedPlans(s Spec, p probed) []*rapid.Generator[[]faults.Step] {
	s = lifecycle.WithDefaults(s)
	objects := lifecycle.FixtureObjects(s)
	c := faults.Config{Nodes: s.Nodes, Fixtures: len(objects), Objects: objects, Writes: p.writes, WritesKnown: p.known, Provoked: p.provoked, Watched: p.watched}
	return faults.AimedPlans(s.Faults, c, s.MaxSteps)
}

// aimKey names an aim by its generator's first example, but a change
// drawn before its aimed step (faults.AimedSteps): the same aim drawn
// before the probe (with none) and after it has the same one.
func aimKey(gen *rapid.Generator[[]faults.Step]) string {
	return faults.FormatPlan(faults.AimedSteps(gen.Example(0)))
}

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
// 2n); joined adjacent, aims 2j and 2j+1. Either way n plans reach the first 2n
// aims, each once, but for the aims that last (see pairs). Of two aims, the
// one ranked higher goes last: the other's change after it would make the
// controller look again, and undo what the aim left (a status write refused
// and never retried, a half-done state, what a burst left unobserved),
// which shows only with no change after it. But an aim that must end its
// plan more (endsPlan) goes last, whatever their ranks.
func joinedAims(gens []*rapid.Generator[[]faults.Step], n int, join pairing, maxSteps int, random *rapid.Generator[[]faults.Step]) func(j, seed int) ([]faults.Step, []*rapid.Generator[[]faults.Step]) {
	joined := pairs(gens, n, join)
	return func(j, seed int) ([]faults.Step, []*rapid.Generator[[]faults.Step]) {
		m := len(gens)
		if m == 0 {
			return random.Example(seed), nil
		}
		if m <= 2 {
			aim := gens[j%m]
			return aim.Example(seed), []*rapid.Generator[[]faults.Step]{aim}
		}
		pair := join.pair(j, m, n) // past the n plans
		if j < len(joined) {
			pair = joined[j]
		}
		aim, other := gens[pair[0]], gens[pair[1]]
		plan, second := aim.Example(seed), other.Example(seed+1)
		switch {
		case len(plan)+len(second) > maxSteps:
			return plan, []*rapid.Generator[[]faults.Step]{aim}
		case endsPlan(second) > endsPlan(plan):
			plan = append(plan, second...)
		default:
			plan = append(second, plan...)
		}
		return plan, []*rapid.Generator[[]faults.Step]{aim, other}
	}
}

// pairs are the aims (indexes into gens) that joinedAims joins in each of
// n plans: aim j, ranked higher, and the aim n further on. But an aim that
// lasts (a node loss waits out its eviction: faults.Lasts) is not joined
// with an armed one, which acts within seconds of the change after it:
// ahead of it, the lasting step would hold that back for its whole
// length, and the search's first failure with it; after it, it would make
// the controller look again. Nor with a burst, which ends its plan: the
// burst's changes after the lasting step would replace what it left. It
// moves to a plan whose other aim is neither (a lasting one first), and
// that plan's aim that is not lasting takes its place: the armed aim keeps
// its plan, its place in it and its draw. None when gens are 2 or fewer.
func pairs(gens []*rapid.Generator[[]faults.Step], n int, join pairing) [][2]int {
	m := len(gens)
	if m <= 2 {
		return nil
	}
	out := make([][2]int, n)
	for j := range out {
		out[j] = join.pair(j, m, n)
	}
	lasting := make([]bool, m)
	armed := make([]bool, m)
	spoils := make([]bool, m) // what a lasting aim is not joined with
	for i, g := range gens {
		plan := g.Example(0)
		lasting[i], armed[i] = lasts(plan), slices.ContainsFunc(plan, faults.IsArmed)
		spoils[i] = armed[i] || endsInBurst(plan)
	}
	clash := func(p [2]int) bool {
		return lasting[p[0]] && spoils[p[1]] || lasting[p[1]] && spoils[p[0]]
	}
	for j := range out {
		if !clash(out[j]) {
			continue
		}
		at := 0 // the lasting aim's place in the pair
		if !lasting[out[j][0]] {
			at = 1
		}
		long, quick := out[j][at], out[j][1-at] // the lasting aim, and the armed one or the burst
		// The plan the lasting aim moves to: one whose other aim is
		// neither armed nor a burst; its aim that is not lasting takes
		// the lasting one's place, beside the armed one or the burst,
		// which keeps its plan. Of those, the one where no armed aim
		// moves, or moves to an earlier plan, and then one where the
		// lasting aim joins another lasting one.
		best, bestAt, bestCost := -1, 0, 0 // the plan, and the place of its aim that stays
		for k := range out {
			for stays, v := range out[k] {
				u := out[k][1-stays]
				if k == j || spoils[v] || lasting[u] || u == quick || v == long {
					continue
				}
				cost := 0
				if armed[u] {
					cost = 2
					if k < j {
						cost = 4 // a plan later
					}
				}
				if !lasting[v] {
					cost++
				}
				if best < 0 || cost < bestCost {
					best, bestAt, bestCost = k, stays, cost
				}
			}
		}
		if best < 0 {
			continue
		}
		// Each takes the other's place: the armed aim's own draw and
		// order stay as they were.
		out[j][at], out[best][1-bestAt] = out[best][1-bestAt], long
	}
	return out
}

// pairing is which two of m aims plan j of n joins, before the lasting
// aims move (see pairs).
type pairing int

const (
	// furtherOn: aim j and the aim n further on, or half-way round when
	// they are fewer than 2n.
	furtherOn pairing = iota
	// adjacent: aims 2j and 2j+1, round.
	adjacent
)

func (join pairing) pair(j, m, n int) [2]int {
	if join == adjacent {
		return [2]int{2 * j % m, (2*j + 1) % m}
	}
	further := n
	if n == 0 || m < 2*n {
		further = (m + 1) / 2
	}
	return [2]int{j % m, (j + further) % m}
}

// endsPlan is how much an aim must end its plan, more first:
//   - 3, a burst: a user change, and a change after it is all it needs to
//     be undone;
//   - 2, an aim that lasts (faults.Lasts): ahead, it would hold the other's
//     steps back for its whole length, and the other's change after it
//     would replace what it left (a Recreate or a scale after a node loss,
//     the pods it left terminating);
//   - 1, an aim that refuses writes to the end (faults.RefusesToTheEnd):
//     ahead, it refuses the writes the other aim needs the controller to
//     make (a 5-round fight after 30 refused patches passed, in a search of
//     the suite's fightsreplicas). A window of time is 0: ahead of the
//     other aim it holds that back no more than a settle would (a window of
//     timeouts ahead of a stale view fails the suite's clientgonobackoff
//     2-3 s sooner than behind it);
//   - 0, any other.
func endsPlan(plan []faults.Step) int {
	switch {
	case endsInBurst(plan):
		return 3
	case lasts(plan):
		return 2
	case slices.ContainsFunc(plan, faults.RefusesToTheEnd):
		return 1
	}
	return 0
}

// lasts: plan holds a step that lasts (faults.Lasts).
func lasts(plan []faults.Step) bool { return slices.ContainsFunc(plan, faults.Lasts) }

// endsInBurst: plan's last step is a burst of user changes.
func endsInBurst(plan []faults.Step) bool {
	_, burst := plan[len(plan)-1].(faults.BurstStep)
	return burst
}
