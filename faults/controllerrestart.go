package faults

import (
	"context"
	"fmt"
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
//
// With Into (a percentage, 1-99) instead, the view is of the cluster that
// far into the step before this one, from its start to now (its settle
// included; the case's setup for a first step): into what that step did,
// a Recreate's deletion with Into 50. The view lands in the same part of
// the step however long load makes it, where a fixed StaleMs may land
// before the step or after it.
type ControllerRestartStep struct {
	StaleMs int `json:"staleMs,omitempty"`
	Into    int `json:"into,omitempty"`
}

func (ControllerRestartStep) Fault() string { return "ControllerRestart" }

func (s ControllerRestartStep) Apply(ctx context.Context, t Target) error {
	switch {
	case s.Into < 0 || s.Into > 99:
		return fmt.Errorf("ControllerRestart: into is %d: give a percentage of the step before, 1-99 (or 0 for staleMs)", s.Into)
	case s.Into > 0:
		return t.RestartController(ctx, t.SinceLastStep()*time.Duration(100-s.Into)/100)
	}
	return t.RestartController(ctx, time.Duration(max(0, s.StaleMs))*time.Millisecond)
}

var _ Simplifiable = ControllerRestartStep{}

// Simpler: a plain restart, with a fresh view.
func (s ControllerRestartStep) Simpler() []Step {
	if s.StaleMs <= 0 && s.Into <= 0 {
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

// staleRestart: a view from half a second to 6 s old, or (one time in
// two) a quarter, half or three quarters into the step before.
var staleRestart = rapid.Custom(func(t *rapid.T) Step {
	if rapid.Bool().Draw(t, "into") {
		return intoRestart(3).Draw(t, "restart")
	}
	return agedRestart.Draw(t, "restart")
})

// agedRestart's view is from half a second to 6 s old.
var agedRestart = rapid.Custom(func(t *rapid.T) Step {
	return ControllerRestartStep{StaleMs: 500 * amountIn(t, 1, 12, "halfSeconds")}
})

// intoRestart's view is one to quarters quarters into the step before.
func intoRestart(quarters int) *rapid.Generator[Step] {
	return rapid.Custom(func(t *rapid.T) Step {
		return ControllerRestartStep{Into: 25 * intIn(t, 1, quarters, "quarters")}
	})
}

var _ Aimer = controllerRestart{}

// Aims: a restart whose view of the cluster is stale, right before a
// user change, and one whose view is into each user change (the first
// half of its step: the change still going, a re-created object's old
// incarnation still being deleted).
func (controllerRestart) Aims(Config) []*rapid.Generator[Step] {
	return []*rapid.Generator[Step]{agedRestart, intoRestart(2)}
}

var _ LooksBack = ControllerRestartStep{}

// LooksBack: with Into, the view is into the step before.
func (s ControllerRestartStep) LooksBack() bool { return s.Into > 0 }

// Decode refuses what Apply would: a scenario file with a bad into fails
// as it loads, not in the middle of its case.
func (controllerRestart) Decode(b []byte) (Step, error) {
	st, err := decodeStep[ControllerRestartStep](b)
	if err != nil {
		return nil, err
	}
	switch s := st.(ControllerRestartStep); {
	case s.Into < 0 || s.Into > 99:
		return nil, fmt.Errorf("ControllerRestart: into is %d: give a percentage of the step before, 1-99 (or 0 for staleMs)", s.Into)
	case s.Into > 0 && s.StaleMs != 0:
		return nil, fmt.Errorf("ControllerRestart: both into (%d) and staleMs (%d) are set: give one", s.Into, s.StaleMs)
	case s.StaleMs < 0:
		return nil, fmt.Errorf("ControllerRestart: staleMs is %d: give milliseconds back, or 0 for a fresh view", s.StaleMs)
	}
	return st, nil
}
