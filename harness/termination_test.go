package harness_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness"
	"github.com/kubeprop/kubeprop/harness/kubelet"
	"github.com/kubeprop/kubeprop/properties"
)

// gracefulPod is a bare pod with a grace period and an exec preStop hook.
func gracefulPod(ns, name string, grace int64) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To(grace),
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.k8s.io/pause:3.10",
				Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"echo", "draining"}}}},
			}},
		},
	}
}

// runningPod creates the pod and waits until it runs.
func runningPod(t *testing.T, cs kubernetes.Interface, pod *corev1.Pod) {
	t.Helper()
	_, err := cs.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, 60*time.Second, "pod "+pod.Name+" Running", func(ctx context.Context) (bool, string, error) {
		got, err := cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return got.Status.Phase == corev1.PodRunning, string(got.Status.Phase), nil
	})
}

// gone waits until the pod is gone and returns when that was seen.
func gone(t *testing.T, cs kubernetes.Interface, ns, name string, within time.Duration) time.Time {
	t.Helper()
	eventually(t, within, "pod "+name+" gone", func(ctx context.Context) (bool, string, error) {
		got, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, "", err
		}
		return false, fmt.Sprintf("deletionTimestamp %v", got.DeletionTimestamp), nil
	})
	return time.Now()
}

// TestGracefulTermination: a deleted pod's containers take its grace
// period (cluster time) before the simulated kubelet confirms the
// deletion, its exec preStop hook runs through the exec hook, a grace
// period beyond the cap is cut to it, and a second deletion with a shorter
// grace period shortens the wait.
func TestGracefulTermination(t *testing.T) {
	cs := clientset(t)
	ctx := context.Background()
	ns := namespace(t, cs)
	addNodes(t, 1)
	wall := func(cluster time.Duration) time.Duration { return cluster / testTimeScale }

	// 40 s of grace: 2 s of wall time at the test's time scale.
	runningPod(t, cs, gracefulPod(ns, "graceful", 40))
	seen := events.subscribe(t, ns, "graceful")
	deleted := time.Now()
	require.NoError(t, cs.CoreV1().Pods(ns).Delete(ctx, "graceful", metav1.DeleteOptions{}))
	require.Never(t, func() bool {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, "graceful", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, wall(30*time.Second), 50*time.Millisecond, "the pod went before its grace period was out")
	took := gone(t, cs, ns, "graceful", 20*time.Second).Sub(deleted)
	require.GreaterOrEqual(t, took, wall(40*time.Second))
	terminating := nextEvent(t, seen, kubelet.PodTerminating, 10*time.Second)
	preStop := nextEvent(t, seen, kubelet.ContainerPreStop, 10*time.Second)
	require.Equal(t, 40*time.Second, terminating.Grace)
	require.Equal(t, 40*time.Second, terminating.GraceUsed)
	require.Equal(t, []string{"echo", "draining"}, preStop.Command)
	require.Equal(t, "app", preStop.Container)

	// An hour of grace is cut to the 60 s cap (3 s of wall time); a
	// second deletion with 1 s (the kubelet's floor makes it 2 s) ends it
	// well before that.
	runningPod(t, cs, gracefulPod(ns, "hour", 3600))
	seen = events.subscribe(t, ns, "hour")
	require.NoError(t, cs.CoreV1().Pods(ns).Delete(ctx, "hour", metav1.DeleteOptions{}))
	terminating = nextEvent(t, seen, kubelet.PodTerminating, 10*time.Second)
	require.Equal(t, time.Hour, terminating.Grace)
	require.Equal(t, 60*time.Second, terminating.GraceUsed)
	shortened := time.Now()
	require.NoError(t, cs.CoreV1().Pods(ns).Delete(ctx, "hour", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1)}))
	took = gone(t, cs, ns, "hour", 20*time.Second).Sub(shortened)
	require.Less(t, took, wall(60*time.Second), "the shorter grace period of the second deletion was not taken")
}

// TestGraceCutInTimeline: a case's timeline says when a pod's grace period
// was cut to the cap.
func TestGraceCutInTimeline(t *testing.T) {
	spec := harness.Spec{
		Fixtures: func(ns string) []client.Object {
			d := deployment(ns, "slow", 1)
			d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](7 * 24 * 3600)
			return []client.Object{d}
		},
		// kube-controller-manager's Deployment controller is the controller.
		Controller: harness.Func(func(ctx context.Context, _ *rest.Config) error {
			<-ctx.Done()
			return nil
		}),
		Properties: []properties.Property{properties.Converges("no pods", func(s properties.State) error {
			if pods := s.ByKind("Pod"); len(pods) != 0 {
				return fmt.Errorf("%d pods", len(pods))
			}
			return nil
		}, properties.ConvergeOptions{Within: 30 * time.Second})},
		Setup: 30 * time.Second, SettleCap: 5 * time.Second,
		Ready: writesNothing,
	}
	rep, err := harness.Run(context.Background(), env, spec, []faults.Step{faults.ScaleChangeStep{Object: 0, Field: "spec.replicas", Value: 0}})
	require.NoError(t, err)
	require.False(t, rep.Failed(), "%+v", rep.Failures)
	timeline := strings.Join(rep.Timeline, "\n")
	require.Contains(t, timeline, "its grace period 168h0m0s is cut to the simulated kubelets' cap of 1m0s", timeline)
}
