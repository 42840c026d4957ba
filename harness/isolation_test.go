package harness_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness"
	"github.com/kubeprop/kubeprop/properties"
)

// TestIsolationCasesSideBySide runs two cases at once on the one cluster:
// each case's pods are bound only to its own nodes, though the pods say
// nothing of where they may go.
func TestIsolationCasesSideBySide(t *testing.T) {
	t.Parallel()
	plan := []faults.Step{faults.ScaleChangeStep{Object: 0, Field: "spec.replicas", Value: 4}}
	reps := make([]*harness.Report, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range reps {
		wg.Go(func() { reps[i], errs[i] = harness.Run(context.Background(), env, widgetSpec(false), plan) })
	}
	wg.Wait()

	namespaces := map[string]bool{}
	for i, rep := range reps {
		require.NoError(t, errs[i], "case %d", i)
		require.False(t, rep.Failed(), "case %d failures: %+v\ntimeline:\n%s", i, rep.Failures, strings.Join(rep.Timeline, "\n"))
		bound := map[string]string{} // pod → node
		ns := ""
		for _, s := range rep.Trace.States {
			for _, p := range s.ByKind("Pod") {
				ns = p.GetNamespace()
				node, _, _ := unstructured.NestedString(p.Object, "spec", "nodeName")
				if node == "" {
					continue
				}
				require.True(t, strings.HasPrefix(node, p.GetNamespace()+"-node-"),
					"case %d: pod %s/%s was bound to node %s, not one of its case's", i, p.GetNamespace(), p.GetName(), node)
				bound[p.GetName()] = node
			}
		}
		require.GreaterOrEqual(t, len(bound), 4, "case %d: pods bound: %v", i, bound)
		namespaces[ns] = true
		t.Logf("case %d in %s: pods bound %v", i, ns, bound)
	}
	require.Len(t, namespaces, 2, "the cases had namespaces of their own")
	// Side by side, not one after the other.
	a, b := reps[0].Trace, reps[1].Trace
	require.True(t, a.Start.Before(b.End) && b.Start.Before(a.End),
		"the cases did not overlap: %v–%v and %v–%v", a.Start, a.End, b.Start, b.End)
}

var caseNode = regexp.MustCompile(`^kp-\d+-node-\d+$`)

// TestIsolationOtherPodsStayOffCaseNodes holds a case open and creates a
// pod in a namespace of no case: it is not scheduled onto the case's
// nodes, though they are Ready and empty, and goes to a node of no case
// once there is one. The case's nodes are in a zone of its own.
func TestIsolationOtherPodsStayOffCaseNodes(t *testing.T) {
	cs := clientset(t)
	caseNS := make(chan string, 1)
	var probeDone atomic.Bool
	spec := harness.Spec{
		// A controller that does nothing: the case only has to last.
		Controller: harness.Func(func(ctx context.Context, _ *rest.Config) error {
			<-ctx.Done()
			return nil
		}),
		Ready: writesNothing,
		Fixtures: func(ns string) []client.Object {
			caseNS <- ns
			return []client.Object{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}}
		},
		Properties: []properties.Property{
			properties.Converges("probe-done", func(properties.State) error {
				if !probeDone.Load() {
					return errors.New("the probe is still running")
				}
				return nil
			}, properties.ConvergeOptions{Within: 5 * time.Minute}),
		},
	}
	type result struct {
		rep *harness.Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := harness.Run(context.Background(), env, spec, nil)
		done <- result{rep, err}
	}()
	// The case ends, whatever the test's outcome.
	t.Cleanup(func() {
		probeDone.Store(true)
		<-done
	})

	var ns string
	select {
	case ns = <-caseNS:
	case r := <-done:
		t.Fatalf("the case ended before its fixtures: %v", r.err)
	case <-time.After(2 * time.Minute):
		t.Fatal("the case did not reach its fixtures in 2 minutes")
	}

	// The case's nodes exist (its fixtures come after them), in its zone;
	// no other node does.
	nodes, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var own, others []string
	for _, n := range nodes.Items {
		if strings.HasPrefix(n.Name, ns+"-node-") {
			own = append(own, n.Name)
			require.Equal(t, ns, n.Labels[corev1.LabelTopologyZone], "node %s's zone", n.Name)
		} else if !caseNode.MatchString(n.Name) {
			others = append(others, n.Name)
		}
	}
	require.Len(t, own, 3, "the case's nodes")
	require.Empty(t, others, "nodes of no case left by other tests: the probe pod could go there")

	testNS := namespace(t, cs)
	_, err = cs.CoreV1().Pods(testNS).Create(context.Background(), barePod(testNS, "probe", corev1.RestartPolicyAlways), metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, 60*time.Second, "the probe pod found unschedulable by the node filter", func(ctx context.Context) (bool, string, error) {
		p, err := cs.CoreV1().Pods(testNS).Get(ctx, "probe", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		if p.Spec.NodeName != "" {
			return false, "", fmt.Errorf("the probe pod was bound to %s while only case nodes existed", p.Spec.NodeName)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled {
				return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable &&
						strings.Contains(c.Message, "kubeprop NodeFilter"),
					fmt.Sprintf("PodScheduled %s %s: %s", c.Status, c.Reason, c.Message), nil
			}
		}
		return false, "no PodScheduled condition", nil
	})

	free := addNodes(t, 1)[0]
	eventually(t, 60*time.Second, "the probe pod bound to the node of no case", func(ctx context.Context) (bool, string, error) {
		p, err := cs.CoreV1().Pods(testNS).Get(ctx, "probe", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		if p.Spec.NodeName != "" && p.Spec.NodeName != free.Name() {
			return false, "", fmt.Errorf("the probe pod was bound to %s, not %s", p.Spec.NodeName, free.Name())
		}
		return p.Spec.NodeName == free.Name(), "on " + p.Spec.NodeName, nil
	})

	probeDone.Store(true)
	var r result
	select {
	case r = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the case did not end in 2 minutes once the probe was done")
	}
	done <- r // for the cleanup
	require.NoError(t, r.err)
	require.False(t, r.rep.Failed(), "failures: %+v\ntimeline:\n%s", r.rep.Failures, strings.Join(r.rep.Timeline, "\n"))
}

// TestIsolationFaultsStayInTheirCase runs two cases at once: one under
// the faults that act on the controller (refused writes, a crash after a
// write, delayed and cut watches) and a container kill, one with scale
// changes only. The quiet case's trace and timeline show none of the
// other's faults, requests or objects.
func TestIsolationFaultsStayInTheirCase(t *testing.T) {
	t.Parallel()
	scale := func(n int64) faults.Step { return faults.ScaleChangeStep{Object: 0, Field: "spec.replicas", Value: n} }
	faulty := []faults.Step{
		faults.APIErrorsStep{Error: faults.Conflict, Requests: 3},
		scale(4),
		faults.CrashAfterWriteStep{Writes: 1},
		scale(2),
		faults.APIErrorsStep{Error: faults.InternalError, ForMs: 1000},
		faults.StaleWatchStep{DelayMs: 1000, ForMs: 2000},
		scale(5),
		faults.ContainerKillStep{Pod: 0, ExitCode: 137},
		faults.StaleWatchStep{Drop: true},
		scale(1),
	}
	quiet := []faults.Step{scale(4), scale(2), scale(5), scale(3)}
	plans := [][]faults.Step{faulty, quiet}
	reps := make([]*harness.Report, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range reps {
		wg.Go(func() { reps[i], errs[i] = harness.Run(context.Background(), env, widgetSpec(false), plans[i]) })
	}
	wg.Wait()
	for i := range reps {
		require.NoError(t, errs[i], "case %d", i)
		require.False(t, reps[i].Failed(), "case %d failures: %+v\ntimeline:\n%s", i, reps[i].Failures, strings.Join(reps[i].Timeline, "\n"))
		require.Empty(t, reps[i].ForeignWrites, "case %d", i)
	}
	a, b := reps[0].Trace, reps[1].Trace
	require.True(t, a.Start.Before(b.End) && b.Start.Before(a.End),
		"the cases did not overlap: %v–%v and %v–%v", a.Start, a.End, b.Start, b.End)

	injected := func(rep *harness.Report) int {
		n := 0
		for _, r := range rep.Trace.Requests {
			if r.UserAgent == harness.UserAgentInjected {
				n++
			}
		}
		return n
	}
	loud, calm := reps[0], reps[1]
	loudTimeline, calmTimeline := strings.Join(loud.Timeline, "\n"), strings.Join(calm.Timeline, "\n")
	require.Positive(t, injected(loud), "the faulty case's refused writes are in its trace")
	require.Contains(t, loudTimeline, "killed right after a write")

	t.Logf("quiet case's timeline:\n%s", calmTimeline)
	require.Zero(t, injected(calm), "refused writes in the quiet case's trace")
	require.NotContains(t, calmTimeline, "killed right after a write")
	require.Len(t, calm.Trace.Events, len(quiet), "the quiet case's events are its own steps")
	for _, e := range calm.Trace.Events {
		require.True(t, strings.HasPrefix(e.Name, "ScaleChange{"), "an event of the quiet case: %s", e.Name)
	}
	ns := ""
	for _, s := range calm.Trace.States {
		for _, o := range s.Objects {
			if ns == "" {
				ns = o.GetNamespace()
			}
			require.Equal(t, ns, o.GetNamespace(), "an object of another namespace in the quiet case's trace: %s %s", o.GetKind(), o.GetName())
		}
	}
	require.NotEmpty(t, ns)
	for _, r := range calm.Trace.Requests {
		require.Equal(t, ns, r.Namespace, "a request of another namespace in the quiet case's trace: %+v", r)
	}
	for _, r := range calm.Trace.Reconciles {
		require.True(t, strings.HasPrefix(r.Key, ns+"/"), "a reconcile of another case in the quiet case's trace: %+v", r)
	}
	require.Empty(t, calm.Trace.Panics)
}

// TestIsolationForeignWrites: a controller that writes into another
// case's namespace is reported by Run, and makes a search with
// Parallel > 1 fail with an error that says what to do; Parallel 1 runs.
func TestIsolationForeignWrites(t *testing.T) {
	t.Parallel()
	spec := widgetSpec(false)
	spec.Properties = []properties.Property{properties.NoPanics()}
	spec.Ready = writesNothing // of its own kinds in its namespace
	spec.Controller = harness.Func(func(ctx context.Context, cfg *rest.Config) error {
		c, err := client.New(cfg, client.Options{})
		if err != nil {
			return err
		}
		// The namespace of no running case: the write fails, and was
		// still tried.
		_ = c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kp-999999", Name: "stray"}})
		<-ctx.Done()
		return nil
	})
	plan := []faults.Step{faults.ScaleChangeStep{Object: 0, Field: "spec.replicas", Value: 2}}
	rep, err := harness.Run(context.Background(), env, spec, plan)
	require.NoError(t, err)
	require.Equal(t, []string{"create configmaps in kp-999999"}, rep.ForeignWrites)
	require.Contains(t, strings.Join(rep.Timeline, "\n"), "the controller wrote into other cases' namespaces: create configmaps in kp-999999")

	_, err = harness.Find(env, spec, "foreign", harness.SearchOptions{Checks: 2, Seed: 1, Parallel: 2, Dir: t.TempDir()})
	require.ErrorContains(t, err, "cases of this spec cannot run side by side: its controller wrote into other cases' namespaces (create configmaps in kp-999999)")
	require.ErrorContains(t, err, "Parallel 1")

	f, err := harness.Find(env, spec, "foreign", harness.SearchOptions{Checks: 1, Seed: 1, Parallel: 1, Dir: t.TempDir()})
	require.NoError(t, err)
	require.Nil(t, f)
}
