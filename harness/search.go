package harness

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
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
// aim.go, plans.go). The failure shrunk is the first failing case judged: at
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

// Check draws fault plans and runs each on env; a property failure is
// shrunk to a minimal plan, printed with its timeline, saved as a scenario
// file and given a replay command. It searches with the flags
// -kubeprop.checks, -kubeprop.seed, -kubeprop.shrinktime and
// -kubeprop.parallel (and -kubeprop.shard), and their KUBEPROP_* twins
// (SearchOptionsFromFlags); CheckWith takes the options as a value. With
// -kubeprop.replay=FILE it replays that scenario instead; with
// -kubeprop.list it logs the plans it would run (ListPlans), and runs none.
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
	if listing() {
		list, err := ListPlans(spec, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("kubeprop: -kubeprop.list: the plans of %s (none is run):\n%s", t.Name(), list)
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

// Find draws plans, shrinks the first failure, saves its scenario under
// opts.Dir, and returns it; nil when every plan passed. The error is for
// bad input and the harness's own failures.
func Find(env *Env, spec Spec, name string, opts SearchOptions) (*Finding, error) {
	s, err := newSearcher(env, spec, name, opts)
	if err != nil {
		return nil, err
	}
	opts = s.opts
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

// SearchPlans are the plans a search with opts draws (Find, Check), in
// order, without running them: opts.Checks of them from opts.Seed, half
// drawn at random and half aimed at the controller, which takes the
// search's probe (a case run in env, with no fault) once. ctx ends the
// probe; without one, every plan is drawn at random or aimed at
// everything. For a run of many cases that keeps going after a failure
// (the soak) that draws as the search does.
func SearchPlans(ctx context.Context, env *Env, spec Spec, opts SearchOptions) ([][]faults.Step, error) {
	s, err := newSearcher(env, spec, "", opts)
	if err != nil {
		return nil, err
	}
	ps := s.plans(ctx)
	<-ps.drawn
	s.wait()
	return ps.plans, nil
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

// TB is what Check needs of a test: *testing.T, or rapid's TB.
type TB = rapid.TB
