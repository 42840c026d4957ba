package search

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness/internal/lifecycle"
	"github.com/kubeprop/kubeprop/properties"
)

// ShrinkStats is harness.ShrinkStats: see its documentation there.
type ShrinkStats struct {
	// Took is the shrink's wall time, to its answer.
	Took time.Duration
	// Candidates are the cases run (confirming runs included), Failed of
	// them failed the property shrunk, CutShort were stopped once a
	// smaller failing plan was in.
	Candidates, Failed, CutShort int
	// Failing and Passing sum the cases' wall times (Times.Total); Judge
	// is the failing ones' wait for their verdict after the heal.
	Failing, Passing, Judge time.Duration
	// References are the reference runs made for candidates, and their
	// time (within Failing and Passing).
	References    int
	ReferenceTime time.Duration
	// Unconfirmed are the candidates that failed once and passed their
	// confirming run: given up (see shrink).
	Unconfirmed int
	// Reproduced and DrawnReproduced are how many of Replays replays of
	// the plan returned and of the plan drawn failed the property (none
	// when the plan drawn is the smallest; the plan drawn -1, not
	// replayed, when the plan returned failed in every replay); WalkedBack
	// counts the plans kept that were given up for reproducing less often
	// (see asOften).
	Replays, Reproduced, DrawnReproduced, WalkedBack int
}

func (st ShrinkStats) String() string {
	return fmt.Sprintf("%s: %d candidates, %d failed (%s, %s of it judging after the heal), %d passed (%s), %d cut short; %d reference runs (%s); %d failed once and passed their confirming run",
		st.Took.Round(time.Second), st.Candidates, st.Failed, st.Failing.Round(time.Second), st.Judge.Round(time.Second),
		st.Candidates-st.Failed-st.CutShort, st.Passing.Round(time.Second), st.CutShort, st.References, st.ReferenceTime.Round(time.Second), st.Unconfirmed) +
		st.reproduced()
}

// rate is the expect.rate of the scenario of a shrunk plan that failed in
// some of its replays but not all (1 of 3: 0.33, rounded down), so that a
// replay judges it by how often it reproduced; 0 (every replay) else. One
// that failed in none of them failed in the run that kept it: once in the
// replays and that run (1 of 4: 0.25).
func (st ShrinkStats) rate() float64 { return Rate(st.Reproduced, st.Replays) }

// Rate is the share of replays a scenario states (expect.rate) when
// reproduced of replays reproduced its failure: 0 for every one, rounded
// down to a hundredth, and at least one in replays+1.
func Rate(reproduced, replays int) float64 {
	if replays == 0 || reproduced >= replays {
		return 0
	}
	if reproduced <= 0 {
		return math.Floor(100/float64(replays+1)) / 100
	}
	return math.Floor(100*float64(reproduced)/float64(replays)) / 100
}

func (st ShrinkStats) reproduced() string {
	if st.Replays == 0 {
		return ""
	}
	if st.DrawnReproduced < 0 {
		return fmt.Sprintf("; reproduced in %d of %d replays", st.Reproduced, st.Replays)
	}
	return fmt.Sprintf("; reproduced in %d of %d replays, the plan drawn in %d; %d shrink steps given up for reproducing less often",
		st.Reproduced, st.Replays, st.DrawnReproduced, st.WalkedBack)
}

// count adds a candidate's case to the stats; failed: it failed property.
func (st *ShrinkStats) count(rep *Report, failed, cutShort bool) {
	st.Candidates++
	switch {
	case cutShort:
		st.CutShort++
	case failed:
		st.Failed++
		st.Failing += rep.Times.Total()
		st.Judge += rep.Times.Judge
	default:
		st.Passing += rep.Times.Total()
	}
	if rep.Times.Reference > 0 {
		st.References++
		st.ReferenceTime += rep.Times.Reference
	}
}

// shrink returns the smallest plan it finds that fails as rep does, and
// when it found it (zero if rep is the smallest). When no candidate of a
// plan fails, each is run once more before the plan counts as the
// smallest: a bug that shows by timing (a crash between two writes, a
// reconcile inside a watch delay) fails in some runs of its plan only,
// the more so with cases beside it. Those second runs go all at once,
// rather than pass by pass: every one must run unless one fails, and a
// passing Database candidate takes 30-60 s. (The first runs go pass by
// pass: the earlier passes' candidates are smaller, and one that fails
// leaves the later passes' unrun.)
//
// A failing candidate is kept only once a second run of it fails the same
// way: one that fails once and passes its confirming run is given up, and
// the shrink goes on without it. Otherwise a plan that fails only when
// the timing falls right could replace one that fails reliably, and the
// scenario saved would not reproduce. The confirming run goes beside the
// next pass, which starts from the candidate meanwhile (most are
// confirmed: a run per candidate kept, one after the other, would take
// most of the budget): when the candidate is given up, the shrink goes
// back to the last plan not given up. Before it answers, the shrink waits
// for every confirming run.
//
// The plan it returns reproduces at least as often as the plan drawn (see
// asOften).
func (s *searcher) shrink(rep *Report, deadline time.Time) (*Report, time.Time) {
	return s.asOften(s.shrinkChain(rep, deadline), rep.Failures[0].Property)
}

// shrinkChain is shrink's search: the plans it kept, each smaller than the
// one before, from rep's, every one confirmed.
func (s *searcher) shrinkChain(rep *Report, deadline time.Time) []*keptPlan {
	property := rep.Failures[0].Property
	// The plans kept, each smaller than the one before, from the plan
	// drawn (which stands as found); the last is the one shrunk further.
	chain := []*keptPlan{{rep: rep, outcome: confirmedPlan}}
	given := map[string]bool{} // candidates given up
	attempts := 1
	// update takes in the confirming runs that ended (with wait, every
	// one): a candidate given up leaves the chain. It reports whether the
	// plan shrunk further changed.
	update := func(wait bool) bool {
		changed := false
		for i := 1; i < len(chain); {
			k := chain[i]
			if k.resolve(wait) != unconfirmedPlan {
				i++
				continue
			}
			given[faults.FormatPlan(k.rep.Plan)] = true
			s.mu.Lock()
			s.shrinkStats.Unconfirmed++
			s.mu.Unlock()
			changed = changed || i == len(chain)-1
			chain = slices.Delete(chain, i, i+1)
		}
		return changed
	}
	try := func(candidates [][]faults.Step) bool {
		candidates = slices.DeleteFunc(slices.Clone(candidates), func(c []faults.Step) bool { return given[faults.FormatPlan(c)] })
		_, smaller, err := s.firstFailing(candidates, property, deadline, attempts, false)
		if err != nil || smaller == nil {
			return false
		}
		chain = append(chain, s.confirming(smaller, property))
		attempts = 1
		return true
	}
	for time.Now().Before(deadline) {
		if update(false) {
			attempts = 1
		}
		passes := s.shrinkPasses(chain[len(chain)-1].rep)
		if attempts > 1 {
			// In their order: the lowest index that fails wins.
			passes = [][][]faults.Step{slices.Concat(passes...)}
		}
		smaller := false
		for _, candidates := range passes {
			if smaller = try(candidates); smaller {
				break
			}
		}
		switch {
		case smaller:
		case attempts < shrinkAttempts:
			attempts++
		case update(true):
			// The plan shrunk was given up: on from the one before.
			attempts = 1
		default:
			return chain
		}
	}
	update(true)
	return chain
}

// keptPlan is a failing candidate the shrink kept, and its confirming
// run's outcome.
type keptPlan struct {
	rep     *Report
	at      time.Time // when it was found
	confirm chan planOutcome
	outcome planOutcome
}

// resolve takes in the confirming run's outcome if it ended (with wait,
// once it ends), and returns the plan's outcome.
func (k *keptPlan) resolve(wait bool) planOutcome {
	switch {
	case k.outcome != pendingPlan:
	case wait:
		k.outcome = <-k.confirm
	default:
		select {
		case k.outcome = <-k.confirm:
		default:
		}
	}
	return k.outcome
}

type planOutcome int

const (
	pendingPlan     planOutcome = iota
	confirmedPlan               // its confirming run failed the same way
	unconfirmedPlan             // it passed, failed otherwise, or the harness failed
)

// ReproduceReplays is how many times asOften replays a plan.
const ReproduceReplays = 3

// fewerToWalkBack is how many replays fewer than the plan drawn's a kept
// plan must reproduce in to be given up: a plan that failed in 2 replays
// of 3 and one that failed in 3 of 3 cannot be told apart by so few (and
// the kept one failed twice more, in its candidate run and its confirming
// run), but 1 of 3 against 3 of 3 says the step dropped made the bug's
// timing likely.
const fewerToWalkBack = 2

// asOften returns the last of the plans kept (confirmed, each smaller than
// the one before, from the plan drawn) that reproduces property at least
// as often as the plan drawn, over ReproduceReplays replays of each (to
// within one replay: fewerToWalkBack), and
// when it was found: a step dropped may have been what made the bug's
// timing likely, so that the smaller plan fails less reliably, and a
// scenario is worth what it reproduces. The plan drawn is replayed only
// when the shrunk one fell short in a replay (else none can reproduce more
// often); then the plans between, the last first, while they fall short
// of it (a plan that reproduced in no replay falls short of one that did
// in any); the plan drawn is the answer when every one does. The report
// of a smaller plan answered is one of its replays', the whole spec's.
func (s *searcher) asOften(kept []*keptPlan, property string) (*Report, time.Time) {
	last := len(kept) - 1
	if last == 0 {
		return kept[0].rep, time.Time{}
	}
	shrunk, replayed := s.reproductions(kept[last].rep.Plan, property)
	s.mu.Lock()
	s.shrinkStats.Replays, s.shrinkStats.Reproduced, s.shrinkStats.DrawnReproduced = ReproduceReplays, shrunk, -1
	s.mu.Unlock()
	if shrunk < ReproduceReplays {
		drawn, drawnReplayed := s.reproductions(kept[0].rep.Plan, property)
		s.mu.Lock()
		s.shrinkStats.DrawnReproduced = drawn
		s.mu.Unlock()
		for last > 0 && (shrunk <= drawn-fewerToWalkBack || shrunk == 0 && drawn > 0) {
			last--
			shrunk, replayed = drawn, drawnReplayed
			if last > 0 {
				shrunk, replayed = s.reproductions(kept[last].rep.Plan, property)
			}
			s.mu.Lock()
			s.shrinkStats.WalkedBack++
			s.shrinkStats.Reproduced = shrunk
			s.mu.Unlock()
		}
	}
	if last > 0 && replayed != nil {
		// A replay's report is the whole spec's (a candidate's may lack
		// the reference run: see candidateSpec).
		return replayed, kept[last].at
	}
	return kept[last].rep, kept[last].at
}

// reproductions replays plan ReproduceReplays times with the whole spec,
// all at once (slots of Parallel allowing), and counts the replays that
// failed property; rep is the first of them judged. A replay the harness
// failed does not count.
func (s *searcher) reproductions(plan []faults.Step, property string) (failed int, rep *Report) {
	var mu sync.Mutex
	var g sync.WaitGroup
	for range ReproduceReplays {
		g.Add(1)
		s.startCase(func() {
			s.runSpec(context.Background(), s.spec, plan, func(r *Report, err error) {
				if failedAs(r, err, property) {
					mu.Lock()
					failed++
					rep = cmp.Or(rep, r)
					mu.Unlock()
				}
				g.Done()
			})
		})
	}
	g.Wait()
	return failed, rep
}

// candidateSpec is the spec the shrink's candidates of a failure of
// property run (spec itself when property is empty: no shrink): spec
// without its property judged against a reference run when property
// comes before it in the Spec's order. After the heal a
// case's outcome is its first failure in that order (see lifecycle's
// check): the later property changes it only by failing during the steps
// (claims deleted), while its reference runs take seconds each (a
// stateful operator's, up to a minute). The plan shrunk is replayed with
// the whole spec (reproductions), which sees such a failure, and its
// report is one of those replays'.
func candidateSpec(spec Spec, property string) Spec {
	shrunk := slices.IndexFunc(spec.Properties, func(p properties.Property) bool { return p.Name() == property })
	referenced := slices.IndexFunc(spec.Properties, func(p properties.Property) bool {
		_, ok := p.(properties.Referenced)
		return ok
	})
	if shrunk < 0 || referenced <= shrunk {
		return spec
	}
	spec.Properties = slices.Delete(slices.Clone(spec.Properties), referenced, referenced+1)
	return spec
}

// confirming starts rep's plan's confirming run, in the first slot of
// Parallel free (before the next pass takes it), and returns the plan kept
// meanwhile.
func (s *searcher) confirming(rep *Report, property string) *keptPlan {
	k := &keptPlan{rep: rep, at: time.Now(), confirm: make(chan planOutcome, 1)}
	s.startCase(func() {
		s.run(context.Background(), rep.Plan, func(again *Report, err error) {
			if failedAs(again, err, property) {
				k.confirm <- confirmedPlan
				return
			}
			k.confirm <- unconfirmedPlan
		})
	})
	return k
}

// failedAs reports whether a run's outcome (see searcher.run) is a failure
// of property; a harness failure is not.
func failedAs(rep *Report, err error, property string) bool {
	return err == nil && rep != nil && rep.Failures[0].Property == property
}

// shrinkPasses are the candidates of rep's plan, pass by pass, the
// smallest first.
func (s *searcher) shrinkPasses(rep *Report) [][][]faults.Step {
	var passes [][][]faults.Step
	// The steps that did nothing or never ran (a property had failed
	// before them), all at once.
	if dropped := len(rep.NoOps) + len(rep.Unrun); dropped > 0 && dropped < len(rep.Plan) {
		var kept []faults.Step
		for i, st := range rep.Plan {
			if !slices.Contains(rep.NoOps, i) && !slices.Contains(rep.Unrun, i) {
				kept = append(kept, st)
			}
		}
		passes = append(passes, [][]faults.Step{kept})
	}
	// Each step alone: most bugs need one or two steps, and a plan of one
	// step is the shortest case there is; dropping steps one at a time
	// would take a run per step to get there.
	if len(rep.Plan) > 2 {
		var singles [][]faults.Step
		for _, st := range rep.Plan {
			singles = append(singles, []faults.Step{st})
		}
		passes = append(passes, singles)
	}
	var drops [][]faults.Step
	if len(rep.Plan) > 1 {
		for i := range rep.Plan {
			drops = append(drops, slices.Delete(slices.Clone(rep.Plan), i, i+1))
		}
	}
	// After the plain drops (the lowest index that fails wins): a
	// ScaleChange dropped while a later one keeps the change it made.
	drops = append(drops, faults.MergedScaleChanges(rep.Plan, lifecycle.FixtureObjects(s.spec))...)
	var simpler [][]faults.Step
	for i := range rep.Plan {
		for _, st := range faults.Simpler(rep.Plan[i]) {
			plan := slices.Clone(rep.Plan)
			plan[i] = st
			simpler = append(simpler, plan)
		}
	}
	// A fault at every write or watch at one of those the failing case's
	// controller tried: the errors, the crash or the stale view where
	// they matter.
	if rep.Trace != nil {
		writes, watched := triedWrites(rep.Trace, rep.Namespace), lifecycle.Watched(rep)
		for i := range rep.Plan {
			for _, st := range faults.Narrowed(rep.Plan[i], writes, watched) {
				plan := slices.Clone(rep.Plan)
				plan[i] = st
				simpler = append(simpler, plan)
			}
		}
	}
	// A burst's changes as steps of their own, each settled: the failure
	// needs no race with the controller.
	simpler = append(simpler, faults.SplitBursts(rep.Plan)...)
	return append(passes, drops, simpler)
}

// shrinkAttempts is how many times the shrinker runs a candidate that
// passes.
const shrinkAttempts = 2
