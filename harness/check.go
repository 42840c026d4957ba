package harness

import (
	"context"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness/scenario"
)

var replayFlag = flag.String("kubeprop.replay", os.Getenv("KUBEPROP_REPLAY"),
	"kubeprop: replay this scenario file instead of drawing plans (env KUBEPROP_REPLAY)")

// ScenarioDir is where Check saves the scenarios of failures, under the
// test's name.
const ScenarioDir = "testdata/kubeprop"

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

// ReplayDir replays every scenario file (*.yaml, but the events and
// objects saved beside one) under dir, recursively, each as a subtest
// named by its path under dir. Give it the folder of this spec's scenarios
// (testdata/kubeprop/TestConformance), or all of testdata/kubeprop when
// every test there shares the spec. A folder that does not exist holds no
// scenarios.
func ReplayDir(t *testing.T, env *Env, spec Spec, dir string) {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && path == dir {
			return filepath.SkipDir
		}
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".yaml") && !scenario.IsEvidence(path) {
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
	s, plan, err := scenario.ReadPlan(file, spec.known())
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
	case scenario.Pass:
		for _, f := range rep.Failures {
			t.Errorf("kubeprop: %s (replaying %s, which expects every property to hold)\n    timeline:%s", f.Message, file, timeline)
		}
	case scenario.Fail:
		for _, f := range rep.Failures {
			if f.Property == s.Expect.Property {
				t.Logf("kubeprop: %s reproduced (%s): %s", file, rep.Times, f.Message)
				return
			}
		}
		t.Errorf("kubeprop: replaying %s, property %s held, but the scenario expects it to fail; if the bug is fixed, set expect.outcome to pass\n    timeline:%s",
			file, s.Expect.Property, timeline)
	}
}
