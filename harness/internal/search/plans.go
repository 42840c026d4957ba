package search

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"pgregory.net/rapid"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness/internal/lifecycle"
)

// planSet is a search's plans, some drawn later.
type planSet struct {
	mu    sync.Mutex
	plans [][]faults.Step // nil: not drawn yet
	drawn chan struct{}   // closed once every plan is drawn
	// shard is the part of the plans this search runs (see Shard);
	// probedFrom the first odd index of the plans aimed at what the
	// probe saw (len(plans) when none is).
	shard      Shard
	probedFrom int
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

// plans are the search's plans: the even ones drawn now, the odd ones
// aimed, the first half of those drawn now, the rest once the probe
// (started here, ended by ctx) showed the controller's writes.
func (s *searcher) plans(ctx context.Context) *planSet {
	n, seed := s.opts.Checks, s.opts.Seed
	ps := &planSet{plans: make([][]faults.Step, n), drawn: make(chan struct{}), shard: s.opts.Shard, probedFrom: n}
	ss := seeds(seed, n)
	random := s.spec.Plans()
	for i := 0; i < n; i += 2 {
		ps.plans[i] = random.Example(ss[i])
	}
	maxSteps := lifecycle.WithDefaults(s.spec).MaxSteps
	// fillAimed draws the odd plans not drawn yet, plan i being draw's
	// plan i/2 - skip.
	fillAimed := func(draw func(j, seed int) ([]faults.Step, []*rapid.Generator[[]faults.Step]), skip int) {
		ps.fill(func(i int) []faults.Step {
			plan, _ := draw(i/2-skip, ss[i])
			return plan
		})
	}
	odd := n / 2
	unknown := aimedPlans(s.spec, probed{})
	needNoWrite := aimedPlans(s.spec, probed{known: true})
	if len(unknown) == len(needNoWrite) {
		// No aim depends on the writes: no probe.
		fillAimed(joinedAims(rotated(unknown, seed), odd, furtherOn, maxSteps, random), 0)
		return ps
	}
	// Now: the armed aims, those at what the controller may make, then
	// those that need no write (the same once the writes are known).
	early := (odd + 1) / 2
	ps.probedFrom = 2*early + 1
	noWrite := map[string]bool{}
	for _, g := range needNoWrite {
		noWrite[aimKey(g)] = true
	}
	// Adjacent aims joined: ranked armed first, by turns, armed aims join
	// armed ones (each acts within seconds of its change, where one that
	// acts by itself, a restart with a stale view or a fight, would hold
	// the other back seconds), and the first wave, which holds only the
	// first plans when they are many (60: 7 of 15), holds the aims ranked
	// highest.
	now := joinedAims(aimsFirst(unknown, noWrite, seed), early, adjacent, maxSteps, random)
	taken, tried := map[string]bool{}, map[string]int{}
	for j := range early {
		plan, aims := now(j, ss[2*j+1])
		ps.plans[2*j+1] = plan
		for _, g := range aims {
			taken[aimKey(g)] = true
			tried[aimedFault(g.Example(0))]++
		}
	}
	s.runProbe(ctx, func(p probed) {
		var rest []*rapid.Generator[[]faults.Step]
		for _, g := range aimedPlans(s.spec, p) {
			if !taken[aimKey(g)] {
				rest = append(rest, g)
			}
		}
		fillAimed(joinedAims(rarestFirst(rest, p, tried, seed), odd-early, furtherOn, maxSteps, random), early)
	})
	return ps
}

// PlanList is harness.PlanList: see its documentation there.
type PlanList struct {
	Seed  uint64
	Shard Shard
	// Plans are the shard's plans (every plan, unsharded), in order.
	Plans []ListedPlan
}

// ListedPlan is one plan of a PlanList.
type ListedPlan struct {
	// Index is the plan's place in the search, from 0: shard I of N runs
	// those whose Index is I mod N.
	Index int
	Plan  []faults.Step
	// Aimed: aimed at the controller (the odd plans). Probed: aimed at
	// what the search's probe sees it do, listed as drawn when no probe
	// ran (aimed at every write).
	Aimed, Probed bool
	// Again: a plan of a lower index is the same; the search does not run
	// it twice.
	Again bool
}

// ListPlans is harness.ListPlans: see its documentation there.
func ListPlans(spec Spec, opts SearchOptions) (PlanList, error) {
	s, err := newSearcher(nil, spec, "", opts)
	if err != nil {
		return PlanList{}, err
	}
	s.probe = func(context.Context, *Env, Spec, []faults.Step) (probed, func(), error) {
		return probed{}, func() {}, nil
	}
	ps := s.plans(context.Background())
	<-ps.drawn
	s.wait()
	list := PlanList{Seed: s.opts.Seed, Shard: s.opts.Shard}
	seen := map[string]bool{}
	for i, plan := range ps.plans {
		key := faults.FormatPlan(plan)
		if ps.shard.runs(i) {
			list.Plans = append(list.Plans, ListedPlan{Index: i, Plan: plan, Aimed: i%2 == 1, Probed: i%2 == 1 && i >= ps.probedFrom, Again: seen[key]})
		}
		seen[key] = true
	}
	return list, nil
}

// String is the list as kubeprop run --list prints it: a line saying
// what it is, then a line per plan, its index, what it is (drawn at
// random, aimed, or probed: aimed at the probe's findings) and the plan.
func (l PlanList) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d", l.Seed)
	if l.Shard.sharded() {
		fmt.Fprintf(&b, ", shard %s", l.Shard)
	}
	fmt.Fprintf(&b, ": %d plans (probed: aimed at what the probe sees the controller do, listed as drawn without it; again: run once, at its lower index)\n", len(l.Plans))
	for _, p := range l.Plans {
		kind := "random"
		switch {
		case p.Probed:
			kind = "probed"
		case p.Aimed:
			kind = "aimed"
		}
		if p.Again {
			kind += ",again"
		}
		fmt.Fprintf(&b, "%d %s %s\n", p.Index, kind, faults.FormatPlan(p.Plan))
	}
	return b.String()
}
