package kubelet

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// ErrNoProbe is wrapped by FailLiveness's error when the container has no
// liveness probe.
var ErrNoProbe = errors.New("no liveness probe")

// probes are a container's probes (each nil without one). Every handler
// the kubelet knows (exec, httpGet, tcpSocket, grpc) succeeds, the first
// probe after its initial delay: the simulated containers are healthy
// unless a fault says otherwise. A probe with no handler the kubelet
// knows fails, as the kubelet's prober fails it ("missing probe
// handler").
type probes struct {
	startup, readiness, liveness *corev1.Probe
}

func probesOf(c *corev1.Container) probes {
	return probes{startup: c.StartupProbe, readiness: c.ReadinessProbe, liveness: c.LivenessProbe}
}

// failing reports whether a probe is there and always fails.
func failing(p *corev1.Probe) bool {
	if p == nil {
		return false
	}
	h := p.ProbeHandler
	return h.Exec == nil && h.HTTPGet == nil && h.TCPSocket == nil && h.GRPC == nil
}

// initialDelay is a probe's initial delay in cluster time; zero without one.
func initialDelay(p *corev1.Probe) time.Duration {
	if p == nil {
		return 0
	}
	return seconds(p.InitialDelaySeconds)
}

func seconds(n int32) time.Duration { return time.Duration(n) * time.Second }

// failingFor is how long a probe must fail before the kubelet acts on it:
// failureThreshold probes, periodSeconds apart (the API server's defaults,
// 3 and 10 s, when unset), in wall time.
func failingFor(p *corev1.Probe, wall func(time.Duration) time.Duration) time.Duration {
	threshold, period := p.FailureThreshold, p.PeriodSeconds
	if threshold <= 0 {
		threshold = 3
	}
	if period <= 0 {
		period = 10
	}
	return wall(seconds(threshold * period))
}

// startProbes sets a container's probe times at its start: when it counts
// as started and ready, and when a failing startup or liveness probe
// kills it. s.mu is held.
func (s *Simulator) startProbes(c *containerState, now time.Time) {
	p, wall := c.probes, s.opts.wall
	// Readiness and liveness wait for the startup probe's success.
	c.startedOK = now.Add(wall(initialDelay(p.startup)))
	c.readyAt = now.Add(wall(max(initialDelay(p.readiness), initialDelay(p.startup))))
	c.probeKillAt = time.Time{}
	switch {
	case failing(p.startup):
		c.probeKillAt = c.startedOK.Add(failingFor(p.startup, wall))
	case failing(p.liveness):
		c.probeKillAt = c.startedOK.Add(wall(initialDelay(p.liveness)) + failingFor(p.liveness, wall))
	}
}

// started reports whether the container's startup probe has succeeded.
func (c *containerState) started(now time.Time) bool {
	return c.phase == containerRunning && !failing(c.probes.startup) && !now.Before(c.startedOK)
}

// FailLiveness makes a running container's liveness probe fail for window
// (wall time), as a hung process would: once it has failed
// failureThreshold probes in a row (periodSeconds apart, counted from the
// later of now and the probe's initial delay), the kubelet kills the
// container, which restarts per the pod's restartPolicy with
// CrashLoopBackOff like any other. The restarted process is not hung. A
// window shorter than that is a probe that recovers in time: nothing
// happens.
//
// The error wraps ErrNoProbe when the container has no liveness probe,
// and ErrUnknown or ErrNotRunning as KillContainer's.
func (s *Simulator) FailLiveness(_ context.Context, namespace, pod, container string, window time.Duration) error {
	_, _, c, err := s.lockContainer(namespace, pod, container, "failing the liveness probe of")
	if err != nil {
		return err
	}
	defer s.queue.Add(namespace + "/" + pod)
	defer s.mu.Unlock()
	if err := s.failLiveness(c, s.opts.Clock.Now(), window); err != nil {
		return fmt.Errorf("failing the liveness probe of container %s of pod %s/%s: %w", container, namespace, pod, err)
	}
	return nil
}

// failLiveness is FailLiveness on a container; s.mu is held.
func (s *Simulator) failLiveness(c *containerState, now time.Time, window time.Duration) error {
	if c.probes.liveness == nil {
		return fmt.Errorf("it has %w", ErrNoProbe)
	}
	if c.phase != containerRunning {
		return fmt.Errorf("it is %w", ErrNotRunning)
	}
	from := c.startedOK.Add(s.opts.wall(initialDelay(c.probes.liveness)))
	if from.Before(now) {
		from = now
	}
	killAt := from.Add(failingFor(c.probes.liveness, s.opts.wall))
	if killAt.After(now.Add(window)) {
		return nil
	}
	if c.probeKillAt.IsZero() || killAt.Before(c.probeKillAt) {
		c.probeKillAt = killAt
	}
	return nil
}
