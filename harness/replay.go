package harness

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness/internal/lifecycle"
	"github.com/kubeprop/kubeprop/harness/internal/search"
	"github.com/kubeprop/kubeprop/harness/scenario"
)

// Replay runs the plan of a scenario file (-kubeprop.replay.count times,
// -kubeprop.parallel at a time) and checks what it expects: a failure of
// the named property (in every replay, or in the share expect.rate
// states), or every property holding. With -kubeprop.update, a replay
// that does not see that rewrites the file's expectation to what it saw
// (after a deliberate change: a bug fixed, a property renamed) and logs
// the change, instead of failing.
func Replay(t TB, env *Env, spec Spec, file string) {
	t.Helper()
	if _, err := SearchOptionsFromFlags(); err != nil {
		t.Fatal(err)
	}
	spec, err := lifecycle.Checked(spec)
	if err != nil {
		t.Fatal(err)
	}
	replay(t, env, spec, file, false, *replayCountFlag)
}

// ReplayDir replays every scenario file (*.yaml, but the events and
// objects saved beside one) under dir, recursively, each as a subtest
// named by its path under dir. Give it the folder of this spec's scenarios
// (testdata/kubeprop/TestConformance), or all of testdata/kubeprop when
// every test there shares the spec. A folder that does not exist holds no
// scenarios. A *testing.T runs each as a subtest; another testing.TB (a
// benchmark's) replays them one after another in t itself.
func ReplayDir(t testing.TB, env *Env, spec Spec, dir string) {
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
		if sub, ok := t.(interface {
			Run(string, func(*testing.T)) bool
		}); ok {
			sub.Run(strings.TrimSuffix(rel, ".yaml"), func(t *testing.T) { Replay(t, env, spec, f) })
			continue
		}
		Replay(t, env, spec, f)
	}
}

// replay runs a scenario count times. show makes every property failure
// fail the test (the replay command: the user wants to see the failure);
// otherwise the scenario's expectation is checked: every
// replay passes, or enough of them reproduce the failure (expect.rate).
func replay(t TB, env *Env, spec Spec, file string, show bool, count int) {
	t.Helper()
	s, plan, err := scenario.ReadPlan(file, lifecycle.KnownFaults(spec))
	if err != nil {
		t.Fatal(err)
	}
	if count < 1 {
		t.Fatalf("kubeprop: -kubeprop.replay.count is %d: give how many times to replay each scenario, 1 or more", count)
	}
	opts, err := SearchOptionsFromFlags()
	if err != nil {
		t.Fatal(err)
	}
	reps, err := Repeat(context.Background(), env, spec, plan, RepeatOptions{Count: count, Parallel: opts.Parallel})
	if err != nil {
		t.Fatalf("kubeprop: the harness failed replaying %s: %v", file, err)
	}
	n := len(reps)
	of := func(i int) string {
		if n == 1 {
			return ""
		}
		return fmt.Sprintf(" (replay %d of %d)", i+1, n)
	}
	timeline := func(rep *Report) string { return "\n      " + strings.Join(rep.Timeline, "\n      ") }
	if show {
		for i, rep := range reps {
			for _, f := range rep.Failures {
				t.Errorf("kubeprop: %s%s", f.Message, of(i))
			}
		}
		if n > 1 {
			t.Logf("kubeprop: %s failed in %d of %d replays", file, reps.Failing(""), n)
		}
		t.Logf("replayed %s: %s\n    timeline:%s", file, faults.FormatPlan(plan), timeline(reps[0]))
		return
	}
	if *updateFlag {
		was, now, updated, err := UpdateScenario(file, reps)
		if err != nil {
			t.Fatalf("kubeprop: -kubeprop.update: %v", err)
		}
		if updated {
			t.Logf("kubeprop: -kubeprop.update rewrote %s: it expected %s, its replays saw %s", file, was, now)
			return
		}
	}
	switch s.Expect.Outcome {
	case scenario.Pass:
		for i, rep := range reps {
			for _, f := range rep.Failures {
				t.Errorf("kubeprop: %s (replaying %s%s, which expects every property to hold)\n    timeline:%s%s", f.Message, file, of(i), timeline(rep), replayEvidence(artifactDir(t), file, rep))
			}
		}
		if n > 1 {
			t.Logf("kubeprop: %s passed %d of %d", file, n-reps.Failing(""), n)
		}
		for i, rep := range reps {
			for _, f := range rep.NotJudged {
				t.Logf("kubeprop: %s held for want of a judgement (replaying %s%s): %s", f.Property, file, of(i), f.Message)
			}
		}
	case scenario.Fail:
		reproduced, need := reps.Failing(s.Expect.Property), s.Expect.Needed(n)
		missed := slices.IndexFunc(reps, func(rep *Report) bool { return !rep.FailedOn(s.Expect.Property) })
		switch {
		case reproduced >= need:
			t.Logf("kubeprop: %s reproduced %d of %d (%s)", file, reproduced, n, reps[0].Times)
		case reproduced == 0:
			t.Errorf("kubeprop: replaying %s, property %s held%s, but the scenario expects it to fail; if the bug is fixed, set expect.outcome to pass (or replay with -kubeprop.update)\n    timeline:%s%s",
				file, s.Expect.Property, inAll(n), timeline(reps[missed]), replayEvidence(artifactDir(t), file, reps[missed]))
		default:
			t.Errorf("kubeprop: replaying %s, property %s failed in %d of %d replays (%.2f), and the scenario expects at least %d (expect.rate %v); a plan that reproduces less often than it did needs its rate lowered (-kubeprop.update), or a look at what it now depends on\n    timeline of a replay that passed:%s%s",
				file, s.Expect.Property, reproduced, n, float64(reproduced)/float64(n), need, s.Expect.Share(), timeline(reps[missed]), replayEvidence(artifactDir(t), file, reps[missed]))
		}
	}
}

// artifactDir is the test's folder for what it keeps (testing.T's
// ArtifactDir) when go test was given -artifacts; empty otherwise, or
// when t has none (a plain rapid.TB).
func artifactDir(t TB) string {
	a, ok := t.(interface{ ArtifactDir() string })
	if f := flag.Lookup("test.artifacts"); !ok || f == nil || f.Value.String() != "true" {
		return ""
	}
	return a.ArtifactDir()
}

// replayEvidence saves the log, events and objects of a replay that did
// not do what its scenario expects in dir, named after the scenario (the
// files beside it are another run's), and returns the lines that say
// where; with no dir, the line says how to keep them. What the replay
// did differently is what a maintainer asks first.
func replayEvidence(dir, file string, rep *Report) string {
	if dir == "" {
		return "\n    (go test -artifacts keeps this replay's log, events and objects)"
	}
	path := filepath.Join(dir, filepath.Base(file))
	if err := rep.SaveEvidence(path); err != nil {
		return fmt.Sprintf("\n    (this replay's log, events and objects not saved: %v)", err)
	}
	log, events, objects := scenario.Evidence(path)
	return fmt.Sprintf("\n    this replay's log: %s\n    its events:        %s\n    its objects:       %s", log, events, objects)
}

// expectationOf is what the replays reps saw, as a scenario expects it:
// every property held, or a property failed, in all or in a share of
// them. Of several properties failing, the one expected stays when it
// failed in any replay; else the one that failed in the most.
func expectationOf(reps Replays, expected scenario.Expect) scenario.Expect {
	if reps.Failing("") == 0 {
		return scenario.Expect{Outcome: scenario.Pass}
	}
	property := expected.Property
	if reps.Failing(property) == 0 || expected.Outcome != scenario.Fail {
		counts := map[string]int{}
		for _, rep := range reps {
			for _, f := range rep.Failures {
				counts[f.Property]++
			}
		}
		property = ""
		for _, name := range slices.Sorted(maps.Keys(counts)) {
			if property == "" || counts[name] > counts[property] {
				property = name
			}
		}
	}
	out := scenario.Expect{Outcome: scenario.Fail, Property: property}
	for _, rep := range reps {
		if i := slices.IndexFunc(rep.Failures, func(f Failure) bool { return f.Property == property }); i >= 0 {
			out.Message = rep.Failures[i].Message
			break
		}
	}
	if k, n := reps.Failing(property), len(reps); k < n {
		out.Rate = search.Rate(k, n)
	}
	return out
}

// UpdateScenario rewrites the expectation of the scenario file to what
// its replays reps saw, when that is not what it expects: after a
// deliberate change (a bug fixed, a property renamed), as
// -kubeprop.update and kubeprop replay -update do, like etcd's -rewrite.
// The notes written in the file stay. It returns what the file expected
// and what it expects now; updated is false, and the file untouched, when
// the replays saw what it expects.
func UpdateScenario(file string, reps Replays) (was, now scenario.Expect, updated bool, _ error) {
	s, err := scenario.Read(file)
	if err != nil {
		return was, now, false, err
	}
	if meets(reps, s.Expect) {
		return s.Expect, s.Expect, false, nil
	}
	was, s.Expect = s.Expect, expectationOf(reps, s.Expect)
	return was, s.Expect, true, s.Rewrite(file)
}

// meets is whether reps see what expected expects, as a replay judges.
func meets(r Replays, expected scenario.Expect) bool {
	if expected.Outcome == scenario.Pass {
		return r.Failing("") == 0
	}
	return r.Failing(expected.Property) >= expected.Needed(len(r))
}

func inAll(n int) string {
	if n == 1 {
		return ""
	}
	return fmt.Sprintf(" in all %d replays", n)
}
