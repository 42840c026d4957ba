package kubelet

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// crashLoop runs one container's restarts on a fake clock, without an API
// server: the back-off decisions alone.
type crashLoop struct {
	t     *testing.T
	clock *clocktesting.FakeClock
	sim   *Simulator
	pod   *corev1.Pod
	st    *podState
	c     *containerState
}

func newCrashLoop(t *testing.T, policy corev1.RestartPolicy, timeScale float64) *crashLoop {
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := Options{Clock: clock, TimeScale: timeScale}.withDefaults()
	sim := &Simulator{opts: opts, backoff: newCrashLoopBackOff(opts)}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid-1"},
		Spec:       corev1.PodSpec{RestartPolicy: policy, Containers: []corev1.Container{{Name: "app"}}},
	}
	st := sim.newPodState(pod, &Node{name: "n"}, clock.Now())
	l := &crashLoop{t: t, clock: clock, sim: sim, pod: pod, st: st, c: st.containers[0]}
	l.clock.Step(opts.wall(opts.ContainerStartDelay))
	sim.advance(pod, st, clock.Now())
	require.Equal(t, containerRunning, l.c.phase)
	return l
}

// crash kills the container, lets the clock run until it restarts, and
// returns the delay in cluster time (-1 if it does not restart).
func (l *crashLoop) crash(exit ExitStatus) time.Duration {
	now := l.clock.Now()
	l.c.finishedAt, l.c.exit = now, exit
	l.sim.restartOrStop(l.pod, l.st, l.c, now)
	switch l.c.phase {
	case containerRunning:
		return 0
	case containerTerminated:
		return -1
	}
	require.Equal(l.t, containerBackOff, l.c.phase)
	wait := l.c.startAt.Sub(now)
	// Not a moment early.
	l.clock.Step(wait - time.Millisecond)
	l.sim.advance(l.pod, l.st, l.clock.Now())
	require.Equal(l.t, containerBackOff, l.c.phase, "restarted before its back-off ended")
	l.clock.Step(time.Millisecond)
	l.sim.advance(l.pod, l.st, l.clock.Now())
	require.Equal(l.t, containerRunning, l.c.phase)
	return time.Duration(float64(wait) * l.sim.opts.TimeScale).Round(time.Millisecond)
}

func TestCrashLoopBackOffSequence(t *testing.T) {
	for _, scale := range []float64{1, 20, 500} {
		l := newCrashLoop(t, corev1.RestartPolicyAlways, scale)
		var got []time.Duration
		for range 9 {
			got = append(got, l.crash(Killed))
		}
		s := time.Second
		require.Equal(t, []time.Duration{0, 10 * s, 20 * s, 40 * s, 80 * s, 160 * s, 300 * s, 300 * s, 300 * s}, got, "TimeScale %v", scale)
		require.Equal(t, int32(9), l.c.restartCount)
		require.Equal(t, int32(137), l.c.last.ExitCode)

		// Ten minutes of running forgets the back-off; a little less does not.
		l.clock.Step(l.sim.opts.wall(599 * time.Second))
		require.Equal(t, 300*s, l.crash(OOMKilled), "TimeScale %v", scale)
		l.clock.Step(l.sim.opts.wall(601 * time.Second))
		require.Equal(t, []time.Duration{0, 10 * s}, []time.Duration{l.crash(OOMKilled), l.crash(OOMKilled)}, "TimeScale %v", scale)
	}
}

func TestRestartPolicy(t *testing.T) {
	cases := []struct {
		policy  corev1.RestartPolicy
		exit    ExitStatus
		restart bool
	}{
		{corev1.RestartPolicyAlways, Completed, true},
		{corev1.RestartPolicyAlways, Failed(1), true},
		{corev1.RestartPolicyOnFailure, Failed(1), true},
		{corev1.RestartPolicyOnFailure, Completed, false},
		{corev1.RestartPolicyNever, Failed(1), false},
		{corev1.RestartPolicyNever, Completed, false},
	}
	for _, c := range cases {
		l := newCrashLoop(t, c.policy, 1)
		d := l.crash(c.exit)
		require.Equal(t, c.restart, d >= 0, "%s after %+v", c.policy, c.exit)
	}
}

func TestPodStatusPhases(t *testing.T) {
	l := newCrashLoop(t, corev1.RestartPolicyNever, 1)
	now := l.clock.Now()
	st := l.sim.podStatus(l.pod, l.st, now)
	require.Equal(t, corev1.PodRunning, st.Phase)
	require.NotEmpty(t, st.PodIP)
	require.True(t, podCondition(st, corev1.PodReady))

	l.crash(Failed(3))
	st = l.sim.podStatus(l.pod, l.st, now)
	require.Equal(t, corev1.PodFailed, st.Phase)
	require.False(t, podCondition(st, corev1.PodReady))
	require.Equal(t, int32(3), st.ContainerStatuses[0].State.Terminated.ExitCode)
}

func podCondition(st *corev1.PodStatus, typ corev1.PodConditionType) bool {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func TestNodeConditionsKeepTransitionTimes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	first := nodeConditions(nil, t0)
	require.True(t, conditionsCurrent(first))
	later := nodeConditions(first, t0.Add(time.Minute))
	for i := range later {
		require.Equal(t, first[i].LastTransitionTime, later[i].LastTransitionTime)
		require.Equal(t, t0.Add(time.Minute), later[i].LastHeartbeatTime.Time)
	}
	// After the node lifecycle controller marked it Unknown, Ready moves.
	unknown := append([]corev1.NodeCondition(nil), later...)
	unknown[3].Status = corev1.ConditionUnknown
	require.False(t, conditionsCurrent(unknown))
	recovered := nodeConditions(unknown, t0.Add(2*time.Minute))
	require.Equal(t, t0.Add(2*time.Minute), recovered[3].LastTransitionTime.Time)
}

func TestAddressesAreDistinct(t *testing.T) {
	seen := map[string]bool{}
	for node := range 300 {
		ip := nodeIP(node)
		require.False(t, seen[ip], "node IP %s twice", ip)
		seen[ip] = true
	}
	pods := map[string]bool{}
	for n := range 253 {
		ip := podIP(7, n)
		require.False(t, pods[ip], "pod IP %s twice", ip)
		pods[ip] = true
	}
}

func TestOptionsValidate(t *testing.T) {
	require.ErrorContains(t, Options{TimeScale: 0.5}.validate(), "TimeScale 0.5")
	require.ErrorContains(t, Options{TimeScale: 1, Workers: -1}.withDefaults().validate(), "Workers -1")
	require.NoError(t, Options{}.withDefaults().validate())
}

func TestCrashLoopAndReadiness(t *testing.T) {
	l := newCrashLoop(t, corev1.RestartPolicyAlways, 1)
	l.c.crashStarts, l.c.crashExit = 3, Failed(3)
	// The running container crashes at once and restarts at once (first
	// crash); each start then runs a second and crashes, with back-off.
	l.c.crashStarts--
	l.sim.exit(l.pod, l.st, l.c, Failed(3), l.clock.Now())
	require.Equal(t, containerRunning, l.c.phase)
	for _, wait := range []time.Duration{10 * time.Second, 20 * time.Second} {
		l.clock.Step(time.Second)
		l.sim.advance(l.pod, l.st, l.clock.Now())
		require.Equal(t, containerBackOff, l.c.phase, "crashed after running a second")
		require.Equal(t, int32(3), l.c.exit.Code)
		l.clock.Step(wait)
		l.sim.advance(l.pod, l.st, l.clock.Now())
		require.Equal(t, containerRunning, l.c.phase)
	}
	// The loop is over: this start keeps running.
	l.clock.Step(time.Minute)
	l.sim.advance(l.pod, l.st, l.clock.Now())
	require.Equal(t, containerRunning, l.c.phase)
	require.Equal(t, int32(3), l.c.restartCount)

	require.True(t, l.c.ready(l.clock.Now()))
	l.c.unready = true
	require.False(t, l.c.ready(l.clock.Now()), "readiness overridden")
	require.False(t, podCondition(l.sim.podStatus(l.pod, l.st, l.clock.Now()), corev1.PodReady))
}

// TestCrashLoopInherited: a pod that replaces a crash-looping pod (same
// controller owner) crashes on its first starts too; other pods do not;
// StopCrashLoops ends it.
func TestCrashLoopInherited(t *testing.T) {
	sim := &Simulator{ownerCrashes: map[string]ownerCrash{ownerCrashKey("ns", "owner-1", "app"): {starts: 2, exit: Failed(1)}}}
	pod := func(owner string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid-2"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}, {Name: "sidecar"}}}}
		p.OwnerReferences = []metav1.OwnerReference{{UID: types.UID(owner), Controller: ptr.To(true), Name: "web", Kind: "PodSet"}}
		return p
	}
	st := sim.newPodState(pod("owner-1"), &Node{name: "n"}, time.Now())
	require.Equal(t, 2, st.containers[0].crashStarts)
	require.Equal(t, int32(1), st.containers[0].crashExit.Code)
	require.Zero(t, st.containers[1].crashStarts, "another container")
	require.Zero(t, sim.newPodState(pod("owner-2"), &Node{name: "n"}, time.Now()).containers[0].crashStarts, "another owner")

	sim.StopCrashLoops("ns")
	require.Zero(t, sim.newPodState(pod("owner-1"), &Node{name: "n"}, time.Now()).containers[0].crashStarts, "after the heal")
}

// A gone pod leaves no back-off entry behind: over thousands of cases the
// kubelet's back-off table would otherwise grow by every crashed pod.
func TestForgetPodDropsItsBackOff(t *testing.T) {
	l := newCrashLoop(t, corev1.RestartPolicyAlways, 20)
	l.crash(Killed)
	l.crash(Killed)
	key := backoffKey(l.pod, "app")
	require.NotZero(t, l.sim.backoff.Get(key))
	l.sim.pods = map[string]*podState{"ns/p": l.st}
	l.sim.forgetPod("ns/p")
	require.Empty(t, l.sim.pods)
	require.Zero(t, l.sim.backoff.Get(key), "the back-off entry of a gone pod is kept")
}

// TestProbes: a startup probe holds readiness until it succeeds; a
// liveness probe that fails failureThreshold times in a row (periodSeconds
// apart) gets the container killed and restarted, one that recovers
// sooner does not; a probe with no handler the kubelet knows fails.
func TestProbes(t *testing.T) {
	tcp := corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := Options{Clock: clock, TimeScale: 1}.withDefaults()
	sim := &Simulator{opts: opts, backoff: newCrashLoopBackOff(opts)}
	pods := 0
	start := func(c corev1.Container) (*corev1.Pod, *podState, *containerState) {
		pods++ // a pod of its own: no back-off carried over
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: types.UID("uid-" + strconv.Itoa(pods))},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, Containers: []corev1.Container{c}}}
		st := sim.newPodState(pod, &Node{name: "n"}, clock.Now())
		clock.Step(opts.ContainerStartDelay)
		sim.advance(pod, st, clock.Now())
		require.Equal(t, containerRunning, st.containers[0].phase)
		return pod, st, st.containers[0]
	}
	step := func(pod *corev1.Pod, st *podState, d time.Duration) {
		clock.Step(d)
		sim.advance(pod, st, clock.Now())
	}

	pod, st, c := start(corev1.Container{Name: "app",
		StartupProbe:   &corev1.Probe{ProbeHandler: tcp, InitialDelaySeconds: 20, PeriodSeconds: 10, FailureThreshold: 3},
		ReadinessProbe: &corev1.Probe{ProbeHandler: tcp, InitialDelaySeconds: 5},
		LivenessProbe:  &corev1.Probe{ProbeHandler: tcp, PeriodSeconds: 10, FailureThreshold: 3}})
	step(pod, st, 10*time.Second)
	require.False(t, c.started(clock.Now()), "before the startup probe succeeds")
	require.False(t, c.ready(clock.Now()), "readiness waits for the startup probe")
	require.False(t, *c.status("uid-1", clock.Now(), 0, "p").Started)
	step(pod, st, 10*time.Second)
	require.True(t, c.ready(clock.Now()))
	require.True(t, *c.status("uid-1", clock.Now(), 0, "p").Started)

	// A hang shorter than three failed probes: nothing happens.
	require.NoError(t, sim.failLiveness(c, clock.Now(), 25*time.Second))
	step(pod, st, time.Minute)
	require.Equal(t, containerRunning, c.phase)
	require.Zero(t, c.restartCount)
	// A longer one: killed after 30 s, restarted (at once: its first crash).
	require.NoError(t, sim.failLiveness(c, clock.Now(), 40*time.Second))
	step(pod, st, 29*time.Second)
	require.Zero(t, c.restartCount, "not before the third failed probe")
	step(pod, st, time.Second)
	require.Equal(t, int32(1), c.restartCount)
	require.Equal(t, int32(137), c.last.ExitCode)
	require.False(t, c.started(clock.Now()), "the new instance waits for its startup probe")

	_, _, plain := start(corev1.Container{Name: "app"})
	require.ErrorIs(t, sim.failLiveness(plain, clock.Now(), time.Minute), ErrNoProbe)

	// No handler: the liveness probe fails from the start.
	pod, st, c = start(corev1.Container{Name: "app", LivenessProbe: &corev1.Probe{PeriodSeconds: 10, FailureThreshold: 3}})
	step(pod, st, 30*time.Second)
	require.Equal(t, int32(1), c.restartCount)
	_, _, c = start(corev1.Container{Name: "app", ReadinessProbe: &corev1.Probe{}})
	require.False(t, c.ready(clock.Now().Add(time.Hour)), "a readiness probe with no handler never succeeds")
}
