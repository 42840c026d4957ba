package harness

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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
// failure is shrunk to a minimal plan, printed with its timeline, saved as
// a scenario file and given a replay command. rapid's flags apply
// (-rapid.checks, -rapid.seed, -rapid.shrinktime, and their RAPID_*
// twins). With -kubeprop.replay=FILE it replays that scenario instead.
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
	cfg := faults.Config{Nodes: spec.Nodes, Fixtures: len(spec.Fixtures("default"))}
	var first, last *Report
	var failedAt time.Time
	budget := shrinkTime()
	// rapid ends a failed check with FailNow; holding that back lets the
	// scenario be saved and reported first.
	rtb := &deferFailNow{TB: t}
	rapid.Check(rtb, func(rt *rapid.T) {
		plan := faults.Plan(spec.Faults, cfg, spec.MaxSteps).Draw(rt, "plan")
		// rapid checks its shrink deadline between passes, and a pass can
		// try dozens of plans of seconds each. Past the budget, plans other
		// than the smallest failing one are rejected without running.
		if last != nil && time.Since(failedAt) > budget && faults.FormatPlan(plan) != faults.FormatPlan(last.Plan) {
			return
		}
		rep, err := Run(context.Background(), env, spec, plan)
		if err != nil {
			rt.Fatalf("kubeprop: the harness failed: %v", err)
		}
		if !rep.Failed() {
			return
		}
		if first == nil {
			first, failedAt = rep, time.Now()
		}
		// rapid keeps a smaller plan only if it fails the same way.
		if rep.Failures[0].Property == first.Failures[0].Property {
			last = rep
		}
		failFrom(rt, rep.Failures[0])
	})
	if !rtb.Failed() {
		return
	}
	defer t.FailNow()
	if last == nil {
		return
	}
	f := last.Failures[0]
	path := filepath.Join(ScenarioDir, t.Name(), fmt.Sprintf("%s-%d.yaml", f.Property, len(last.Plan)))
	scenario := Scenario{Version: ScenarioVersion, Test: t.Name(),
		Expect: Expect{Outcome: OutcomeFail, Property: f.Property, Message: f.Message}}
	for _, s := range last.Plan {
		m, err := faults.EncodeStep(s)
		if err != nil {
			t.Errorf("kubeprop: %v", err)
			return
		}
		scenario.Plan = append(scenario.Plan, m)
	}
	if err := writeScenario(path, scenario); err != nil {
		t.Errorf("kubeprop: %v", err)
	}
	page := strings.TrimSuffix(path, ".yaml") + ".html"
	if err := last.writeHTML(page, t.Name()+": "+f.Property); err != nil {
		t.Errorf("kubeprop: %v", err)
	}
	t.Errorf("kubeprop: %s\n    plan (shrunk from %d to %d steps): %s\n    timeline:\n      %s\n    timeline: %s\n    scenario: %s\n    replay:   go test -run '%s$' -kubeprop.replay=%s",
		f.Message, len(first.Plan), len(last.Plan), faults.FormatPlan(last.Plan),
		strings.Join(last.Timeline, "\n      "), page, path, topTest(t.Name()), path)
}

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
