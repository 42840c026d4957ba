package faults

import (
	"context"

	"pgregory.net/rapid"
)

// ControllerRestartStep stops the controller under test and starts a new
// instance with a cold cache.
type ControllerRestartStep struct{}

func (ControllerRestartStep) Fault() string { return "ControllerRestart" }

func (ControllerRestartStep) Apply(ctx context.Context, t Target) error {
	return t.RestartController(ctx)
}

// ControllerRestart is the controller-restart fault.
func ControllerRestart() Fault { return controllerRestart{} }

type controllerRestart struct{}

func (controllerRestart) Name() string { return ControllerRestartStep{}.Fault() }

func (controllerRestart) Steps(Config) *rapid.Generator[Step] {
	return rapid.Just[Step](ControllerRestartStep{})
}

func (controllerRestart) Decode(b []byte) (Step, error) { return decodeStep[ControllerRestartStep](b) }
