package search

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness/internal/lifecycle"
)

// newSearcher is the search of spec named name with opts, both with
// their defaults and checked.
func newSearcher(env *Env, spec Spec, name string, opts SearchOptions) (*searcher, error) {
	spec, err := lifecycle.Checked(spec)
	if err != nil {
		return nil, err
	}
	if opts.Shard.sharded() && opts.Seed == 0 {
		return nil, fmt.Errorf("SearchOptions.Shard is %s but the Seed is 0: give every shard the same seed, or each draws its own plans", opts.Shard)
	}
	opts = opts.withDefaults(name)
	if err = opts.validate(); err != nil {
		return nil, err
	}
	return &searcher{env: env, spec: spec, opts: opts, runs: map[string]int{}, runCase: lifecycle.RunCase, probe: probeWrites}, nil
}

// searcher runs the plans of one search.
type searcher struct {
	env  *Env
	spec Spec
	opts SearchOptions

	mu sync.Mutex
	// runs counts the runs of each plan: the search runs a plan once, the
	// shrinker a candidate at most shrinkAttempts times.
	runs map[string]int
	// failures are the reports of the plans that failed, by plan (see
	// failedOnce).
	failures map[string]*Report
	// onCase serializes the calls of OnCase.
	onCase sync.Mutex
	// runCase runs a case: run, or a stand-in in the shrinker's tests.
	runCase func(ctx context.Context, env *Env, spec Spec, plan []faults.Step, judged func(*Report)) (*Report, error)
	// probe sees the controller's writes in one of probePlans:
	// probeWrites, or a stand-in in the aims' tests.
	probe func(ctx context.Context, env *Env, spec Spec, plan []faults.Step) (probed, func(), error)
	// lateErr: a teardown stuck after its case's outcome was told (guarded
	// by mu).
	lateErr error
	// probeErr: the probe failed (guarded by mu). The search goes on
	// with the aims that need no probe; a search that then passes
	// answers it, as it would have a case's (see Find).
	probeErr error
	// shrinking is the property being shrunk, once the shrink began;
	// shrinkStats count its cases (both guarded by mu).
	shrinking   string
	shrinkStats ShrinkStats

	// slots hold Parallel tokens, one per case running, across the calls
	// of firstFailing; cases counts them until their teardown ended.
	slotsOnce sync.Once
	slots     chan struct{}
	freed     chan struct{} // a slot was given back
	cases     sync.WaitGroup
}

// run runs one plan and tells found its outcome, once: the report of a
// failure (nil for a pass), or the harness's failure. The outcome is told
// as soon as the properties judged the case, before its teardown, which
// holds the case's slot until it ends: the search has its answer that
// much sooner, and a shrink pass, which waits for the candidates before
// the one that failed, does not wait for their teardowns (a stateful
// operator's takes 20 s: claims and volumes). Until run returns, the
// report's Teardown, Timeline and Times are still being written; OnCase
// gets it after. A teardown stuck after the outcome was told is kept for
// Find (see takeLateErr).
func (s *searcher) run(ctx context.Context, plan []faults.Step, found func(*Report, error)) {
	s.mu.Lock()
	shrinking := s.shrinking
	s.mu.Unlock()
	s.runSpec(ctx, candidateSpec(s.spec, shrinking), plan, found)
}

// runSpec is run with spec, which replays of a shrunk plan give whole.
func (s *searcher) runSpec(ctx context.Context, spec Spec, plan []faults.Step, found func(*Report, error)) {
	s.mu.Lock()
	shrinking := s.shrinking // a candidate of the shrink, not a plan drawn
	s.mu.Unlock()
	told, cutShort := false, false
	tell := func(rep *Report, err error) {
		switch {
		case !told:
			// Ended by the search before its outcome was in? (Told,
			// the search ends its context too.)
			told, cutShort = true, ctx.Err() != nil
			found(rep, err)
		case err != nil: // the teardown of an outcome told
			s.mu.Lock()
			s.lateErr = cmp.Or(s.lateErr, err)
			s.mu.Unlock()
		}
	}
	rep, err := s.runCase(ctx, s.env, spec, plan, func(rep *Report) {
		switch {
		case s.foreignWrites(rep, plan) != nil: // told once run returns
		case rep.Failed():
			tell(rep, nil)
		default:
			tell(nil, nil)
		}
	})
	if shrinking != "" && rep != nil {
		s.mu.Lock()
		s.shrinkStats.count(rep, rep.Failed() && rep.Failures[0].Property == shrinking, cutShort || !told && ctx.Err() != nil)
		s.mu.Unlock()
	}
	if err != nil {
		tell(nil, fmt.Errorf("the harness failed: %w", err))
		return
	}
	rep.Shrinking = shrinking != ""
	if s.opts.OnCase != nil {
		s.onCase.Lock()
		s.opts.OnCase(rep)
		s.onCase.Unlock()
	}
	if lifecycle.Stuck(rep.Teardown) != "" {
		// Its goroutines may go on; the search stops here, and the cases
		// beside it finish.
		tell(nil, fmt.Errorf("the harness failed: case %s (plan %s): %s", rep.Namespace, faults.FormatPlan(plan), lifecycle.Stuck(rep.Teardown)))
		return
	}
	if err := s.foreignWrites(rep, plan); err != nil {
		tell(nil, err)
		return
	}
	if !rep.Failed() {
		rep = nil
	}
	tell(rep, nil)
}

// foreignWrites is the error of a spec whose controller wrote into other
// cases' namespaces while cases ran side by side.
func (s *searcher) foreignWrites(rep *Report, plan []faults.Step) error {
	if s.opts.Parallel <= 1 || len(rep.ForeignWrites) == 0 {
		return nil
	}
	return fmt.Errorf("cases of this spec cannot run side by side: its controller wrote into other cases' namespaces (%s) in case %s; "+
		"search with Parallel 1 (-kubeprop.parallel=1), or have the controller act only in its case's namespace "+
		"(harness.CaseNamespace(ctx) in a Func, the kubeconfig's namespace in a Process)",
		strings.Join(rep.ForeignWrites, "; "), faults.FormatPlan(plan))
}

// takeLateErr is the harness failure met in a teardown after its case's
// failure was told, if any.
func (s *searcher) takeLateErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lateErr
}

// ran counts a run of plan unless it ran attempts times already.
func (s *searcher) ran(plan []faults.Step, attempts int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := faults.FormatPlan(plan)
	if s.runs[key] >= attempts {
		return true
	}
	s.runs[key]++
	return false
}

// skipped tells OnSkip of a plan drawn that ran before; the shrinker's
// candidates run before are no news.
func (s *searcher) skipped(plan []faults.Step) {
	s.mu.Lock()
	shrinking := s.shrinking
	s.mu.Unlock()
	if shrinking != "" || s.opts.OnSkip == nil {
		return
	}
	s.onCase.Lock()
	defer s.onCase.Unlock()
	s.opts.OnSkip(plan)
}

// unran takes back the count of a run that was cut short.
func (s *searcher) unran(plan []faults.Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs[faults.FormatPlan(plan)]--
}

// firstFailing runs plans, Parallel at a time in their order, and returns
// a failing one (failing property, when given; any property otherwise)
// with its report; -1 and nil when none fails. The answer is the lowest
// failing index, or with firstJudged the first failing case judged (a
// failing case ends for the search when it is judged: see run). Plans run
// attempts times before are skipped (they did not fail that way: see
// shrink); plans that failed that way before are taken as failing without
// a run (see failedOnce). None is started after the first failure found
// or, when deadline is set, after the deadline. Once the answer is in,
// the cases still running are cut short and tear down while it returns;
// each holds its slot of Parallel until then (wait).
func (s *searcher) firstFailing(plans [][]faults.Step, property string, deadline time.Time, attempts int, firstJudged bool) (int, *Report, error) {
	return s.firstFailingOf(drawnPlans(plans), property, deadline, attempts, firstJudged)
}

// firstFailingOf is firstFailing of plans some of which are drawn later:
// while one is not drawn, the next drawn ones start in its place.
func (s *searcher) firstFailingOf(plans *planSet, property string, deadline time.Time, attempts int, firstJudged bool) (int, *Report, error) {
	type result struct {
		i   int
		rep *Report
		err error
	}
	// Buffered: the cases cut short end after this returns.
	results := make(chan result, plans.len())
	best := -1
	var bestRep *Report
	var firstErr error
	running := map[int]context.CancelFunc{} // the cases running, by plan
	started := make([]bool, plans.len())
	lowest := 0 // the lowest plan not started
	drawn := plans.drawn
	select {
	case <-drawn:
		drawn = nil // every plan is drawn
	default:
	}
	take := func(r result) {
		switch {
		case best >= 0 && r.i > best:
			// Cut short when best was found (none starts after):
			// whatever it says, it did not run to its end.
			s.unran(plans.at(r.i))
		case r.err != nil:
			if firstErr == nil {
				firstErr = r.err
			}
		case r.rep != nil:
			s.failedOnce(plans.at(r.i), r.rep)
			if (property == "" || r.rep.Failures[0].Property == property) && (best < 0 || r.i < best) {
				best, bestRep = r.i, r.rep
				for j, cancel := range running {
					if j > best {
						cancel()
					}
				}
			}
		}
	}
	// next is the lowest plan not started that is drawn, or -1.
	next := func() int {
		for lowest < len(started) && started[lowest] {
			lowest++
		}
		for i := lowest; i < len(started); i++ {
			if !started[i] && plans.at(i) != nil {
				return i
			}
		}
		return -1
	}
	// open: more plans may start.
	open := func() bool {
		return best < 0 && firstErr == nil && (deadline.IsZero() || time.Now().Before(deadline))
	}
	for {
		for len(running) < s.opts.Parallel && open() {
			i := next()
			if i < 0 || !s.takeSlot() {
				break
			}
			started[i] = true
			plan := plans.at(i)
			if !plans.shard.runs(i) {
				// Another shard's plan: counted as run, so that the
				// same plan drawn again is skipped here as in the
				// whole search.
				s.ran(plan, attempts)
				s.freeSlot()
				continue
			}
			if rep := s.failedBefore(plan, property); rep != nil {
				take(result{i, rep, nil})
				s.freeSlot()
				continue
			}
			if s.ran(plan, attempts) {
				s.skipped(plan)
				s.freeSlot()
				continue
			}
			ctx, cancel := context.WithCancel(context.Background())
			running[i] = cancel
			s.launch(func() {
				s.run(ctx, plan, func(rep *Report, err error) { results <- result{i, rep, err} })
			})
		}
		// The answer is in once no plan before the best is running (with
		// firstJudged, once there is a best) and none is left to draw or
		// to start (a slot may be the probe's, or a confirming run's):
		// the cases left are cut short. After a harness failure the cases
		// running finish.
		waiting := open() && (drawn != nil && lowest < len(started) || next() >= 0)
		for i := range running {
			waiting = waiting || best < 0 || i < best && !firstJudged
		}
		if !waiting {
			for i, cancel := range running {
				cancel()
				s.unran(plans.at(i))
			}
			return best, bestRep, firstErr
		}
		select {
		case r := <-results:
			running[r.i]()
			delete(running, r.i)
			take(r)
		case <-drawn:
			drawn = nil
		case <-s.freed:
		}
	}
}

// failedOnce keeps the report of a plan whose case failed (and was not cut
// short); failedBefore returns it when it failed property (any, when
// empty). A shrink pass waits for its candidates before the failing one
// it takes, and those placed after it but judged before it may have
// failed too; a later pass often tries them again: each known failure is
// a case not run again, which for a bug judged at a 30 s deadline is most
// of a candidate's time.
func (s *searcher) failedOnce(plan []faults.Step, rep *Report) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failures == nil {
		s.failures = map[string]*Report{}
	}
	s.failures[faults.FormatPlan(plan)] = rep
}

func (s *searcher) failedBefore(plan []faults.Step, property string) *Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	rep := s.failures[faults.FormatPlan(plan)]
	if rep == nil || property != "" && rep.Failures[0].Property != property {
		return nil
	}
	return rep
}

// startCase runs a case in a slot of Parallel, taken when one is free
// (the cases a search cut short may still hold theirs).
func (s *searcher) startCase(run func()) {
	s.makeSlots()
	s.slots <- struct{}{}
	s.launch(run)
}

// takeSlot takes a slot of Parallel if one is free, and reports whether
// it did: the search's loop must not wait for one while its cases' outcomes
// come in (the probe's cases and the confirming runs hold slots too).
func (s *searcher) takeSlot() bool {
	s.makeSlots()
	select {
	case s.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

// launch runs a case in the slot taken for it.
func (s *searcher) launch(run func()) {
	s.cases.Add(1)
	go func() {
		defer s.cases.Done()
		defer s.freeSlot()
		run()
	}()
}

// freeSlot gives a slot back, and tells the search's loop (freed).
func (s *searcher) freeSlot() {
	<-s.slots
	select {
	case s.freed <- struct{}{}:
	default: // told already
	}
}

func (s *searcher) makeSlots() {
	s.slotsOnce.Do(func() {
		s.slots = make(chan struct{}, s.opts.Parallel)
		s.freed = make(chan struct{}, 1)
	})
}

// wait returns once every case started has ended, teardown included.
func (s *searcher) wait() { s.cases.Wait() }
