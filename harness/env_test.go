package harness_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubeprop/kubeprop/harness"
	"github.com/kubeprop/kubeprop/harness/kubelet"
)

// testTimeScale makes the node monitor grace period 2.5 s and the eviction
// tolerations 15 s of wall time, with heartbeats every 0.5 s: fast, with
// room for a loaded machine.
const testTimeScale = 20

var (
	env    *harness.Env
	events = &eventLog{}
)

// Tests whose cases keep to their own namespace and nodes call
// t.Parallel: they mostly wait. Those that put bare pods on shared nodes
// (addNodes), measure delays to the 200 ms, set flags, or count the
// process's goroutines or the controller processes run first, alone.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == widgetProcessArg {
		os.Exit(runWidgetProcess(os.Args[2:]))
	}
	ctrllog.SetLogger(logr.Discard()) // envtest logs through controller-runtime
	// A case takes seconds on the hollow cluster: unless told otherwise,
	// draw 5 plans per check, not rapid's 100, and give shrinking 60 s.
	flag.Parse()
	if os.Getenv("KUBEPROP_CHECKS") == "" && !flagSet("kubeprop.checks") {
		_ = flag.Set("kubeprop.checks", "5")
	}
	if os.Getenv("KUBEPROP_SHRINKTIME") == "" && !flagSet("kubeprop.shrinktime") {
		_ = flag.Set("kubeprop.shrinktime", "60s")
	}
	env = harness.MustStart(harness.EnvOptions{
		TimeScale:         testTimeScale,
		CRDDirectoryPaths: []string{"testdata/crds"},
		Kubelet:           kubelet.Options{OnEvent: events.add, Exec: testExec},
	})
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the hollow cluster:", err)
		code = 1
	}
	os.Exit(code)
}

// eventLog keeps the kubelet simulator's events for the tests to read.
type eventLog struct {
	sink atomic.Pointer[func(kubelet.Event)]
}

func (l *eventLog) add(e kubelet.Event) {
	if f := l.sink.Load(); f != nil {
		(*f)(e)
	}
}

// subscribe sends the events of one pod to a channel until the test ends.
func (l *eventLog) subscribe(t *testing.T, namespace, pod string) <-chan kubelet.Event {
	ch := make(chan kubelet.Event, 1000)
	f := func(e kubelet.Event) {
		if e.Namespace == namespace && e.Pod == pod {
			ch <- e
		}
	}
	l.sink.Store(&f)
	t.Cleanup(func() { l.sink.Store(nil) })
	return ch
}

func clientset(t *testing.T) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config())
	require.NoError(t, err)
	return cs
}

// namespace creates a namespace for the test and deletes it after.
func namespace(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

// addNodes adds n simulated nodes for the test and removes them after.
// Tests run one at a time, so a test's pods land on its own nodes.
func addNodes(t *testing.T, n int) []*kubelet.Node {
	t.Helper()
	var nodes []*kubelet.Node
	for i := range n {
		node, err := env.Kubelets().AddNode(context.Background(), fmt.Sprintf("%s-%d", nodePrefix(t), i))
		require.NoError(t, err)
		nodes = append(nodes, node)
		t.Cleanup(func() { _ = node.Remove(context.Background()) })
	}
	return nodes
}

var nodeSeq atomic.Int32

func nodePrefix(t *testing.T) string {
	return fmt.Sprintf("node-%d", nodeSeq.Add(1))
}

// eventually polls cond until it holds or the timeout passes, and fails the
// test with the last state cond described.
func eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string, error)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, state, err := cond(ctx)
		last = state
		return ok, err
	})
	require.NoError(t, err, "waiting %v for %s; last seen: %s", timeout, what, last)
}

func deployment(ns, name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](30),
					Containers: []corev1.Container{{
						Name:  "app",
						Image: "registry.k8s.io/pause:3.10",
						ReadinessProbe: &corev1.Probe{
							InitialDelaySeconds: 5,
							ProbeHandler:        corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}},
						},
					}},
				},
			},
		},
	}
}

// deploy creates a Deployment named app with n replicas and waits for its
// pods; see waitReady.
func deploy(t *testing.T, cs kubernetes.Interface, ns, app string, n int32) []corev1.Pod {
	t.Helper()
	_, err := cs.AppsV1().Deployments(ns).Create(context.Background(), deployment(ns, app, n), metav1.CreateOptions{})
	require.NoError(t, err)
	return waitReady(t, cs, ns, app, int(n))
}

// waitReady waits until the pods labelled app are exactly n, all Running
// and Ready, and returns them.
func waitReady(t *testing.T, cs kubernetes.Interface, ns, app string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	eventually(t, 60*time.Second, fmt.Sprintf("%d Running and Ready pods of %s, and no others", n, app), func(ctx context.Context) (bool, string, error) {
		ready, ps, desc, err := readyPods(ctx, cs, ns, "app="+app)
		pods = ps
		return ready == n && len(ps) == n, desc, err
	})
	return pods
}

// readyPods counts the pods of a selector that are Running and Ready and
// not being deleted, and says where each pod is.
func readyPods(ctx context.Context, cs kubernetes.Interface, ns, selector string) (int, []corev1.Pod, string, error) {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return 0, nil, "", err
	}
	ready := 0
	desc := ""
	for _, p := range pods.Items {
		if runningReady(&p) {
			ready++
		}
		desc += fmt.Sprintf("[%s on %q phase=%s ready=%v deleting=%v] ", p.Name, p.Spec.NodeName, p.Status.Phase, podReady(&p), p.DeletionTimestamp != nil)
	}
	return ready, pods.Items, desc, nil
}

// runningReady reports whether a pod is Running, Ready and not being deleted.
func runningReady(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && podReady(p)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
func sprint(args ...any) string                 { return fmt.Sprint(args...) }
