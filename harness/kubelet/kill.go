package kubelet

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// KillContainer ends a running container with exit, as an OOM kill or a
// crash would. The kubelet then restarts it per the pod's restartPolicy:
// at once after the first crash, then with CrashLoopBackOff (10 s, doubling
// to 300 s, reset once the container has run for 10 minutes, all in cluster
// time), showing state.waiting.reason CrashLoopBackOff meanwhile and keeping
// lastState.terminated and restartCount. With restartPolicy Never, or
// OnFailure and exit code 0, the container stays terminated and the pod ends
// Succeeded or Failed.
//
// The error wraps ErrUnknown when the simulator does not run that pod or
// container, and ErrNotRunning when the container is not running or the
// node is lost.
func (s *Simulator) KillContainer(ctx context.Context, namespace, pod, container string, exit ExitStatus) error {
	obj, st, c, err := s.lockContainer(namespace, pod, container, "killing")
	if err != nil {
		return err
	}
	defer s.queue.Add(namespace + "/" + pod)
	defer s.mu.Unlock()
	if c.phase != containerRunning {
		// Still being created, backing off, or terminated.
		return fmt.Errorf("killing container %s of pod %s/%s: it is %w", container, namespace, pod, ErrNotRunning)
	}
	s.exit(obj, st, c, exit, s.opts.Clock.Now())
	return nil
}

// exit ends a running container and applies the restart policy. s.mu is
// held.
func (s *Simulator) exit(pod *corev1.Pod, st *podState, c *containerState, exit ExitStatus, now time.Time) {
	c.finishedAt, c.exit, c.crashAt, c.probeKillAt = now, exit, time.Time{}, time.Time{}
	s.emit(Event{Kind: ContainerExited, Time: now, Node: st.node.name, Namespace: pod.Namespace, Pod: pod.Name, Container: c.name,
		RestartCount: c.restartCount, Exit: exit})
	s.restartOrStop(pod, st, c, now)
}

// lockContainer finds a container the simulator runs and returns with s.mu
// held; on error s.mu is not held. The error wraps ErrUnknown for a pod or
// container the simulator does not run, and ErrNotRunning for one on a
// lost node or not synced yet.
func (s *Simulator) lockContainer(namespace, pod, container, doing string) (*corev1.Pod, *podState, *containerState, error) {
	key := namespace + "/" + pod
	obj, err := s.podLister.Pods(namespace).Get(pod)
	if apierrors.IsNotFound(err) {
		return nil, nil, nil, fmt.Errorf("%s container %s of pod %s: the pod is %w (not bound to a simulated node, or gone)", doing, container, key, ErrUnknown)
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s container %s of pod %s: %w", doing, container, key, err)
	}
	node, ok := s.Node(obj.Spec.NodeName)
	if !ok {
		return nil, nil, nil, fmt.Errorf("%s container %s of pod %s: its node %q is %w", doing, container, key, obj.Spec.NodeName, ErrUnknown)
	}
	if node.silent() {
		return nil, nil, nil, fmt.Errorf("%s container %s of pod %s: node %s is lost, so the container is %w as far as anyone can tell", doing, container, key, node.name, ErrNotRunning)
	}
	if !slices.ContainsFunc(obj.Spec.Containers, func(c corev1.Container) bool { return c.Name == container }) {
		return nil, nil, nil, fmt.Errorf("%s container %s of pod %s: the pod has no such container, it is %w", doing, container, key, ErrUnknown)
	}
	s.mu.Lock()
	if st := s.pods[key]; st != nil && st.uid == obj.UID {
		for _, c := range st.containers {
			if c.name == container {
				return obj, st, c, nil
			}
		}
	}
	s.mu.Unlock()
	return nil, nil, nil, fmt.Errorf("%s container %s of pod %s: it has not started yet, it is %w", doing, container, key, ErrNotRunning)
}

// restartOrStop applies the restart policy to a container that just exited,
// with the kubelet's doBackOff: a container not in back-off restarts at once
// and its back-off advances; one in back-off waits until it ends.
func (s *Simulator) restartOrStop(pod *corev1.Pod, st *podState, c *containerState, now time.Time) {
	policy := pod.Spec.RestartPolicy
	if policy == corev1.RestartPolicyNever || (policy == corev1.RestartPolicyOnFailure && c.exit.Code == 0) {
		c.phase = containerTerminated
		return
	}
	c.last = c.terminated(string(pod.UID))
	key := backoffKey(pod, c.name)
	if s.backoff.IsInBackOffSince(key, c.finishedAt) {
		c.phase = containerBackOff
		c.startAt = c.finishedAt.Add(s.backoff.Get(key))
		s.emit(Event{Kind: ContainerBackOff, Time: now, Node: st.node.name, Namespace: pod.Namespace, Pod: pod.Name,
			Container: c.name, RestartCount: c.restartCount, BackOff: s.clusterBackOff(pod, c.name)})
		return
	}
	s.backoff.Next(key, c.finishedAt)
	c.restartCount++
	s.startContainer(pod, st, c, now)
}

// backoffKey identifies a container for the back-off, as the kubelet's
// GetBackoffKey does: a new pod (new UID) starts from the beginning.
func backoffKey(pod *corev1.Pod, container string) string {
	return fmt.Sprintf("%s_%s_%s_%s", pod.Name, pod.Namespace, pod.UID, container)
}

// clusterBackOff is the container's current back-off in cluster time.
func (s *Simulator) clusterBackOff(pod *corev1.Pod, container string) time.Duration {
	d := time.Duration(float64(s.backoff.Get(backoffKey(pod, container))) * s.opts.TimeScale)
	return d.Round(time.Second)
}
