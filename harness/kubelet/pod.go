package kubelet

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// podState is the simulator's view of a pod on one of its nodes.
type podState struct {
	uid        types.UID
	node       *Node
	ip         string
	startTime  time.Time
	containers []*containerState // in spec order
	// terminatingSince is when the simulator first saw the pod deleted
	// (zero while it is not).
	terminatingSince time.Time
}

// syncPod brings one pod's simulated containers up to the present and
// writes its status when it changed, as the kubelet's pod worker does.
func (s *Simulator) syncPod(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	pod, err := s.podLister.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		s.forgetPod(key)
		return nil
	}
	if err != nil {
		return err
	}
	node, ok := s.Node(pod.Spec.NodeName)
	if !ok || node.silent() {
		// Not ours, or its node is lost: nothing is written for it.
		return nil
	}
	if pod.DeletionTimestamp != nil {
		return s.terminate(ctx, key, pod)
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil
	}

	s.mu.Lock()
	st := s.pods[key]
	now := s.opts.Clock.Now()
	if st == nil || st.uid != pod.UID {
		st = s.newPodState(pod, node, now)
		s.pods[key] = st
	}
	next := s.advance(pod, st, now)
	status := s.podStatus(pod, st, now)
	s.mu.Unlock()

	if !next.IsZero() {
		s.queue.AddAfter(key, next.Sub(now))
	}
	if statusEqual(&pod.Status, status) {
		return nil
	}
	return s.patchStatus(ctx, pod, status)
}

func (s *Simulator) newPodState(pod *corev1.Pod, node *Node, now time.Time) *podState {
	st := &podState{uid: pod.UID, node: node, startTime: now}
	node.mu.Lock()
	st.ip = podIP(node.index, node.podSeq)
	node.podSeq++
	node.mu.Unlock()
	for _, c := range pod.Spec.Containers {
		st.containers = append(st.containers, &containerState{
			name:    c.Name,
			image:   c.Image,
			phase:   containerCreating,
			startAt: now.Add(s.opts.wall(s.opts.ContainerStartDelay)),
			probes:  probesOf(&c),
		})
		s.inheritCrashLoop(pod, st.containers[len(st.containers)-1])
	}
	return st
}

// advance moves the pod's containers through every transition due by now
// and returns when the next one is due (zero if none is).
func (s *Simulator) advance(pod *corev1.Pod, st *podState, now time.Time) time.Time {
	var next time.Time
	later := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, c := range st.containers {
		switch c.phase {
		case containerCreating:
			if !now.Before(c.startAt) {
				s.startContainer(pod, st, c, now)
			}
		case containerBackOff:
			if !now.Before(c.startAt) {
				key := backoffKey(pod, c.name)
				if s.backoff.IsInBackOffSince(key, c.finishedAt) {
					// The timer fired a hair early for the back-off's
					// own clock reading; look again shortly.
					c.startAt = now.Add(time.Millisecond)
				} else {
					s.backoff.Next(key, c.finishedAt)
					c.restartCount++
					s.startContainer(pod, st, c, now)
				}
			}
		}
		if c.phase == containerRunning && !c.crashAt.IsZero() && !now.Before(c.crashAt) {
			s.exit(pod, st, c, c.crashExit, now)
		}
		// A failing startup or liveness probe: the kubelet kills the
		// container (SIGKILL once its grace is out: 137).
		if c.phase == containerRunning && !c.probeKillAt.IsZero() && !now.Before(c.probeKillAt) {
			s.exit(pod, st, c, Killed, now)
		}
		switch c.phase {
		case containerCreating, containerBackOff:
			later(c.startAt)
		case containerRunning:
			later(c.readyAt)
			later(c.startedOK)
			if !c.crashAt.IsZero() {
				later(c.crashAt)
			}
			if !c.probeKillAt.IsZero() {
				later(c.probeKillAt)
			}
		}
	}
	return next
}

func (s *Simulator) startContainer(pod *corev1.Pod, st *podState, c *containerState, now time.Time) {
	c.phase = containerRunning
	c.startedAt = now
	s.startProbes(c, now)
	c.crashAt = time.Time{}
	if c.crashStarts > 0 {
		c.crashStarts--
		c.crashAt = now.Add(s.opts.wall(crashRunTime))
	}
	s.emit(Event{Kind: ContainerStarted, Time: now, Node: st.node.name, Namespace: pod.Namespace, Pod: pod.Name,
		Container: c.name, RestartCount: c.restartCount})
}

// podStatus renders the pod's status as the kubelet writes it.
func (s *Simulator) podStatus(pod *corev1.Pod, st *podState, now time.Time) *corev1.PodStatus {
	status := pod.Status.DeepCopy()
	node := st.node
	status.HostIP = nodeIP(node.index)
	status.HostIPs = []corev1.HostIP{{IP: status.HostIP}}
	status.StartTime = ptr.To(metav1.NewTime(st.startTime))
	status.ObservedGeneration = pod.Generation

	podKey := fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
	var statuses []corev1.ContainerStatus
	allReady, anyCreating, allDone, allSucceeded := true, false, true, true
	for _, c := range st.containers {
		statuses = append(statuses, c.status(string(pod.UID), now, s.clusterBackOff(pod, c.name), podKey))
		allReady = allReady && c.ready(now)
		anyCreating = anyCreating || c.phase == containerCreating
		allDone = allDone && c.phase == containerTerminated
		allSucceeded = allSucceeded && c.phase == containerTerminated && c.exit.Code == 0
	}
	// The kubelet sorts container statuses by name.
	sort.Slice(statuses, func(i, j int) bool { return statuses[i].Name < statuses[j].Name })
	status.ContainerStatuses = statuses
	status.InitContainerStatuses = initContainerStatuses(pod, st)

	switch {
	case anyCreating:
		status.Phase = corev1.PodPending
	case allDone && allSucceeded:
		status.Phase = corev1.PodSucceeded
	case allDone:
		status.Phase = corev1.PodFailed
	default:
		status.Phase = corev1.PodRunning
	}
	if !anyCreating {
		status.PodIP = st.ip
		status.PodIPs = []corev1.PodIP{{IP: st.ip}}
	}

	readyReason := ""
	if !allReady {
		readyReason = "ContainersNotReady"
	}
	if allDone {
		readyReason = "PodCompleted"
	}
	setCondition(status, corev1.PodReadyToStartContainers, !allDone, "", now)
	setCondition(status, corev1.PodInitialized, true, "", now)
	setCondition(status, corev1.ContainersReady, allReady && !allDone, readyReason, now)
	setCondition(status, corev1.PodReady, allReady && !allDone, readyReason, now)
	for i := range status.Conditions {
		status.Conditions[i].ObservedGeneration = pod.Generation
	}
	return status
}

// initContainerStatuses reports init containers as run to completion when
// the sandbox was created: the simulator does not model their failures.
func initContainerStatuses(pod *corev1.Pod, st *podState) []corev1.ContainerStatus {
	var out []corev1.ContainerStatus
	for _, c := range pod.Spec.InitContainers {
		out = append(out, corev1.ContainerStatus{
			Name:    c.Name,
			Image:   c.Image,
			ImageID: imageID(c.Image),
			Ready:   true,
			Started: ptr.To(false),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 0, Reason: "Completed",
				StartedAt:  metav1.NewTime(st.startTime),
				FinishedAt: metav1.NewTime(st.startTime),
			}},
		})
	}
	return out
}

// setCondition sets a pod condition, keeping its transition time when its
// status did not change.
func setCondition(status *corev1.PodStatus, typ corev1.PodConditionType, ok bool, reason string, now time.Time) {
	want := corev1.ConditionFalse
	if ok {
		want = corev1.ConditionTrue
		reason = ""
	}
	for i := range status.Conditions {
		c := &status.Conditions[i]
		if c.Type != typ {
			continue
		}
		if c.Status != want {
			c.Status = want
			c.LastTransitionTime = metav1.NewTime(now)
		}
		c.Reason = reason
		return
	}
	status.Conditions = append(status.Conditions, corev1.PodCondition{
		Type: typ, Status: want, Reason: reason, LastTransitionTime: metav1.NewTime(now),
	})
}

// statusEqual compares statuses as the API server stores them: timestamps
// at second precision.
func statusEqual(a, b *corev1.PodStatus) bool {
	return apiequality.Semantic.DeepEqual(roundTrip(a), roundTrip(b))
}

func roundTrip(s *corev1.PodStatus) *corev1.PodStatus {
	b, err := json.Marshal(s)
	if err != nil {
		return s
	}
	var out corev1.PodStatus
	if err := json.Unmarshal(b, &out); err != nil {
		return s
	}
	return &out
}

// patchStatus writes the status with a strategic merge patch that carries
// the pod's UID as a precondition, as the kubelet's status manager does.
func (s *Simulator) patchStatus(ctx context.Context, pod *corev1.Pod, status *corev1.PodStatus) error {
	oldData, err := json.Marshal(corev1.Pod{Status: pod.Status})
	if err != nil {
		return err
	}
	newData, err := json.Marshal(corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: pod.UID}, Status: *status})
	if err != nil {
		return err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, corev1.Pod{})
	if err != nil {
		return fmt.Errorf("kubelet simulator: diffing the status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	_, err = s.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("kubelet simulator: writing the status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// confirmDeletion stops the pod's containers and deletes it with grace 0,
// as the kubelet does once the pod's containers have stopped: graceful
// deletion completes only when the kubelet confirms it.
func (s *Simulator) confirmDeletion(ctx context.Context, key string, pod *corev1.Pod) error {
	err := s.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      metav1.NewUIDPreconditions(string(pod.UID)),
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("kubelet simulator: confirming the deletion of pod %s: %w", key, err)
	}
	s.forgetPod(key)
	s.emit(Event{Kind: PodDeleted, Time: s.opts.Clock.Now(), Node: pod.Spec.NodeName, Namespace: pod.Namespace, Pod: pod.Name})
	return nil
}

// forgetPod drops a gone pod's state and its containers' back-off
// entries, as the kubelet's pod cleanup does: nothing of a pod outlives
// it, over thousands of cases.
func (s *Simulator) forgetPod(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.pods[key]
	delete(s.pods, key)
	if st == nil {
		return
	}
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: st.uid}}
	for _, c := range st.containers {
		s.backoff.DeleteEntry(backoffKey(pod, c.name))
	}
}
