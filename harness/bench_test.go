package harness_test

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeprop/kubeprop/harness"
)

// BenchmarkColdStart measures a hollow cluster's start until it has bound a
// pod to a simulated node: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and the kubelet simulator.
func BenchmarkColdStart(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		e, err := harness.Start(harness.EnvOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := e.Kubelets().AddNode(ctx, "cold"); err != nil {
			b.Fatal(err)
		}
		cs := kubernetes.NewForConfigOrDie(e.Config())
		if _, err := cs.CoreV1().Pods("default").Create(ctx, barePod("default", "first", corev1.RestartPolicyAlways), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			p, err := cs.CoreV1().Pods("default").Get(ctx, "first", metav1.GetOptions{})
			return err == nil && p.Spec.NodeName != "", nil
		})
		if err != nil {
			b.Fatal("the pod was not bound:", err)
		}
		b.StopTimer()
		if err := e.Stop(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkPodsToReady creates 1000 pods over 100 simulated nodes and waits
// for all to be Running and Ready, on a cluster of its own at real time (a
// node's heartbeats as often as on a real cluster). "scheduled" goes
// through the real scheduler, whose client is limited to 50 requests per
// second by default; "prebound" names the node in the pod, so it measures
// the simulator. It reports pods per second from the first create to the
// last Ready, and this process's CPU time, heap in use and allocations
// (the kubelet simulator and its informer, the creating client, and the
// informer that counts Ready pods).
func BenchmarkPodsToReady(b *testing.B) {
	const nodes, pods = 100, 1000
	ctx := context.Background()
	e, err := harness.Start(harness.EnvOptions{TimeScale: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Stop()
	for i := range nodes {
		if _, err := e.Kubelets().AddNode(ctx, fmt.Sprintf("bench-%03d", i)); err != nil {
			b.Fatal(err)
		}
	}
	cs := kubernetes.NewForConfigOrDie(e.Config())
	round := 0
	for _, prebound := range []bool{false, true} {
		name := "scheduled"
		if prebound {
			name = "prebound"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				round++
				ns := fmt.Sprintf("bench-%d", round)
				if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
					b.Fatal(err)
				}
				ready := countReady(b, cs, ns)
				runtime.GC()
				var before runtime.MemStats
				runtime.ReadMemStats(&before)
				cpuBefore := cpuTime()
				start := time.Now()
				var g errgroup.Group
				g.SetLimit(8)
				for i := range pods {
					g.Go(func() error {
						p := barePod(ns, fmt.Sprintf("p-%04d", i), corev1.RestartPolicyAlways)
						if prebound {
							p.Spec.NodeName = fmt.Sprintf("bench-%03d", i%nodes)
						}
						_, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
						return err
					})
				}
				if err := g.Wait(); err != nil {
					b.Fatal(err)
				}
				err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Minute, true, func(context.Context) (bool, error) {
					return ready() == pods, nil
				})
				if err != nil {
					b.Fatalf("%d of %d pods Ready: %v", ready(), pods, err)
				}
				elapsed := time.Since(start)
				var after runtime.MemStats
				runtime.ReadMemStats(&after)
				b.ReportMetric(pods/elapsed.Seconds(), "pods/s")
				b.ReportMetric((cpuTime() - cpuBefore).Seconds(), "process-cpu-s")
				b.ReportMetric(float64(after.HeapInuse)/(1<<20), "heap-MiB")
				b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/(1<<20), "alloc-MiB")
			}
		})
	}
}

// countReady watches the pods of ns and returns a func that counts the
// Running and Ready ones.
func countReady(b *testing.B, cs kubernetes.Interface, ns string) func() int {
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	lister := factory.Core().V1().Pods().Lister()
	stop := make(chan struct{})
	b.Cleanup(func() { close(stop); factory.Shutdown() })
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	return func() int {
		pods, _ := lister.List(labels.Everything())
		n := 0
		for _, p := range pods {
			if runningReady(p) {
				n++
			}
		}
		return n
	}
}

// cpuTime is this process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
