package faults

import (
	"context"
	"time"

	"pgregory.net/rapid"
)

// ControllerRestartStep stops the controller under test and starts a new
// instance with a cold cache. With StaleMs, the new instance is served a
// view of the cluster StaleMs milliseconds old, as from an API server
// whose watch cache lags behind (Sieve's stale state): its lists are
// answered at the resource version the cluster had then, its watches
// start from there, and the events since reach it only once StaleMs have
// passed since its start. Its reads of single objects stay fresh, as an
// API server serves them from etcd. A view older than the API server's
// compaction window is served at the oldest resource version the server
// still has, and the case's timeline says so.
type ControllerRestartStep struct {
	StaleMs int `json:"staleMs,omitempty"`
}

func (ControllerRestartStep) Fault() string { return "ControllerRestart" }

func (s ControllerRestartStep) Apply(ctx context.Context, t Target) error {
	return t.RestartController(ctx, time.Duration(max(0, s.StaleMs))*time.Millisecond)
}

var _ Simplifiable = ControllerRestartStep{}

// Simpler: a plain restart, with a fresh view.
func (s ControllerRestartStep) Simpler() []Step {
	if s.StaleMs <= 0 {
		return nil
	}
	return []Step{ControllerRestartStep{}}
}

// ControllerRestart is the controller-restart fault: half of its steps
// serve the new instance a stale view, from half a second to 6 s old: as
// far back as a step or two, whose intermediate states a stale view
// shows.
func ControllerRestart() Fault { return controllerRestart{} }

type controllerRestart struct{}

func (controllerRestart) Name() string { return ControllerRestartStep{}.Fault() }

func (controllerRestart) Steps(Config) *rapid.Generator[Step] {
	return rapid.Custom(func(t *rapid.T) Step {
		if !rapid.Bool().Draw(t, "stale") {
			return ControllerRestartStep{}
		}
		return staleRestart.Draw(t, "restart")
	})
}

var staleRestart = rapid.Custom(func(t *rapid.T) Step {
	return ControllerRestartStep{StaleMs: 500 * amountIn(t, 1, 12, "halfSeconds")}
})

var _ Aimer = controllerRestart{}

// Aims: a restart whose view of the cluster is stale, right before a
// user change (or right after one, into what it left).
func (controllerRestart) Aims(Config) []*rapid.Generator[Step] {
	return []*rapid.Generator[Step]{staleRestart}
}

func (controllerRestart) Decode(b []byte) (Step, error) { return decodeStep[ControllerRestartStep](b) }
