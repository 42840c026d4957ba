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
	key := namespace + "/" + pod
	obj, err := s.podLister.Pods(namespace).Get(pod)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("killing container %s of pod %s: the pod is %w (not bound to a simulated node, or gone)", container, key, ErrUnknown)
	}
	if err != nil {
		return fmt.Errorf("killing container %s of pod %s: %w", container, key, err)
	}
	node, ok := s.Node(obj.Spec.NodeName)
	if !ok {
		return fmt.Errorf("killing container %s of pod %s: its node %q is %w", container, key, obj.Spec.NodeName, ErrUnknown)
	}
	if node.silent() {
		return fmt.Errorf("killing container %s of pod %s: node %s is lost, so the container is %w as far as anyone can tell", container, key, node.name, ErrNotRunning)
	}

	if !slices.ContainsFunc(obj.Spec.Containers, func(c corev1.Container) bool { return c.Name == container }) {
		return fmt.Errorf("killing container %s of pod %s: the pod has no such container, it is %w", container, key, ErrUnknown)
	}

	s.mu.Lock()
	st := s.pods[key]
	var c *containerState
	if st != nil && st.uid == obj.UID {
		for _, cs := range st.containers {
			if cs.name == container {
				c = cs
			}
		}
	}
	if c == nil || c.phase != containerRunning {
		// Not synced yet, still being created, backing off, or terminated.
		s.mu.Unlock()
		return fmt.Errorf("killing container %s of pod %s: it is %w", container, key, ErrNotRunning)
	}
	now := s.opts.Clock.Now()
	c.finishedAt, c.exit = now, exit
	s.emit(Event{Kind: ContainerExited, Time: now, Node: node.name, Namespace: namespace, Pod: pod, Container: container,
		RestartCount: c.restartCount, Exit: exit})
	s.restartOrStop(obj, st, c, now)
	s.mu.Unlock()
	s.queue.Add(key)
	return nil
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
