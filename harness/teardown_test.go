package harness_test

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness"
)

// caseNamespace reads the case's namespace from its pods or its fixture.
func caseNamespace(t *testing.T, rep *harness.Report) string {
	t.Helper()
	for _, s := range rep.Trace.States {
		for _, o := range s.Objects {
			if ns := o.GetNamespace(); ns != "" {
				return ns
			}
		}
	}
	t.Fatal("the trace shows no object of the case")
	return ""
}

// TestTeardownLeavesNothing: a controller that puts a finalizer on its
// pods leaves them Terminating for good once it is stopped, and with
// them its namespace. Teardown removes the finalizers, force-deletes the
// pods of a lost node, and returns once the namespace and the case's
// nodes are gone, saying what it forced.
func TestTeardownLeavesNothing(t *testing.T) {
	spec := widgetSpec(false)
	spec.Controller = harness.Manager(func(mgr manager.Manager, opts controller.Options) error {
		return (&widgetReconciler{finalizer: true}).setup(mgr, opts)
	})
	plan := []faults.Step{
		faults.NodeLossStep{Node: 0},
		faults.ScaleChangeStep{Object: 0, Field: "spec.replicas", Value: 2},
	}
	rep, err := harness.Run(context.Background(), env, spec, plan)
	require.NoError(t, err)
	timeline := strings.Join(rep.Timeline, "\n")
	require.False(t, rep.Failed(), "failures: %+v\ntimeline:\n%s", rep.Failures, timeline)
	require.Empty(t, rep.Teardown.Left, "timeline:\n%s", timeline)
	forced := strings.Join(rep.Teardown.Forced, "\n")
	require.Contains(t, forced, "removed finalizers [test.kubeprop.dev/cleanup] of Pod web-", "timeline:\n%s", timeline)
	require.Contains(t, forced, "force-deleted Pod web-", "timeline:\n%s", timeline)

	ns := caseNamespace(t, rep)
	cs := kubernetes.NewForConfigOrDie(env.Config())
	_, err = cs.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "namespace %s is still there: %v", ns, err)
	pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, pods.Items)
	nodes, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	for _, n := range nodes.Items {
		require.False(t, strings.HasPrefix(n.Name, ns+"-node-"), "node %s of the case is still there", n.Name)
	}
	t.Logf("teardown took %v (%v):\n%s", rep.Teardown.Took, rep.Teardown.Phases, forced)
}

// TestCasesLeaveNoGoroutines runs two cases with every fault, a dropped
// and a delayed watch and a crash after a write included, one after the
// other: after the first (which starts what the Env keeps for good, such as its
// connections), no case leaves a goroutine behind. The heap and goroutine
// counts after each case are in the log (-v).
func TestCasesLeaveNoGoroutines(t *testing.T) {
	plan := []faults.Step{
		faults.ScaleChangeStep{Object: 0, Field: "spec.replicas", Value: 4},
		faults.StaleWatchStep{DelayMs: 500, ForMs: 1000},
		faults.ContainerKillStep{Pod: 1, ExitCode: 137},
		faults.CrashLoopStep{Pod: 0, Starts: 2, ExitCode: 1},
		faults.StaleWatchStep{Drop: true},
		faults.ScaleChangeStep{Object: 0, Field: "spec.replicas", Value: 2},
		faults.CrashAfterWriteStep{Writes: 1},
		faults.ScaleChangeStep{Object: 0, Field: "spec.replicas", Value: 3},
		faults.APIErrorsStep{Error: faults.InternalError, ForMs: 500},
		faults.ChildDeleteStep{Child: 0},
		faults.ControllerRestartStep{},
		faults.ReadinessFlapStep{Pod: 1},
		faults.ConflictingWriterStep{Object: 0, Field: "spec.replicas", Value: 2, Rounds: 1},
		faults.NodeLossStep{Node: 0},
		faults.NodeRecoverStep{Node: 0},
	}
	run := func() {
		rep, err := harness.Run(context.Background(), env, widgetSpec(false), plan)
		require.NoError(t, err)
		require.False(t, rep.Failed(), "failures: %+v\ntimeline:\n%s", rep.Failures, strings.Join(rep.Timeline, "\n"))
		require.Empty(t, rep.Teardown.Left)
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		t.Logf("after a case: %d goroutines, heap in use %.1f MB", runtime.NumGoroutine(), float64(m.HeapInuse)/(1<<20))
	}
	run()
	// What the Env runs for good is there now. Its goroutines come and go
	// (a watch that ends is started again), so the check compares counts
	// of goroutines by the go statement that started them.
	baseline := goroutineGroups()
	run() // a case's leak shows after one more

	// The count sees a goroutine started since the baseline.
	stop := make(chan struct{})
	go func() { <-stop }()
	require.Contains(t, moreGoroutines(baseline, goroutineGroups()), "1 more of github.com/kubeprop/kubeprop/harness_test.TestCasesLeaveNoGoroutines at ")
	close(stop)

	// A stopped controller's last goroutines may take a few seconds.
	eventually(t, 20*time.Second, "no goroutine left by the cases", func(context.Context) (bool, string, error) {
		excess := moreGoroutines(baseline, goroutineGroups())
		return excess == "", excess, nil
	})
}

// goroutineGroups counts the goroutines by the go statement that
// started them (its function and line), with one stack of each group. Not
// by where they run: a goroutine of the Env that wakes now and then (its
// idle-connection closer) is at another place in every sample.
func goroutineGroups() map[string][]string {
	groups := map[string][]string{}
	for _, g := range harness.GoroutineStacks() {
		lines := strings.Split(g, "\n")
		key := ""
		for i, l := range lines {
			if !strings.HasPrefix(l, "created by ") {
				continue
			}
			key = strings.TrimPrefix(l, "created by ")
			if j := strings.Index(key, " in goroutine"); j > 0 {
				key = key[:j]
			}
			if i+1 < len(lines) {
				at := strings.TrimSpace(lines[i+1])
				if j := strings.LastIndex(at, " +0x"); j > 0 {
					at = at[:j]
				}
				key += " at " + at
			}
		}
		if key == "" {
			continue // the main goroutine
		}
		groups[key] = append(groups[key], g)
	}
	return groups
}

// moreGoroutines describes the groups that have more goroutines now than
// in the baseline; empty when none has.
func moreGoroutines(baseline, now map[string][]string) string {
	var out []string
	for key, gs := range now {
		if len(gs) > len(baseline[key]) {
			out = append(out, fmt.Sprintf("%d more of %s (%d before); one of them:\n%s", len(gs)-len(baseline[key]), key, len(baseline[key]), gs[len(gs)-1]))
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n\n")
}
