package faults

import (
	"context"
	"time"

	"pgregory.net/rapid"
)

// LivenessFailureStep makes the liveness probe of the first container of
// the Pod-th pod that has one fail for ForMs milliseconds, as a hung
// process would: once failureThreshold probes in a row have failed, the
// kubelet kills the container and it restarts (with CrashLoopBackOff,
// like any restart). A shorter hang is a probe that recovers in time.
type LivenessFailureStep struct {
	Pod   int `json:"pod"`
	ForMs int `json:"forMs"`
}

func (LivenessFailureStep) Fault() string { return "LivenessFailure" }

func (s LivenessFailureStep) Apply(ctx context.Context, t Target) error {
	if s.ForMs <= 0 {
		return noOp("forMs is not set")
	}
	p, err := podAt(ctx, t, "", s.Pod)
	if err != nil {
		return err
	}
	for _, c := range p.Spec.Containers {
		if c.LivenessProbe != nil {
			return t.FailLiveness(ctx, p.Name, c.Name, time.Duration(s.ForMs)*time.Millisecond)
		}
	}
	return noOp("pod %s has no container with a liveness probe", p.Name)
}

// LivenessFailure is the liveness-failure fault: a hung process that the
// kubelet's liveness probe finds. It is in the Catalog but not in
// Default: only pods with liveness probes feel it.
func LivenessFailure() Fault { return livenessFailure{} }

type livenessFailure struct{}

func (livenessFailure) Name() string { return LivenessFailureStep{}.Fault() }

// Steps draws hangs of 0.5 s to 8 s of wall time: at the hollow cluster's
// usual time scales (10 to 20), the kubelet's default 3 failed probes 10 s
// apart take 1.5 s to 3 s, so hangs both shorter and longer are drawn.
func (livenessFailure) Steps(Config) *rapid.Generator[Step] {
	return rapid.Custom(func(t *rapid.T) Step {
		return LivenessFailureStep{Pod: intIn(t, 0, 9, "pod"), ForMs: 500 * amountIn(t, 1, 16, "halfSeconds")}
	})
}

func (livenessFailure) Decode(b []byte) (Step, error) { return decodeStep[LivenessFailureStep](b) }
