package harness

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/kubeprop/kubeprop/faults"
)

var replayFlag = flag.String("kubeprop.replay", os.Getenv("KUBEPROP_REPLAY"),
	"kubeprop: replay this scenario file instead of drawing plans (env KUBEPROP_REPLAY)")

// ScenarioDir is where Check saves the scenarios of failures, under the
// test's name.
const ScenarioDir = "testdata/kubeprop"

// Check draws fault plans with rapid and runs each on env; a property
// failure is shrunk to a minimal plan (rapid's passes, then steps dropped
// one at a time and values simplified, each within -rapid.shrinktime),
// printed with its timeline, saved as a scenario file and given a replay
// command. rapid's flags apply (-rapid.checks, -rapid.seed,
// -rapid.shrinktime, and their RAPID_* twins). With -kubeprop.replay=FILE
// it replays that scenario instead.
func Check(t TB, env *Env, spec Spec) {
	t.Helper()
	spec = spec.withDefaults()
	if err := spec.validate(); err != nil {
		t.Fatal(err)
	}
	if *replayFlag != "" {
		replay(t, env, spec, *replayFlag, true)
		return
	}
	checkWithRapid(t, env, spec)
}

func checkWithRapid(t TB, env *Env, spec Spec) {
	t.Helper()
	f, failed := search(t, env, spec, t.Name())
	if f != nil {
		t.Errorf("kubeprop: %s\n    plan (shrunk from %d to %d steps): %s\n    timeline:\n      %s\n    timeline: %s\n    scenario: %s\n    replay:   go test -run '%s' -kubeprop.replay=%s",
			f.Message, f.DrawnSteps, len(f.Plan), faults.FormatPlan(f.Plan),
			strings.Join(f.Report.Timeline, "\n      "), f.Page, f.Scenario, runPattern(t.Name()), f.Scenario)
	}
	if failed {
		t.FailNow()
	}
}

// Finding is a property failure found and shrunk by Check or Find.
type Finding struct {
	Property string
	Message  string // deterministic
	Detail   string
	// Plan is the shrunk plan; DrawnSteps the length of the plan that
	// failed first.
	Plan       []faults.Step
	DrawnSteps int
	// FoundAfter and ShrunkAfter are the times from the start of the
	// search to the first failure and to the last smaller one.
	FoundAfter, ShrunkAfter time.Duration
	// Scenario and Page are the files written: the scenario to replay and
	// the HTML timeline.
	Scenario, Page string
	Report         *Report
}

// search runs the rapid search under the test name, saving the scenario
// of a failure. failed is set when the search failed, with a finding or
// from a harness error reported to t.
func search(t TB, env *Env, spec Spec, name string) (finding *Finding, failed bool) {
	t.Helper()
	cfg := faults.Config{Nodes: spec.Nodes, Fixtures: len(spec.Fixtures("default"))}
	var first, last *Report
	var failedAt, lastAt time.Time
	start := time.Now()
	budget := shrinkTime()
	// rapid ends a failed check with FailNow; holding that back lets the
	// scenario be saved and reported first.
	rtb := &deferFailNow{TB: t}
	// From the first failure on, the outcome of every plan run, by plan:
	// its failures, nil for a pass. rapid's shrinker tries bit streams,
	// and many draw a plan already run; minimizing one block can try a
	// hundred of them between its deadline checks, and a case takes
	// seconds. A plan drawn again is answered from here. Only the failures
	// are kept, not the reports (a report holds its whole trace): last is
	// the one report kept, of the shortest failing plan, the latest run
	// among equals. A plan answered from here never replaces it: when it
	// ran, it was no shorter than last is now.
	var outcomes map[string][]Failure
	// outcome runs a plan, or answers it from outcomes; it returns the
	// first failure, nil for a pass.
	outcome := func(rt *rapid.T, plan []faults.Step) *Failure {
		key := faults.FormatPlan(plan)
		if failures, ok := outcomes[key]; ok {
			if len(failures) == 0 {
				return nil
			}
			return &failures[0]
		}
		// rapid checks its shrink deadline between passes, and a pass can
		// try dozens of plans. Past the budget, plans not run yet are
		// rejected without running.
		if first != nil && time.Since(failedAt) > budget {
			return nil
		}
		rep, err := runCase(env, spec, plan)
		if err != nil {
			rt.Fatalf("kubeprop: the harness failed: %v", err)
		}
		if rep == nil {
			if outcomes != nil {
				outcomes[key] = nil
			}
			return nil
		}
		if first == nil {
			first, failedAt = rep, time.Now()
			outcomes = map[string][]Failure{}
		}
		outcomes[key] = rep.Failures
		// rapid keeps a smaller plan only if it fails the same way.
		if rep.Failures[0].Property == first.Failures[0].Property && (last == nil || len(rep.Plan) <= len(last.Plan)) {
			if last == nil || len(rep.Plan) < len(last.Plan) {
				lastAt = time.Now()
			}
			last = rep
		}
		return &rep.Failures[0]
	}
	rapid.Check(rtb, func(rt *rapid.T) {
		plan := faults.Plan(spec.Faults, cfg, spec.MaxSteps).Draw(rt, "plan")
		// One call site, whether the plan ran or was answered: rapid tells
		// failures apart by their traceback.
		if f := outcome(rt, plan); f != nil {
			failFrom(rt, *f)
		}
	})
	if !rtb.Failed() || last == nil {
		return nil, rtb.Failed()
	}
	// rapid's shrink passes spend cases on values as much as on steps, and
	// a case takes seconds: a second budget goes to dropping steps one at
	// a time and simplifying values, while the plan still fails the same
	// way.
	if smaller, at := shrinkPlan(env, spec, last, outcomes, time.Now().Add(budget)); smaller != last {
		last, lastAt = smaller, at
	}
	f := last.Failures[0]
	finding = &Finding{Property: f.Property, Message: f.Message, Detail: f.Detail, Plan: last.Plan, DrawnSteps: len(first.Plan),
		FoundAfter: failedAt.Sub(start), ShrunkAfter: lastAt.Sub(start), Report: last}
	finding.Scenario = filepath.Join(ScenarioDir, name, fmt.Sprintf("%s-%d.yaml", f.Property, len(last.Plan)))
	scenario := Scenario{Version: ScenarioVersion, Test: name,
		Expect: Expect{Outcome: OutcomeFail, Property: f.Property, Message: f.Message}}
	for _, s := range last.Plan {
		m, err := faults.EncodeStep(s)
		if err != nil {
			t.Errorf("kubeprop: %v", err)
			return finding, true
		}
		scenario.Plan = append(scenario.Plan, m)
	}
	if err := writeScenario(finding.Scenario, scenario); err != nil {
		t.Errorf("kubeprop: %v", err)
	}
	finding.Page = strings.TrimSuffix(finding.Scenario, ".yaml") + ".html"
	if err := last.writeHTML(finding.Page, name+": "+f.Property); err != nil {
		t.Errorf("kubeprop: %v", err)
	}
	return finding, true
}

// runCase runs one plan of a search and shows it to Spec.OnCase; it
// returns the report of a failure, nil for a pass.
func runCase(env *Env, spec Spec, plan []faults.Step) (*Report, error) {
	rep, err := Run(context.Background(), env, spec, plan)
	if err != nil {
		return nil, err
	}
	if spec.OnCase != nil {
		spec.OnCase(rep)
	}
	if !rep.Failed() {
		return nil, nil
	}
	return rep, nil
}

// shrinkPlan shrinks a failing case's plan beyond rapid's passes, keeping
// each change after which the same property still fails: it drops steps
// one at a time, then tries each step's simpler forms (faults.Simpler),
// and drops again after a simpler value, until nothing changes or the
// deadline passes. Plans in outcomes are not run again; the new ones are
// added. It returns the smallest failing report and when it was found.
// A plan in outcomes is no candidate: had it failed the same way, it
// would be rep (see search).
func shrinkPlan(env *Env, spec Spec, rep *Report, outcomes map[string][]Failure, deadline time.Time) (*Report, time.Time) {
	at := time.Time{}
	property := rep.Failures[0].Property
	fails := func(plan []faults.Step) bool {
		key := faults.FormatPlan(plan)
		if _, known := outcomes[key]; known || !time.Now().Before(deadline) {
			return false
		}
		smaller, err := runCase(env, spec, plan)
		if err != nil {
			return false
		}
		outcomes[key] = nil
		if smaller == nil {
			return false
		}
		outcomes[key] = smaller.Failures
		if smaller.Failures[0].Property == property {
			rep, at = smaller, time.Now()
			return true
		}
		return false
	}
	for {
		for i := 0; i < len(rep.Plan) && len(rep.Plan) > 1; {
			if fails(slices.Delete(slices.Clone(rep.Plan), i, i+1)) {
				continue // the same index is now the next step
			}
			i++
		}
		// A simpler value can make another step unneeded: drop again
		// after one, and only then.
		simplified := false
		for i := range rep.Plan {
			for _, simpler := range faults.Simpler(rep.Plan[i]) {
				plan := slices.Clone(rep.Plan)
				plan[i] = simpler
				if fails(plan) {
					simplified = true
					break
				}
			}
		}
		if !simplified || !time.Now().Before(deadline) {
			break
		}
	}
	if at.IsZero() {
		at = time.Now()
	}
	return rep, at
}

// Find is Check outside a test: it draws plans, shrinks the first failure
// and saves its scenario under ScenarioDir/name, and returns it; nil when
// every plan passed. The -rapid.* flags apply as in Check. The error is
// for bad input and the harness's own failures.
func Find(env *Env, spec Spec, name string) (*Finding, error) {
	spec = spec.withDefaults()
	if err := spec.validate(); err != nil {
		return nil, err
	}
	if !testing.Testing() {
		testingInit.Do(testing.Init) // rapid reads testing.Short
		if !flag.Parsed() {
			_ = flag.CommandLine.Parse(nil) // a program with flags of its own
		}
	}
	tb := &headlessTB{name: name}
	var f *Finding
	var failed bool
	done := make(chan struct{})
	go func() { // a Goexit from rapid ends this goroutine only
		defer close(done)
		f, failed = search(tb, env, spec, name)
	}()
	<-done
	if failed && f == nil {
		return nil, fmt.Errorf("the search of %s failed: %s", name, strings.Join(tb.errors, "; "))
	}
	return f, nil
}

var testingInit sync.Once

// headlessTB is the TB of Find: it keeps errors instead of failing a test.
type headlessTB struct {
	name   string
	errors []string
	failed bool
}

func (h *headlessTB) Helper()                           {}
func (h *headlessTB) Name() string                      { return h.name }
func (h *headlessTB) Logf(string, ...any)               {}
func (h *headlessTB) Log(...any)                        {}
func (h *headlessTB) Skipf(format string, args ...any)  { h.Errorf(format, args...) }
func (h *headlessTB) Skip(args ...any)                  { h.Error(args...) }
func (h *headlessTB) SkipNow()                          { h.Fail() }
func (h *headlessTB) Errorf(format string, args ...any) { h.Error(fmt.Sprintf(format, args...)) }
func (h *headlessTB) Error(args ...any) {
	h.errors = append(h.errors, strings.TrimSpace(fmt.Sprintln(args...)))
	h.failed = true
}
func (h *headlessTB) Fatalf(format string, args ...any) { h.Errorf(format, args...) }
func (h *headlessTB) Fatal(args ...any)                 { h.Error(args...) }
func (h *headlessTB) FailNow()                          { h.failed = true }
func (h *headlessTB) Fail()                             { h.failed = true }
func (h *headlessTB) Failed() bool                      { return h.failed }

// TB is what Check needs of a test: *testing.T, or rapid's TB.
type TB = rapid.TB

// shrinkTime is rapid's -rapid.shrinktime.
func shrinkTime() time.Duration {
	if f := flag.Lookup("rapid.shrinktime"); f != nil {
		if d, err := time.ParseDuration(f.Value.String()); err == nil {
			return d
		}
	}
	return 30 * time.Second
}

// deferFailNow is a TB whose FailNow marks the test failed and returns.
type deferFailNow struct {
	TB
	failed bool
}

func (d *deferFailNow) FailNow()     { d.failed = true }
func (d *deferFailNow) Failed() bool { return d.failed || d.TB.Failed() }
func (d *deferFailNow) Fatalf(format string, args ...any) {
	d.TB.Errorf(format, args...)
	d.failed = true
}
func (d *deferFailNow) Fatal(args ...any) {
	d.TB.Error(args...)
	d.failed = true
}

// failFrom fails the rapid case from a frame of the failing property's
// own, by its index in the Spec: rapid tells failures apart by where they
// come from, so that while it shrinks it keeps to the same property.
func failFrom(rt *rapid.T, f Failure) {
	switch f.index % 8 {
	case 0:
		rt.Fatalf("kubeprop: %s", f.Message)
	case 1:
		rt.Fatalf("kubeprop: %s", f.Message)
	case 2:
		rt.Fatalf("kubeprop: %s", f.Message)
	case 3:
		rt.Fatalf("kubeprop: %s", f.Message)
	case 4:
		rt.Fatalf("kubeprop: %s", f.Message)
	case 5:
		rt.Fatalf("kubeprop: %s", f.Message)
	case 6:
		rt.Fatalf("kubeprop: %s", f.Message)
	default:
		rt.Fatalf("kubeprop: %s", f.Message)
	}
}

// Replay runs the plan of a scenario file and checks what it expects: a
// failure of the named property, or every property holding.
func Replay(t TB, env *Env, spec Spec, file string) {
	t.Helper()
	spec = spec.withDefaults()
	if err := spec.validate(); err != nil {
		t.Fatal(err)
	}
	replay(t, env, spec, file, false)
}

// ReplayDir replays every scenario file (*.yaml) under dir, recursively,
// each as a subtest named by its path under dir. Give it the folder of
// this spec's scenarios (testdata/kubeprop/TestConformance), or all of
// testdata/kubeprop when every test there shares the spec. A folder that
// does not exist holds no scenarios.
func ReplayDir(t *testing.T, env *Env, spec Spec, dir string) {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && path == dir {
			return filepath.SkipDir
		}
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".yaml") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatalf("kubeprop: reading scenarios under %s: %v", dir, err)
	}
	for _, f := range files {
		rel, _ := filepath.Rel(dir, f)
		t.Run(strings.TrimSuffix(rel, ".yaml"), func(t *testing.T) { Replay(t, env, spec, f) })
	}
}

// replay runs a scenario. show makes every property failure fail the test
// (the replay command: the user wants to see the failure); otherwise the
// scenario's expectation is checked.
func replay(t TB, env *Env, spec Spec, file string, show bool) {
	t.Helper()
	s, plan, err := readScenario(file, spec.known())
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), env, spec, plan)
	if err != nil {
		t.Fatalf("kubeprop: the harness failed replaying %s: %v", file, err)
	}
	timeline := "\n      " + strings.Join(rep.Timeline, "\n      ")
	if show {
		for _, f := range rep.Failures {
			t.Errorf("kubeprop: %s", f.Message)
		}
		t.Logf("replayed %s: %s\n    timeline:%s", file, faults.FormatPlan(plan), timeline)
		return
	}
	switch s.Expect.Outcome {
	case OutcomePass:
		for _, f := range rep.Failures {
			t.Errorf("kubeprop: %s (replaying %s, which expects every property to hold)\n    timeline:%s", f.Message, file, timeline)
		}
	case OutcomeFail:
		for _, f := range rep.Failures {
			if f.Property == s.Expect.Property {
				t.Logf("kubeprop: %s reproduced: %s", file, f.Message)
				return
			}
		}
		t.Errorf("kubeprop: replaying %s, property %s held, but the scenario expects it to fail; if the bug is fixed, set expect.outcome to pass\n    timeline:%s",
			file, s.Expect.Property, timeline)
	}
}
