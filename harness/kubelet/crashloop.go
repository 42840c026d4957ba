package kubelet

import (
	"context"

	"fmt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"strings"
	"time"
)

// crashRunTime is how long, in cluster time, a crash-looping container
// runs before it crashes again.
const crashRunTime = time.Second

// CrashLoop makes a container crash with exit, starts times: a running
// container at once, then on each start after running for a second of
// cluster time. The kubelet's back-off spaces the restarts. A crash loop
// comes from the pod's template (a bad image, a bad config), so the same
// container of a pod that replaces it (a pod of the same controller owner,
// created later) crashes on its first starts too, until StopCrashLoops.
func (s *Simulator) CrashLoop(_ context.Context, namespace, pod, container string, starts int, exit ExitStatus) error {
	if starts < 1 {
		return fmt.Errorf("crash loop of container %s of pod %s/%s: starts is %d, it must be at least 1", container, namespace, pod, starts)
	}
	obj, st, c, err := s.lockContainer(namespace, pod, container, "crash-looping")
	if err != nil {
		return err
	}
	defer s.queue.Add(namespace + "/" + pod)
	defer s.mu.Unlock()
	c.crashStarts, c.crashExit = starts, exit
	if owner := metav1.GetControllerOf(obj); owner != nil {
		if s.ownerCrashes == nil {
			s.ownerCrashes = map[string]ownerCrash{}
		}
		s.ownerCrashes[ownerCrashKey(namespace, string(owner.UID), container)] = ownerCrash{starts: starts, exit: exit}
	}
	if c.phase == containerRunning {
		c.crashStarts--
		s.exit(obj, st, c, exit, s.opts.Clock.Now())
	}
	return nil
}

// StopCrashLoops ends every crash loop in a namespace: containers start
// normally from their next start on.
func (s *Simulator) StopCrashLoops(namespace string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, st := range s.pods {
		if ns, _, _ := strings.Cut(key, "/"); ns != namespace {
			continue
		}
		for _, c := range st.containers {
			c.crashStarts = 0
		}
	}
	for key := range s.ownerCrashes {
		if strings.HasPrefix(key, namespace+"/") {
			delete(s.ownerCrashes, key)
		}
	}
}

func ownerCrashKey(namespace, owner, container string) string {
	return namespace + "/" + owner + "/" + container
}

// inheritCrashLoop gives a new pod's container the crash loop of its
// owner's, if any. s.mu is held.
func (s *Simulator) inheritCrashLoop(pod *corev1.Pod, c *containerState) {
	owner := metav1.GetControllerOf(pod)
	if owner == nil {
		return
	}
	if crash, ok := s.ownerCrashes[ownerCrashKey(pod.Namespace, string(owner.UID), c.name)]; ok {
		c.crashStarts, c.crashExit = crash.starts, crash.exit
	}
}

// SetReady overrides a container's readiness: false makes it unready (its
// readiness probe failing) until set true again.
func (s *Simulator) SetReady(_ context.Context, namespace, pod, container string, ready bool) error {
	_, _, c, err := s.lockContainer(namespace, pod, container, "setting the readiness of")
	if err != nil {
		return err
	}
	defer s.queue.Add(namespace + "/" + pod)
	defer s.mu.Unlock()
	c.unready = !ready
	return nil
}
