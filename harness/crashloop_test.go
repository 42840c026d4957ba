package harness_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubeprop/kubeprop/harness/kubelet"
)

func barePod(ns, name string, policy corev1.RestartPolicy) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy:                 policy,
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			Containers:                    []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
}

// statusRecorder keeps every status of one pod that a watch delivers.
type statusRecorder struct {
	mu       sync.Mutex
	statuses []corev1.ContainerStatus
}

func recordStatuses(t *testing.T, cs kubernetes.Interface, ns, name string) *statusRecorder {
	w, err := cs.CoreV1().Pods(ns).Watch(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(),
	})
	require.NoError(t, err)
	t.Cleanup(w.Stop)
	r := &statusRecorder{}
	go func() {
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Modified && len(p.Status.ContainerStatuses) == 1 {
				r.mu.Lock()
				r.statuses = append(r.statuses, p.Status.ContainerStatuses[0])
				r.mu.Unlock()
			}
		}
	}()
	return r
}

// sawBackOff reports whether a status showed the container waiting in
// CrashLoopBackOff after restarts restarts, with the last exit recorded.
func (r *statusRecorder) sawBackOff(restarts int32, exitCode int32) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.statuses {
		if s.RestartCount == restarts && s.State.Waiting != nil && s.State.Waiting.Reason == "CrashLoopBackOff" &&
			s.LastTerminationState.Terminated != nil && s.LastTerminationState.Terminated.ExitCode == exitCode {
			return true
		}
	}
	return false
}

func nextEvent(t *testing.T, ch <-chan kubelet.Event, kind kubelet.EventKind, timeout time.Duration) kubelet.Event {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case e := <-ch:
			if e.Kind == kind {
				return e
			}
		case <-deadline:
			t.Fatalf("no %s event within %v", kind, timeout)
		}
	}
}

// TestCrashLoopBackOff kills a container again and again and measures the
// restart delays in cluster time. The kubelet restarts a container at once
// after its first crash (doBackOff finds no back-off entry yet), then waits
// 10 s, doubling to the 300 s cap; a container that ran 10 minutes starts
// over.
func TestCrashLoopBackOff(t *testing.T) {
	cs := clientset(t)
	ctx := context.Background()
	ns := namespace(t, cs)
	addNodes(t, 1)
	events := events.subscribe(t, ns, "crasher")
	statuses := recordStatuses(t, cs, ns, "crasher")
	_, err := cs.CoreV1().Pods(ns).Create(ctx, barePod(ns, "crasher", corev1.RestartPolicyAlways), metav1.CreateOptions{})
	require.NoError(t, err)
	nextEvent(t, events, kubelet.ContainerStarted, 30*time.Second)

	// crash kills the container and returns the cluster-time delay until
	// the kubelet started it again.
	crash := func(exitCode int32) time.Duration {
		t.Helper()
		// A kill right after the start can race the informer; retry until
		// the simulator sees the container running.
		eventually(t, 10*time.Second, "the container to be killable", func(ctx context.Context) (bool, string, error) {
			err := env.Kubelets().KillContainer(ctx, ns, "crasher", "app", kubelet.Failed(exitCode))
			return err == nil, fmt.Sprint(err), nil
		})
		exited := nextEvent(t, events, kubelet.ContainerExited, 10*time.Second)
		started := nextEvent(t, events, kubelet.ContainerStarted, env.WallDuration(400*time.Second))
		return env.ClusterDuration(started.Time.Sub(exited.Time))
	}

	want := []time.Duration{0, 10, 20, 40, 80, 160, 300, 300}
	var got []time.Duration
	for i, w := range want {
		w *= time.Second
		d := crash(int32(i + 1))
		got = append(got, d.Round(100*time.Millisecond))
		// A little scheduling delay is allowed, never an early start.
		require.GreaterOrEqual(t, d, w, "restart %d came early: delays so far %v", i+1, got)
		// 4 s of cluster time is 200 ms of wall time in these tests.
		require.LessOrEqual(t, d, w+max(4*time.Second, w/20), "restart %d came late: delays so far %v", i+1, got)
		if w > 0 {
			require.Eventually(t, func() bool { return statuses.sawBackOff(int32(i), int32(i+1)) }, 5*time.Second, 20*time.Millisecond,
				"no status showed CrashLoopBackOff with restartCount %d and the last exit code %d", i, i+1)
		}
	}
	t.Logf("restart delays (cluster time): %v", got)

	eventually(t, 5*time.Second, "the status to show the restarts and the last exit", func(ctx context.Context) (bool, string, error) {
		pod, err := cs.CoreV1().Pods(ns).Get(ctx, "crasher", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		st := pod.Status.ContainerStatuses[0]
		last := st.LastTerminationState.Terminated
		return st.RestartCount == int32(len(want)) && last != nil && last.ExitCode == int32(len(want)) &&
				st.State.Running != nil && pod.Status.Phase == corev1.PodRunning,
			fmt.Sprintf("phase=%s restartCount=%d state=%+v last=%+v", pod.Status.Phase, st.RestartCount, st.State, last), nil
	})

	// After 10 minutes of running the back-off is forgotten: the next crash
	// restarts at once and the one after waits 10 s again.
	time.Sleep(env.WallDuration(10*time.Minute + 10*time.Second))
	after := []time.Duration{crash(1), crash(2)}
	require.Less(t, after[0], 2*time.Second, "after 10 minutes of running, the restart should be immediate: %v", after)
	require.GreaterOrEqual(t, after[1], 10*time.Second, "after the reset, the back-off should start from 10 s: %v", after)
	require.LessOrEqual(t, after[1], 14*time.Second, "after the reset, the back-off should start from 10 s: %v", after)
}

// TestRestartPolicies checks the phases a pod ends in after a container
// exits, per restartPolicy.
func TestRestartPolicies(t *testing.T) {
	cs := clientset(t)
	ctx := context.Background()
	ns := namespace(t, cs)
	addNodes(t, 1)
	cases := []struct {
		name      string
		policy    corev1.RestartPolicy
		exit      kubelet.ExitStatus
		phase     corev1.PodPhase
		restarted bool
	}{
		{"never-fails", corev1.RestartPolicyNever, kubelet.OOMKilled, corev1.PodFailed, false},
		{"never-succeeds", corev1.RestartPolicyNever, kubelet.Completed, corev1.PodSucceeded, false},
		{"onfailure-succeeds", corev1.RestartPolicyOnFailure, kubelet.Completed, corev1.PodSucceeded, false},
		{"onfailure-restarts", corev1.RestartPolicyOnFailure, kubelet.Failed(2), corev1.PodRunning, true},
		{"always-restarts", corev1.RestartPolicyAlways, kubelet.Completed, corev1.PodRunning, true},
	}
	for _, c := range cases {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, barePod(ns, c.name, c.policy), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for _, c := range cases {
		eventually(t, 30*time.Second, c.name+" killed", func(ctx context.Context) (bool, string, error) {
			err := env.Kubelets().KillContainer(ctx, ns, c.name, "app", c.exit)
			return err == nil, fmt.Sprint(err), nil
		})
	}
	for _, c := range cases {
		eventually(t, 30*time.Second, fmt.Sprintf("%s in phase %s", c.name, c.phase), func(ctx context.Context) (bool, string, error) {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, c.name, metav1.GetOptions{})
			if err != nil || len(p.Status.ContainerStatuses) != 1 {
				return false, "", err
			}
			st := p.Status.ContainerStatuses[0]
			ok := p.Status.Phase == c.phase
			if c.restarted {
				ok = ok && st.RestartCount == 1 && st.State.Running != nil && st.LastTerminationState.Terminated != nil &&
					st.LastTerminationState.Terminated.Reason == c.exit.Reason
			} else {
				ok = ok && st.RestartCount == 0 && st.State.Terminated != nil &&
					st.State.Terminated.ExitCode == c.exit.Code && st.State.Terminated.Reason == c.exit.Reason
			}
			return ok, fmt.Sprintf("phase=%s status=%+v", p.Status.Phase, st.State), nil
		})
	}
}
