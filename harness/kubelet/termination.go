package kubelet

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Graceful termination, as the kubelet's killPod does it: the preStop hooks
// run, the containers get SIGTERM, and whatever still runs when the grace
// period is out gets SIGKILL; only then does the kubelet confirm the
// deletion. A simulated process does not stop early on SIGTERM: it takes
// its whole grace period, the slowest a real one may take, which is the
// timing a controller must live with.
const (
	// defaultGracePeriod is the API server's default of
	// spec.terminationGracePeriodSeconds.
	defaultGracePeriod = 30 * time.Second
	// minimumGracePeriod is the kubelet's floor for a kill
	// (pkg/kubelet/kuberuntime: minimumGracePeriodInSeconds).
	minimumGracePeriod = 2 * time.Second
)

// terminate runs the termination of a deleted pod: it starts it when first
// seen, and confirms the deletion once the grace period is out, or at once
// when no container of the pod runs (none was started, or all have
// exited).
func (s *Simulator) terminate(ctx context.Context, key string, pod *corev1.Pod) error {
	now := s.opts.Clock.Now()
	s.mu.Lock()
	st := s.pods[key]
	if st == nil || st.uid != pod.UID || !st.anyRunning() {
		s.mu.Unlock()
		return s.confirmDeletion(ctx, key, pod)
	}
	grace := gracePeriod(pod)
	used := min(max(grace, minimumGracePeriod), s.opts.MaxGracePeriod)
	first := st.terminatingSince.IsZero()
	if first {
		st.terminatingSince = now
	}
	// A second deletion may shorten the grace period: the end is computed
	// from the pod as it is now.
	end := st.terminatingSince.Add(s.opts.wall(used))
	s.mu.Unlock()

	if first {
		s.emit(Event{Kind: PodTerminating, Time: now, Node: pod.Spec.NodeName, Namespace: pod.Namespace, Pod: pod.Name,
			Grace: grace, GraceUsed: used})
		s.runPreStopHooks(ctx, pod, s.opts.wall(used))
	}
	if now.Before(end) {
		s.queue.AddAfter(key, end.Sub(now))
		return nil
	}
	return s.confirmDeletion(ctx, key, pod)
}

// gracePeriod is the pod's grace period for this deletion: the one the
// API server recorded for it, else the pod's own, else the default.
func gracePeriod(pod *corev1.Pod) time.Duration {
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		return time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return defaultGracePeriod
}

// runPreStopHooks runs the exec preStop hooks of the pod's running
// containers through Options.Exec, bounded by the grace period as the
// kubelet bounds them. Sleep and HTTP hooks need nothing run: their time
// counts within the grace period, which the simulated process takes
// whole anyway.
func (s *Simulator) runPreStopHooks(ctx context.Context, pod *corev1.Pod, within time.Duration) {
	for _, c := range pod.Spec.Containers {
		if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Exec == nil {
			continue
		}
		req := ExecRequest{Namespace: pod.Namespace, Pod: pod.Name, Container: c.Name, Command: c.Lifecycle.PreStop.Exec.Command}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			hookCtx, cancel := context.WithTimeout(ctx, within)
			defer cancel()
			res := s.opts.Exec(hookCtx, req)
			s.emit(Event{Kind: ContainerPreStop, Time: s.opts.Clock.Now(), Node: pod.Spec.NodeName, Namespace: pod.Namespace,
				Pod: pod.Name, Container: req.Container, Command: req.Command, Exit: ExitStatus{Code: int32(res.ExitCode)}})
		}()
	}
}

// anyRunning reports whether a container of the pod runs.
func (st *podState) anyRunning() bool {
	for _, c := range st.containers {
		if c.phase == containerRunning {
			return true
		}
	}
	return false
}

// Terminating counts the pods of the namespace in their grace period on a
// node that runs: each is still to go, with the writes and events that
// follow. A pod of a lost node is not counted: its deletion waits for the
// node.
func (s *Simulator) Terminating(namespace string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for key, st := range s.pods {
		if ns, _, _ := cache.SplitMetaNamespaceKey(key); ns == namespace && !st.terminatingSince.IsZero() && !st.node.silent() {
			n++
		}
	}
	return n
}
