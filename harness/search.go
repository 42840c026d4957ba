package harness

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"pgregory.net/rapid"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness/scenario"
)

// The search, as kubeprop runs it: rapid is the generator of plans, and
// kubeprop runs them and shrinks a failure itself. A case takes seconds
// and mostly waits (settling, evictions, deadlines), so cases run
// Parallel at a time; rapid's own loop runs one property call at a time,
// and its shrinker tries bit streams one by one, many of which draw a plan
// already run.
//
// Plan i of a search, for even i, is what rapid.Check would draw for its
// i-th check with the same seed (rapid's seeds go S, S+1, S+3, S+6, ...),
// whatever Parallel is; the odd ones are aimed at the controller (see
// aim.go). The failure shrunk is the first failing case judged: at
// Parallel 1 the failing plan of the lowest index; with Parallel > 1 the
// one that failed first, and the cases still running, before it or after
// it, are cut short. Waiting for the plans before it gave each search the
// time of the slowest of them (a correct case waits out its properties'
// deadlines, a safety failure beside it is judged in seconds). So at
// Parallel > 1 which of a batch's failing plans is shrunk depends on
// timing; its replay does not. The search goes on (to the shrinker) while
// the cases cut short tear down, each in its slot of Parallel until it
// has. Shrinking keeps each
// change after which the same property still fails: it drops the steps
// the case recorded as no-ops, and those it did not run because a
// property had already failed, together (one run), then tries each step
// alone, then dropping each step (and each ScaleChange merged into a later
// one of its field, which keeps the change it made: see
// faults.MergedScaleChanges), then each step's simpler forms
// (faults.Simpler) and each burst split into settled steps
// (faults.SplitBursts), Parallel candidates at a time, taking the first in
// that order that fails, until none does (twice: a timing-dependent bug
// fails in some runs of its plan only) or ShrinkTime has passed since
// the failure was found. A candidate that failed so before (in an
// earlier pass, placed after the one taken but judged before it) counts
// without a run. The search's draws keep only the failure they take.

// SearchOptions configure a search (Check, Find). The zero value is 100
// plans from a random seed, 1 m of shrinking, DefaultParallel cases at a
// time, and scenarios under testdata/kubeprop/<name>. go test, kubeprop
// run, the demo and the soak take the same settings by the same names
// (SearchFlags).
type SearchOptions struct {
	// Checks is how many plans to draw. Zero means 100.
	Checks int
	// Seed makes a search repeatable: the same seed draws the same plans.
	// Zero draws a random one, which the finding names.
	Seed uint64
	// ShrinkTime bounds shrinking, from the first failure on. Zero means
	// 1 m.
	ShrinkTime time.Duration
	// Parallel is how many cases run at once, in the search and in each
	// shrink pass: 1 to 64. Zero means DefaultParallel().
	Parallel int
	// Dir is where the scenario and the HTML timeline of a failure go.
	// Empty means testdata/kubeprop/<name>, relative to the working folder.
	Dir string
	// OnCase, when set, is called with the report of every case as it
	// ends, one call at a time (with Parallel > 1 from the goroutines that
	// ran the cases, never two at once).
	OnCase func(*Report)
	// OnSkip, when set, is called with a plan drawn that the search does
	// not run: the same plan ran before (rapid draws short plans more
	// than once). Called as OnCase is.
	OnSkip func(plan []faults.Step)
}

// The search's defaults: what zero SearchOptions.Checks and ShrinkTime
// mean.
const (
	DefaultChecks     = 100
	DefaultShrinkTime = time.Minute
)

// MaxParallel bounds SearchOptions.Parallel.
const MaxParallel = 64

// DefaultParallel is what a zero SearchOptions.Parallel means: the cases
// at once that keep a 2-core machine busy without false alarms (see the
// README's bench table); two in a binary built with -race, whose
// in-process work is several times slower.
func DefaultParallel() int {
	if raceDetector {
		return defaultParallelRace
	}
	return defaultParallel
}

const (
	defaultParallel     = 16
	defaultParallelRace = 2
)

func (o SearchOptions) withDefaults(name string) SearchOptions {
	if o.Checks == 0 {
		o.Checks = DefaultChecks
	}
	if o.Seed == 0 {
		o.Seed = rand.Uint64()
	}
	if o.ShrinkTime == 0 {
		o.ShrinkTime = DefaultShrinkTime
	}
	if o.Parallel == 0 {
		o.Parallel = DefaultParallel()
	}
	if o.Dir == "" {
		o.Dir = filepath.Join(ScenarioDir, name)
	}
	return o
}

func (o SearchOptions) validate() error {
	var errs []error
	if o.Checks < 0 {
		errs = append(errs, fmt.Errorf("SearchOptions.Checks is %d: give a number of plans, or 0 for %d", o.Checks, DefaultChecks))
	}
	if o.ShrinkTime < 0 {
		errs = append(errs, fmt.Errorf("SearchOptions.ShrinkTime is %v: give a duration, or 0 for %v", o.ShrinkTime, DefaultShrinkTime))
	}
	if o.Parallel < 0 || o.Parallel > MaxParallel {
		errs = append(errs, fmt.Errorf("SearchOptions.Parallel is %d: give 1 to %d cases at once, or 0 for the default (%d)", o.Parallel, MaxParallel, DefaultParallel()))
	}
	if err := writable(o.Dir); err != nil {
		errs = append(errs, fmt.Errorf("SearchOptions.Dir: %w", err))
	}
	return errors.Join(errs...)
}

// writable checks, without creating anything, that dir can be made and
// written: its nearest existing ancestor is a writable folder.
func writable(dir string) error {
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		info, err := os.Stat(p)
		switch {
		case err == nil && !info.IsDir():
			return fmt.Errorf("%s is not a folder, so %s cannot be made", p, dir)
		case err == nil:
			if err := syscall.Access(p, 2 /* W_OK */); err != nil {
				return fmt.Errorf("folder %s cannot be written: %w", p, err)
			}
			return nil
		case !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
			return fmt.Errorf("%s: %w", dir, err)
		}
		if filepath.Dir(p) == p {
			return nil
		}
	}
}

// Check draws fault plans and runs each on env; a property failure is
// shrunk to a minimal plan, printed with its timeline, saved as a scenario
// file and given a replay command. It searches with the flags
// -kubeprop.checks, -kubeprop.seed, -kubeprop.shrinktime and
// -kubeprop.parallel, and their KUBEPROP_* twins (SearchOptionsFromFlags);
// CheckWith takes the options as a value. With -kubeprop.replay=FILE it
// replays that scenario instead.
func Check(t TB, env *Env, spec Spec) {
	t.Helper()
	opts, err := SearchOptionsFromFlags()
	if err != nil {
		t.Fatal(err)
	}
	for _, ignored := range ignoredRapidFlags() {
		t.Logf("kubeprop: %s", ignored)
	}
	CheckWith(t, env, spec, opts)
}

// CheckWith is Check with the search's options given.
func CheckWith(t TB, env *Env, spec Spec, opts SearchOptions) {
	t.Helper()
	spec = spec.withDefaults()
	if err := spec.validate(); err != nil {
		t.Fatal(err)
	}
	if *replayFlag != "" {
		replay(t, env, spec, *replayFlag, true, *replayCountFlag)
		return
	}
	f, err := Find(env, spec, t.Name(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if f != nil {
		log, events, objects := scenario.Evidence(f.Scenario)
		t.Errorf("kubeprop: %s\n    plan (shrunk from %d to %d steps): %s\n    seed:     %d\n    timeline:\n      %s\n    timeline: %s\n    scenario: %s\n    log:      %s\n    events:   %s\n    objects:  %s\n    replay:   go test -run '%s' -kubeprop.replay=%s",
			f.Message, f.DrawnSteps, len(f.Plan), faults.FormatPlan(f.Plan), f.Seed,
			strings.Join(f.Report.Timeline, "\n      "), f.Page, f.Scenario, log, events, objects, scenario.RunPattern(t.Name()), f.Scenario)
		t.FailNow()
	}
}

// Finding is a property failure found and shrunk by Check or Find: the
// shrunk plan's first failure, and how the search came to it.
type Finding struct {
	Failure
	// Plan is the shrunk plan; DrawnSteps the length of the plan that
	// failed first.
	Plan       []faults.Step
	DrawnSteps int
	// Seed is the search's: the same seed draws the same plans (and at
	// Parallel 1 finds the same first failure).
	Seed uint64
	// FailingPlan is the number (from 1) of the failing plan the search
	// took: at Parallel 1, how many plans it took to find the failure.
	FailingPlan int
	// FoundAfter and ShrunkAfter are the times from the start of the
	// search to the first failure and to the last smaller one.
	FoundAfter, ShrunkAfter time.Duration
	// Shrink is where the shrink's time went.
	Shrink ShrinkStats
	// Scenario and Page are the files written: the scenario to replay and
	// the HTML timeline.
	Scenario, Page string
	Report         *Report
}

// ShrinkStats is where a shrink's time went: the cases it ran, and how
// long those that failed and those that passed took.
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
func (st ShrinkStats) rate() float64 {
	if st.Replays == 0 || st.Reproduced >= st.Replays {
		return 0
	}
	if st.Reproduced <= 0 {
		return math.Floor(100/float64(st.Replays+1)) / 100
	}
	return math.Floor(100*float64(st.Reproduced)/float64(st.Replays)) / 100
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

// Find draws plans, shrinks the first failure, saves its scenario under
// opts.Dir, and returns it; nil when every plan passed. The error is for
// bad input and the harness's own failures.
func Find(env *Env, spec Spec, name string, opts SearchOptions) (*Finding, error) {
	spec = spec.withDefaults()
	if err := spec.validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults(name)
	if err := opts.validate(); err != nil {
		return nil, err
	}
	s := &searcher{env: env, spec: spec, opts: opts, runs: map[string]int{}, runCase: run, probe: probeWrites}
	// Nothing a search started outlives it.
	defer s.wait()
	start := time.Now()
	probe, endProbe := context.WithCancel(context.Background())
	index, first, err := s.firstFailingOf(s.plans(probe), "", time.Time{}, 1, true)
	// A probe still running when a failure was found is not needed.
	endProbe()
	if err == nil && first == nil {
		// Every plan passed: a teardown stuck after its pass was told
		// is still the harness's failure.
		s.wait()
		err = s.takeLateErr()
	}
	if err != nil || first == nil {
		return nil, err
	}
	failedAt := time.Now()
	s.mu.Lock()
	s.shrinking = first.Failures[0].Property
	s.mu.Unlock()
	last, lastAt := s.shrink(first, failedAt.Add(opts.ShrinkTime))
	shrunk := time.Now()
	if lastAt.IsZero() {
		lastAt = failedAt
	}
	// The reports' teardowns end (see searcher.run).
	s.wait()
	if err := s.takeLateErr(); err != nil {
		return nil, err
	}
	f := last.Failures[0]
	finding := &Finding{Failure: f, Plan: last.Plan, DrawnSteps: len(first.Plan),
		Seed: opts.Seed, FailingPlan: index + 1, FoundAfter: failedAt.Sub(start), ShrunkAfter: lastAt.Sub(start), Report: last}
	s.mu.Lock()
	finding.Shrink = s.shrinkStats
	s.mu.Unlock()
	finding.Shrink.Took = shrunk.Sub(failedAt)
	finding.Scenario = filepath.Join(opts.Dir, fmt.Sprintf("%s-%d.yaml", f.Property, len(last.Plan)))
	if err := last.saveScenario(finding.Scenario, name, finding.Shrink.rate()); err != nil {
		return finding, err
	}
	finding.Page = strings.TrimSuffix(finding.Scenario, ".yaml") + ".html"
	if err := last.writeHTML(finding.Page, name+": "+f.Property); err != nil {
		return finding, err
	}
	return finding, nil
}

// Plans is the generator the spec's plans are drawn from: 1 to MaxSteps
// steps of its faults, for its nodes and fixtures (zero values take their
// defaults). Its Example(seed) is one plan.
func (s Spec) Plans() *rapid.Generator[[]faults.Step] {
	s = s.withDefaults()
	objects := s.fixtureObjects()
	return faults.Plan(s.Faults, faults.Config{Nodes: s.Nodes, Fixtures: len(objects), Objects: objects}, s.MaxSteps)
}

// fixtureObjects are the spec's fixtures as a case creates them, but in
// the namespace "default": what values are drawn (and merged) next to.
func (s Spec) fixtureObjects() []client.Object {
	if s.Fixtures == nil {
		return nil
	}
	return s.Fixtures("default")
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
	// probe sees the controller's writes: probeWrites, or a stand-in in
	// the aims' tests.
	probe func(ctx context.Context, env *Env, spec Spec) (probed, func(), error)
	// lateErr: a teardown stuck after its case's outcome was told (guarded
	// by mu).
	lateErr error
	// shrinking is the property being shrunk, once the shrink began;
	// shrinkStats count its cases (both guarded by mu).
	shrinking   string
	shrinkStats ShrinkStats

	// slots hold Parallel tokens, one per case running, across the calls
	// of firstFailing; cases counts them until their teardown ended.
	slotsOnce sync.Once
	slots     chan struct{}
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
	rep, err := s.runCase(ctx, s.env, s.spec, plan, func(rep *Report) {
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
	if rep.Teardown.stuck != "" {
		// Its goroutines may go on; the search stops here, and the cases
		// beside it finish.
		tell(nil, fmt.Errorf("the harness failed: case %s (plan %s): %s", rep.Namespace, faults.FormatPlan(plan), rep.Teardown.stuck))
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
			if i < 0 {
				break
			}
			started[i] = true
			plan := plans.at(i)
			if rep := s.failedBefore(plan, property); rep != nil {
				take(result{i, rep, nil})
				continue
			}
			if s.ran(plan, attempts) {
				s.skipped(plan)
				continue
			}
			ctx, cancel := context.WithCancel(context.Background())
			running[i] = cancel
			s.startCase(func() {
				s.run(ctx, plan, func(rep *Report, err error) { results <- result{i, rep, err} })
			})
		}
		// The answer is in once no plan before the best is running (with
		// firstJudged, once there is a best) and none is left to draw:
		// the cases left are cut short. After a harness failure the cases
		// running finish.
		waiting := drawn != nil && open() && lowest < len(started)
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
	s.slotsOnce.Do(func() { s.slots = make(chan struct{}, s.opts.Parallel) })
	s.slots <- struct{}{}
	s.cases.Add(1)
	go func() {
		defer s.cases.Done()
		defer func() { <-s.slots }()
		run()
	}()
}

// wait returns once every case started has ended, teardown included.
func (s *searcher) wait() { s.cases.Wait() }

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

// reproduceReplays is how many times asOften replays a plan.
const reproduceReplays = 3

// fewerToWalkBack is how many replays fewer than the plan drawn's a kept
// plan must reproduce in to be given up: a plan that failed in 2 replays
// of 3 and one that failed in 3 of 3 cannot be told apart by so few (and
// the kept one failed twice more, in its candidate run and its confirming
// run), but 1 of 3 against 3 of 3 says the step dropped made the bug's
// timing likely.
const fewerToWalkBack = 2

// asOften returns the last of the plans kept (confirmed, each smaller than
// the one before, from the plan drawn) that reproduces property at least
// as often as the plan drawn, over reproduceReplays replays of each (to
// within one replay: fewerToWalkBack), and
// when it was found: a step dropped may have been what made the bug's
// timing likely, so that the smaller plan fails less reliably, and a
// scenario is worth what it reproduces. The plan drawn is replayed only
// when the shrunk one fell short in a replay (else none can reproduce more
// often); then the plans between, the last first, while they fall short
// of it (a plan that reproduced in no replay falls short of one that did
// in any); the plan drawn is the answer when every one does.
func (s *searcher) asOften(kept []*keptPlan, property string) (*Report, time.Time) {
	last := len(kept) - 1
	if last == 0 {
		return kept[0].rep, time.Time{}
	}
	shrunk := s.reproductions(kept[last].rep.Plan, property)
	s.mu.Lock()
	s.shrinkStats.Replays, s.shrinkStats.Reproduced, s.shrinkStats.DrawnReproduced = reproduceReplays, shrunk, -1
	s.mu.Unlock()
	if shrunk == reproduceReplays {
		return kept[last].rep, kept[last].at
	}
	drawn := s.reproductions(kept[0].rep.Plan, property)
	s.mu.Lock()
	s.shrinkStats.DrawnReproduced = drawn
	s.mu.Unlock()
	for last > 0 && (shrunk <= drawn-fewerToWalkBack || shrunk == 0 && drawn > 0) {
		last--
		shrunk = drawn
		if last > 0 {
			shrunk = s.reproductions(kept[last].rep.Plan, property)
		}
		s.mu.Lock()
		s.shrinkStats.WalkedBack++
		s.shrinkStats.Reproduced = shrunk
		s.mu.Unlock()
	}
	return kept[last].rep, kept[last].at
}

// reproductions replays plan reproduceReplays times, all at once (slots of
// Parallel allowing), and counts the replays that failed property. A
// replay the harness failed does not count.
func (s *searcher) reproductions(plan []faults.Step, property string) int {
	var failed atomic.Int32
	var g sync.WaitGroup
	for range reproduceReplays {
		g.Add(1)
		s.startCase(func() {
			s.run(context.Background(), plan, func(rep *Report, err error) {
				if failedAs(rep, err, property) {
					failed.Add(1)
				}
				g.Done()
			})
		})
	}
	g.Wait()
	return int(failed.Load())
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
	drops = append(drops, faults.MergedScaleChanges(rep.Plan, s.spec.fixtureObjects())...)
	var simpler [][]faults.Step
	for i := range rep.Plan {
		for _, st := range faults.Simpler(rep.Plan[i]) {
			plan := slices.Clone(rep.Plan)
			plan[i] = st
			simpler = append(simpler, plan)
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

// TB is what Check needs of a test: *testing.T, or rapid's TB.
type TB = rapid.TB
