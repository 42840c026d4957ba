package harness_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"pgregory.net/rapid"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness"
	"github.com/kubeprop/kubeprop/properties"
)

func TestSpecValidation(t *testing.T) {
	tb := expectFailure(t, func(tb *failureRecorder) { harness.Check(tb, env, harness.Spec{}) })
	require.Contains(t, tb.output(), "Spec.Controller is nil")
	require.Contains(t, tb.output(), "Spec.Fixtures is nil")
	require.Contains(t, tb.output(), "Spec.Properties is empty")

	spec := widgetSpec(false)
	spec.Properties = append(spec.Properties, properties.NoPanics())
	_, err := harness.Run(context.Background(), env, spec, []faults.Step{faults.ControllerRestartStep{}})
	require.ErrorContains(t, err, `two properties named "no-panics"`)

	// A fault of the user's own is validated like the catalog's.
	spec = widgetSpec(false)
	spec.Faults = []faults.Fault{ownFault{}}
	_, err = harness.Run(context.Background(), env, spec, []faults.Step{faults.ControllerRestartStep{}})
	require.ErrorContains(t, err, "Spec.Faults: Own: its options are wrong")
}

// ownFault is a fault defined outside the faults package whose options
// are always wrong.
type ownFault struct{}

func (ownFault) Name() string                                      { return "Own" }
func (ownFault) Steps(faults.Config) *rapid.Generator[faults.Step] { return nil }
func (ownFault) Decode([]byte) (faults.Step, error)                { return nil, nil }
func (ownFault) Validate() error                                   { return errors.New("Own: its options are wrong") }

// TestSearchOptionsValidation: bad search options are an error that names
// the option and the fix, before any case runs.
func TestSearchOptionsValidation(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	ran := false
	opts := harness.SearchOptions{Parallel: 65, Checks: -1, Dir: filepath.Join(file, "scenarios"), OnCase: func(*harness.Report) { ran = true }}
	_, err := harness.Find(env, widgetSpec(false), "bad", opts)
	require.ErrorContains(t, err, "SearchOptions.Parallel is 65: give 1 to 64 cases at once, or 0 for the default")
	require.ErrorContains(t, err, "SearchOptions.Checks is -1")
	require.ErrorContains(t, err, "SearchOptions.Dir: "+file+" is not a folder")
	opts = harness.SearchOptions{Parallel: -1}
	_, err = harness.Find(env, widgetSpec(false), "bad", opts)
	require.ErrorContains(t, err, "SearchOptions.Parallel is -1")
	require.False(t, ran, "a case ran")
}

func TestBadScenarios(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]struct{ file, want string }{
		"malformed":       {"version: 1\nplan: [\n", "is malformed"},
		"unknown-field":   {"version: 1\nplans: []\n", `unknown field "plans"`},
		"future-version":  {"version: 7\nplan: [{fault: NodeLoss, node: 0}]\nexpect: {outcome: pass}\n", "has version 7; this kubeprop reads version 1"},
		"empty-plan":      {"version: 1\nplan: []\nexpect: {outcome: pass}\n", "empty plan"},
		"unknown-fault":   {"version: 1\nplan: [{fault: NodeExplode}]\nexpect: {outcome: pass}\n", `step 1: unknown fault "NodeExplode"; the known faults are`},
		"bad-expectation": {"version: 1\nplan: [{fault: NodeLoss, node: 0}]\nexpect: {outcome: maybe}\n", `expect.outcome is "maybe"`},
		"missing-file":    {"", "reading scenario"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name+".yaml")
			if c.file != "" {
				require.NoError(t, os.WriteFile(path, []byte(c.file), 0o644))
			}
			tb := expectFailure(t, func(tb *failureRecorder) { harness.Replay(tb, env, widgetSpec(false), path) })
			require.True(t, tb.Failed())
			require.Contains(t, tb.output(), c.want)
		})
	}
}

// panicky is a controller whose reconcile panics.
type panicky struct{}

func (panicky) Reconcile(context.Context, ctrl.Request) (ctrl.Result, error) {
	panic("reconcile exploded")
}

// TestControllerMisbehaviour runs alone: beside other tests, once, its
// panicking controller's case ended without the panic (the controller
// writes nothing, so the case may settle before its first reconcile).
func TestControllerMisbehaviour(t *testing.T) {
	ctx := context.Background()
	plan := []faults.Step{faults.ControllerRestartStep{}}
	spec := widgetSpec(false)

	spec.Controller = harness.Manager(func(manager.Manager, controller.Options) error { panic("setup exploded") })
	_, err := harness.Run(ctx, env, spec, plan)
	require.ErrorContains(t, err, "setting up the controller: it panicked: setup exploded")

	spec.Controller = harness.Manager(func(mgr manager.Manager, opts controller.Options) error {
		w := newWidget("", "", 0)
		return ctrl.NewControllerManagedBy(mgr).For(w).WithOptions(opts).Complete(panicky{})
	})
	spec.Properties = []properties.Property{properties.NoPanics()}
	spec.Fixtures = func(ns string) []client.Object { return []client.Object{newWidget(ns, "web", 1)} }
	rep, err := harness.Run(ctx, env, spec, plan)
	require.NoError(t, err)
	require.True(t, rep.Failed(), "no panic seen; the timeline:\n%s", strings.Join(rep.Timeline, "\n"))
	require.Equal(t, "no-panics: the controller panicked: reconcile exploded", rep.Failures[0].Message)
}

func TestFuncControllerMisbehaviour(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	plan := []faults.Step{faults.ControllerRestartStep{}}
	spec := widgetSpec(false)
	spec.Properties = []properties.Property{properties.NoPanics()}

	spec.Controller = harness.Func(func(context.Context, *rest.Config) error { return errors.New("no kubeconfig") })
	_, err := harness.Run(ctx, env, spec, plan)
	require.ErrorContains(t, err, "the controller did not start: no kubeconfig")

	spec.Controller = harness.Func(func(context.Context, *rest.Config) error { panic("run exploded") })
	_, err = harness.Run(ctx, env, spec, plan)
	require.ErrorContains(t, err, "the controller did not start: it panicked: run exploded")

	// One that gives up in the middle of a case: a crash, reported.
	spec.Controller = harness.Func(func(ctx context.Context, _ *rest.Config) error {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(700 * time.Millisecond): // past the start, within the case
			return errors.New("lost my lease")
		}
	})
	scale := func(n int64) faults.Step { return faults.ScaleChangeStep{Field: "spec.replicas", Value: n} }
	rep, err := harness.Run(ctx, env, spec, []faults.Step{scale(2), scale(3), scale(4)})
	require.NoError(t, err)
	require.True(t, rep.Failed())
	require.Equal(t, "no-panics: the controller panicked: the controller returned while the case went on: lost my lease", rep.Failures[0].Message)
}

// TestHangingCaseFailsAlone: of cases run side by side, one whose
// controller never stops fails the search as a harness error naming its
// namespace and plan; the case beside it runs to its end.
func TestHangingCaseFailsAlone(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	defer close(release) // the stuck controller's goroutine ends with the test
	var started atomic.Int32
	spec := widgetSpec(false)
	spec.Properties = []properties.Property{properties.NoPanics()}
	spec.Faults = []faults.Fault{faults.ScaleChange(faults.ScaleOptions{})} // no restarts: the first instance stops at teardown
	spec.Ready = writesNothing
	spec.Controller = harness.Func(func(ctx context.Context, _ *rest.Config) error {
		if started.Add(1) == 1 {
			<-release // ignores its context
			return nil
		}
		<-ctx.Done()
		return nil
	})
	var mu sync.Mutex
	var ended []string
	opts := harness.SearchOptions{Checks: 2, Seed: 1, Parallel: 2, Dir: t.TempDir(), OnCase: func(rep *harness.Report) {
		mu.Lock()
		defer mu.Unlock()
		ended = append(ended, rep.Namespace)
	}}
	_, err := harness.Find(env, spec, "hanging", opts)
	require.Error(t, err)
	t.Log(err)
	require.Regexp(t, `^the harness failed: case kp-\d+ \(plan \[.*\]\): the controller did not return within 30s of its context ending`, err.Error())
	// The goroutine that ignores its context is named.
	require.Regexp(t, `its goroutines still running: 1 in github.com/kubeprop/kubeprop/harness_test.TestHangingCaseFailsAlone.func\d+ \(badinput_test.go:\d+\)$`, err.Error())
	require.Len(t, ended, 2, "both cases ended: the stuck one after its bound")
}
