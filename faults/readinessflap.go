package faults

import (
	"context"

	"pgregory.net/rapid"
)

// ReadinessFlapStep turns the first container of the Pod-th pod unready
// (its readiness probe failing), lets the system settle, and turns it
// ready again.
type ReadinessFlapStep struct {
	Pod int `json:"pod"`
}

func (ReadinessFlapStep) Fault() string { return "ReadinessFlap" }

func (s ReadinessFlapStep) Apply(ctx context.Context, t Target) error {
	p, err := podAt(ctx, t, "", s.Pod)
	if err != nil {
		return err
	}
	container := p.Spec.Containers[0].Name
	if err := t.SetReady(ctx, p.Name, container, false); err != nil {
		return err
	}
	if err := t.Settle(ctx); err != nil {
		return err
	}
	return t.SetReady(ctx, p.Name, container, true)
}

// ReadinessFlap is the readiness-flap fault.
func ReadinessFlap() Fault { return readinessFlap{} }

type readinessFlap struct{}

func (readinessFlap) Name() string { return ReadinessFlapStep{}.Fault() }

func (readinessFlap) Steps(Config) *rapid.Generator[Step] {
	return rapid.Custom(func(t *rapid.T) Step { return ReadinessFlapStep{Pod: intIn(t, 0, 9, "pod")} })
}

func (readinessFlap) Decode(b []byte) (Step, error) { return decodeStep[ReadinessFlapStep](b) }
