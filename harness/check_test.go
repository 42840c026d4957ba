package harness_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness"
	"github.com/kubeprop/kubeprop/harness/scenario"
	"github.com/kubeprop/kubeprop/properties"
)

func widgetSpec(churn bool) harness.Spec {
	return harness.Spec{
		Controller: harness.Manager(func(mgr manager.Manager, opts controller.Options) error {
			return (&widgetReconciler{churn: churn}).setup(mgr, opts)
		}),
		Fixtures: func(ns string) []client.Object { return []client.Object{newWidget(ns, "web", 3)} },
		Properties: []properties.Property{
			properties.Converges("widget-ready", widgetReady, properties.ConvergeOptions{Within: 30 * time.Second}),
			properties.BoundedBackoff(properties.BackoffOptions{}),
			properties.NoFightLoop(properties.FightOptions{}),
			properties.Quiescent(properties.QuiesceOptions{Window: time.Second, Within: 5 * time.Second}),
			properties.NoPanics(),
		},
	}
}

// TestRunCorrectController runs one plan with every kind of step on a
// correct controller: every property holds, and the trace saw the actors.
func TestRunCorrectController(t *testing.T) {
	t.Parallel()
	plan := []faults.Step{
		faults.NodeLossStep{Node: 0},
		faults.ContainerKillStep{Pod: 1, ExitCode: 137},
		faults.ScaleChangeStep{Object: 0, Field: "spec.replicas", Value: 4},
		faults.ChildDeleteStep{Child: 0},
		faults.ControllerRestartStep{},
		faults.NodeRecoverStep{Node: 0},
		faults.ConflictingWriterStep{Object: 0, Field: "spec.replicas", Value: 2, Rounds: 2},
		faults.CrashLoopStep{Pod: 0, Starts: 3, ExitCode: 1},
		faults.ReadinessFlapStep{Pod: 1},
		faults.UserChangeStep{Name: "LabelChange", Object: 0, Patch: `{"metadata":{"labels":{"tier":"gold"}}}`},
	}
	rep, err := harness.Run(context.Background(), env, widgetSpec(false), plan)
	require.NoError(t, err)
	require.False(t, rep.Failed(), "failures: %+v\ntimeline:\n%s", rep.Failures, strings.Join(rep.Timeline, "\n"))
	managers := map[string]bool{}
	for _, w := range rep.Trace.Writes {
		managers[w.Manager] = true
	}
	for _, m := range []string{"kubelet", harness.ManagerUser, faults.ConflictingWriterManager} {
		require.True(t, managers[m], "no write by %s in %v", m, managers)
	}
	require.True(t, slices.ContainsFunc(rep.Trace.Writes, func(w properties.Write) bool {
		return w.Manager == harness.ManagerUser && w.Field == "metadata.labels.tier" && w.Value == `"gold"`
	}), "the user change was applied")
	require.NotEmpty(t, rep.Trace.Reconciles, "the recording queue saw no reconcile")
	require.NotEmpty(t, rep.Trace.Requests, "the audit log gave no request")
	t.Logf("timeline:\n%s", strings.Join(rep.Timeline, "\n"))
}

// TestFightNamesItsWriters: a controller that removes, on every
// reconcile, a label another writer keeps setting fails no-fight-loop, and
// the failure names both writers. The controller's removals change none of
// its own fields, so managedFields do not name it: the audit log does.
// The fight is a failure more trace cannot change: the case ends with it,
// and the step after it is not run.
func TestFightNamesItsWriters(t *testing.T) {
	t.Parallel()
	spec := widgetSpec(false)
	spec.Controller = harness.Manager(func(mgr manager.Manager, opts controller.Options) error {
		return (&widgetReconciler{stripLabel: "team"}).setup(mgr, opts)
	})
	plan := []faults.Step{
		faults.ConflictingWriterStep{Selector: "widget=web", Field: "metadata.labels[team]", Text: "a", Rounds: 5},
		faults.ScaleChangeStep{Object: 0, Field: "spec.replicas", Value: 5},
	}
	rep, err := harness.Run(context.Background(), env, spec, plan)
	require.NoError(t, err)
	timeline := strings.Join(rep.Timeline, "\n")
	require.Equal(t, []int{1}, rep.Unrun, "timeline:\n%s", timeline)
	require.Len(t, rep.Times.Steps, 1)
	var fight string
	for _, f := range rep.Failures {
		if f.Property == "no-fight-loop" {
			fight = f.Message
		}
	}
	require.NotEmpty(t, fight, "no fight found; failures %+v\ntimeline:\n%s", rep.Failures, timeline)
	// The controller's manager: the writer of the pods it created.
	var controllerManager string
	for _, w := range rep.Trace.Writes {
		if w.Kind == "Pod" && w.Field == "spec.containers[name=app].image" {
			controllerManager = w.Manager
		}
	}
	require.NotEmpty(t, controllerManager)
	removals := 0
	for _, w := range rep.Trace.Writes {
		if w.Kind == "Pod" && w.Field == "metadata.labels.team" && w.Value == "" {
			removals++
			require.Equal(t, controllerManager, w.Manager, "a removal of the label at %v", w.At)
		}
	}
	require.GreaterOrEqual(t, removals, 3, "timeline:\n%s", timeline)
	require.Contains(t, fight, controllerManager)
	require.Contains(t, fight, faults.ConflictingWriterManager)
	require.NotContains(t, fight, properties.ManagerUnknown)
	t.Log(fight)
}

// TestCheckCorrectController draws plans (-kubeprop.checks of them) for a
// correct controller: none may fail.
func TestCheckCorrectController(t *testing.T) {
	t.Parallel()
	harness.Check(t, env, widgetSpec(false))
}

// failureRecorder is a rapid.TB that keeps the failures of a check that
// is meant to fail, instead of failing the test, and what it logs.
type failureRecorder struct {
	*testing.T
	mu     sync.Mutex
	failed bool
	msgs   []string
}

func (f *failureRecorder) record(msg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = true
	f.msgs = append(f.msgs, msg)
}
func (f *failureRecorder) Logf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.msgs = append(f.msgs, sprintf(format, args...))
}
func (f *failureRecorder) Errorf(format string, args ...any) { f.record(sprintf(format, args...)) }
func (f *failureRecorder) Error(args ...any)                 { f.record(sprint(args...)) }
func (f *failureRecorder) Fatalf(format string, args ...any) {
	f.record(sprintf(format, args...))
	runtime.Goexit()
}
func (f *failureRecorder) Fatal(args ...any) { f.record(sprint(args...)); runtime.Goexit() }
func (f *failureRecorder) FailNow()          { f.record("FailNow"); runtime.Goexit() }
func (f *failureRecorder) Failed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}
func (f *failureRecorder) output() string { return strings.Join(f.msgs, "\n") }

// expectFailure runs fn with a failureRecorder and returns it.
func expectFailure(t *testing.T, fn func(tb *failureRecorder)) *failureRecorder {
	tb := &failureRecorder{T: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(tb)
	}()
	<-done
	return tb
}

// TestCheckFindsShrinksAndReplays runs Check on a controller with a
// seeded bug (status churn): it must fail on Quiescent, shrink the plan to
// one step, save a scenario whose replay reproduces the failure.
func TestCheckFindsShrinksAndReplays(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	start := time.Now()
	// The churning controller never settles: short caps and a short
	// quiescence deadline keep its cases short, so that shrinking (within
	// -kubeprop.shrinktime) gets to the minimum.
	spec := widgetSpec(true)
	spec.Setup, spec.SettleCap = 3*time.Second, time.Second
	spec.Properties[3] = properties.Quiescent(properties.QuiesceOptions{Window: time.Second, Within: 2 * time.Second})
	// Node loss makes a case wait out the eviction; the bug shows without it.
	spec.Faults = []faults.Fault{faults.ScaleChange(faults.ScaleOptions{}), faults.ChildDelete(), faults.ContainerKill(faults.ContainerKillOptions{}), faults.ControllerRestart()}
	var mu sync.Mutex
	var plans []string // of every case run; "FAIL " before a failing one
	// A seed whose first plan has several steps: the bug shows at the first
	// plan, and shrinking has steps to drop. The search draws that plan
	// alone: with more, the first failure judged may be a shorter one.
	gen := spec.Plans()
	seed := 1
	for len(gen.Example(seed)) < 3 {
		seed++
	}
	drawn := len(gen.Example(seed))
	opts := harness.SearchOptions{Checks: 1, Seed: uint64(seed), ShrinkTime: time.Minute, Dir: filepath.Join(dir, t.Name())}
	opts.OnCase = func(rep *harness.Report) {
		mu.Lock()
		defer mu.Unlock()
		p := faults.FormatPlan(rep.Plan)
		if rep.Failed() {
			p = "FAIL " + p
		}
		plans = append(plans, p)
	}
	tb := expectFailure(t, func(tb *failureRecorder) { harness.CheckWith(tb, env, spec, opts) })
	t.Logf("found and shrunk in %v:\n%s", time.Since(start), tb.output())
	require.True(t, tb.Failed())
	// No plan runs more than three times (a candidate that passed, once
	// more before the shrinker stops; one that failed, its confirming
	// run), but for the replays of the plan drawn and the shrunk one at
	// the end.
	mu.Lock()
	firstFail := slices.IndexFunc(plans, func(p string) bool { return strings.HasPrefix(p, "FAIL ") })
	require.GreaterOrEqual(t, firstFail, 0)
	_, shrunk, _ := strings.Cut(tb.output(), " steps): ")
	shrunk, _, _ = strings.Cut(shrunk, "\n")
	seen := map[string]int{}
	for _, p := range plans[firstFail:] {
		p = strings.TrimPrefix(p, "FAIL ")
		seen[p]++
		most := 3
		if p == strings.TrimPrefix(plans[firstFail], "FAIL ") || p == shrunk {
			most += harness.ReproduceReplays
		}
		require.LessOrEqual(t, seen[p], most, "plan %s ran %d times while shrinking; cases: %v", p, seen[p], plans)
	}
	t.Logf("%d cases, %d from the first failure on", len(plans), len(plans)-firstFail)
	mu.Unlock()
	out := tb.output()
	require.Contains(t, out, "kubeprop: quiescent: writes went on after the faults healed: Widget web field status.lastReconcileTime by [")
	require.Contains(t, out, fmt.Sprintf("(shrunk from %d to 1 steps): [", drawn))
	require.Contains(t, out, fmt.Sprintf("seed:     %d\n", seed))
	require.Contains(t, out, "replay:   go test -run '^TestCheckFindsShrinksAndReplays$' -kubeprop.replay=")
	sample, err := readmeFailureSample()
	require.NoError(t, err)
	// What go test prints, without the recorder's note of the FailNow.
	printed := strings.TrimSuffix(strings.TrimRight(out, "\n"), "\nFailNow")
	require.NoError(t, sameShape(sample, printed, dir), "the README's failure sample must be this output, as logged above (numbers and the plan may differ)")

	files, err := filepath.Glob(filepath.Join(dir, t.Name(), "*.yaml"))
	require.NoError(t, err)
	files = slices.DeleteFunc(files, scenario.IsEvidence)
	require.Len(t, files, 1)
	// Beside it, the controller's log, the namespace's events and the
	// objects the case ended with, named in the failure.
	logPath, eventsPath, objectsPath := scenario.Evidence(files[0])
	for _, p := range []string{logPath, eventsPath, objectsPath} {
		require.Contains(t, out, p)
	}
	log, err := os.ReadFile(logPath)
	require.NoError(t, err)
	require.Contains(t, string(log), "Starting Controller", "controller-runtime's own lines, through the manager's logger")
	events, err := os.ReadFile(eventsPath)
	require.NoError(t, err)
	require.Contains(t, string(events), "kind: Event")
	require.Contains(t, string(events), "reason: Scheduled", "the scheduler's events of the case's pods")
	objects, err := os.ReadFile(objectsPath)
	require.NoError(t, err)
	require.Contains(t, string(objects), "kind: Widget")
	require.Contains(t, string(objects), "name: web")
	require.Contains(t, string(objects), "kind: Pod")
	require.NotContains(t, string(objects), "managedFields")
	page, err := os.ReadFile(strings.TrimSuffix(files[0], ".yaml") + ".html")
	require.NoError(t, err, "the HTML timeline")
	require.Contains(t, string(page), "<svg")
	require.Contains(t, string(page), "status.lastReconcileTime")
	b, err := os.ReadFile(files[0])
	require.NoError(t, err)
	require.Contains(t, string(b), "outcome: fail")
	require.Contains(t, string(b), "property: quiescent")
	t.Logf("%s:\n%s", files[0], b)

	// Replays reproduce the failure, 3 of 3: two by file, one by folder.
	for range 2 {
		harness.Replay(t, env, spec, files[0])
	}
	harness.ReplayDir(t, env, spec, dir)
	harness.ReplayDir(t, env, spec, filepath.Join(dir, "no-scenarios-here"))
	// On the fixed controller, the scenario's expected failure is gone.
	tb = expectFailure(t, func(tb *failureRecorder) { harness.Replay(tb, env, widgetSpec(false), files[0]) })
	require.True(t, tb.Failed())
	require.Contains(t, tb.output(), "property quiescent held, but the scenario expects it to fail")
	require.Contains(t, tb.output(), "this replay's log", "where the replay that passed keeps its log, or how to keep it")
}

// TestRunControllerFaults runs the faults that act on the controller itself
// on a correct controller: API errors on its writes, a crash right after
// a write, delayed and cut watches. Every property holds, and the trace
// shows each fault's effect.
func TestRunControllerFaults(t *testing.T) {
	t.Parallel()
	plan := []faults.Step{
		faults.APIErrorsStep{Error: faults.Conflict, Requests: 3},
		faults.ScaleChangeStep{Object: 0, Field: "spec.replicas", Value: 4},
		faults.CrashAfterWriteStep{Writes: 1},
		faults.ScaleChangeStep{Object: 0, Field: "spec.replicas", Value: 2},
		faults.APIErrorsStep{Error: faults.InternalError, ForMs: 1000},
		faults.ScaleChangeStep{Object: 0, Field: "spec.replicas", Value: 3},
		faults.StaleWatchStep{DelayMs: 1000, ForMs: 2000},
		faults.ScaleChangeStep{Object: 0, Field: "spec.replicas", Value: 5},
		faults.StaleWatchStep{Drop: true},
		faults.ScaleChangeStep{Object: 0, Field: "spec.replicas", Value: 1},
	}
	rep, err := harness.Run(context.Background(), env, widgetSpec(false), plan)
	require.NoError(t, err)
	timeline := strings.Join(rep.Timeline, "\n")
	t.Logf("timeline:\n%s", timeline)
	require.False(t, rep.Failed(), "failures: %+v", rep.Failures)
	codes := map[int]int{}
	for _, r := range rep.Trace.Requests {
		if r.UserAgent == harness.UserAgentInjected {
			codes[r.Code]++
		}
	}
	require.Equal(t, 3, codes[409], "the three refused writes are in the trace: %v", codes)
	require.Positive(t, codes[500], "writes in the error window were refused: %v", codes)
	require.Contains(t, timeline, "killed right after a write")
	failed := 0
	for _, r := range rep.Trace.Reconciles {
		if r.Err != "" {
			failed++
		}
	}
	require.Positive(t, failed, "the refused writes failed reconciles")
}

// TestReplayCountsReproductions: a scenario replayed four times on a
// controller that churns in every other instance reproduces its failure
// in 2 of 4; expect.rate 0.5 takes that, 0.75 names the rate measured.
func TestReplayCountsReproductions(t *testing.T) {
	t.Parallel()
	var starts atomic.Int32
	spec := widgetSpec(false)
	spec.Controller = harness.Manager(func(mgr manager.Manager, opts controller.Options) error {
		return (&widgetReconciler{churn: starts.Add(1)%2 == 1}).setup(mgr, opts)
	})
	spec.Properties[3] = properties.Quiescent(properties.QuiesceOptions{Window: time.Second, Within: 2 * time.Second})
	dir := t.TempDir()
	write := func(rate float64) string {
		s, err := scenario.New([]faults.Step{faults.ScaleChangeStep{Field: "spec.replicas", Value: 4}}, "",
			scenario.Expect{Outcome: scenario.Fail, Property: "quiescent", Rate: rate})
		require.NoError(t, err)
		path := filepath.Join(dir, fmt.Sprintf("rate-%v.yaml", rate))
		require.NoError(t, s.Write(path))
		return path
	}
	tb := expectFailure(t, func(tb *failureRecorder) { harness.ReplayCount(tb, env, spec, write(0.5), 4) })
	require.False(t, tb.Failed(), tb.output())
	require.Contains(t, tb.output(), "reproduced 2 of 4")
	tb = expectFailure(t, func(tb *failureRecorder) { harness.ReplayCount(tb, env, spec, write(0.75), 4) })
	require.True(t, tb.Failed())
	require.Contains(t, tb.output(), "property quiescent failed in 2 of 4 replays (0.50), and the scenario expects at least 3 (expect.rate 0.75)")
	require.Equal(t, int32(8), starts.Load(), "one controller instance per replay")
}

// TestSearchPlansAreFindsPlans: SearchPlans draws the plans a search with
// the same options runs, its probe included, so that a run of many cases
// (the soak) draws as Find does.
func TestSearchPlansAreFindsPlans(t *testing.T) {
	t.Parallel()
	spec := widgetSpec(false)
	spec.Faults = []faults.Fault{faults.ScaleChange(faults.ScaleOptions{}), faults.APIErrors(), faults.ContainerKill(faults.ContainerKillOptions{})}
	opts := harness.SearchOptions{Checks: 6, Seed: 7, Parallel: 3, Dir: t.TempDir()}
	plans, err := harness.SearchPlans(t.Context(), env, spec, opts)
	require.NoError(t, err)
	require.Len(t, plans, 6)
	var drawn []string
	for _, p := range plans {
		drawn = append(drawn, faults.FormatPlan(p))
	}
	require.Contains(t, strings.Join(drawn, "\n"), "Verb: ", "aimed at a write the probe saw:\n%s", strings.Join(drawn, "\n"))
	var mu sync.Mutex
	var ran []string
	opts.OnCase = func(rep *harness.Report) {
		mu.Lock()
		defer mu.Unlock()
		ran = append(ran, faults.FormatPlan(rep.Plan))
	}
	opts.OnSkip = func(plan []faults.Step) {
		mu.Lock()
		defer mu.Unlock()
		ran = append(ran, faults.FormatPlan(plan))
	}
	f, err := harness.Find(env, spec, "search-plans", opts)
	require.NoError(t, err)
	require.Nil(t, f)
	require.ElementsMatch(t, drawn, ran)
}
