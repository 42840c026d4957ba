package faults

import (
	"context"
	"time"

	"pgregory.net/rapid"
)

// StaleWatchStep makes the controller's view of the cluster stale: its
// watch events arrive DelayMs late for ForMs milliseconds, or, with Drop,
// its open watches are cut (the informers must re-watch, and re-list when
// their resource version is gone).
type StaleWatchStep struct {
	DelayMs int  `json:"delayMs,omitempty"`
	ForMs   int  `json:"forMs,omitempty"`
	Drop    bool `json:"drop,omitempty"`
}

func (StaleWatchStep) Fault() string { return "StaleWatch" }

// Armed: it acts on what the controller does after it.
func (StaleWatchStep) Armed() {}

func (s StaleWatchStep) Apply(_ context.Context, t Target) error {
	if s.Drop {
		return t.DropWatches()
	}
	if s.DelayMs <= 0 || s.ForMs <= 0 {
		return noOp("no delay or no window")
	}
	return t.DelayWatches(time.Duration(s.DelayMs)*time.Millisecond, time.Duration(s.ForMs)*time.Millisecond)
}

// StaleWatch is the stale-watch fault.
func StaleWatch() Fault { return staleWatch{} }

type staleWatch struct{}

func (staleWatch) Name() string { return StaleWatchStep{}.Fault() }

func (staleWatch) Steps(Config) *rapid.Generator[Step] {
	return rapid.Custom(func(t *rapid.T) Step {
		if rapid.Bool().Draw(t, "drop") {
			return StaleWatchStep{Drop: true}
		}
		return StaleWatchStep{DelayMs: 250 * amountIn(t, 1, 8, "quarterSeconds"), ForMs: 1000 * amountIn(t, 1, 5, "seconds")}
	})
}

var _ Aimer = staleWatch{}

// Aims: the controller's view, stale or cut, right before a user change.
func (f staleWatch) Aims(c Config) []*rapid.Generator[Step] {
	return []*rapid.Generator[Step]{f.Steps(c)}
}

func (staleWatch) Decode(b []byte) (Step, error) { return decodeStep[StaleWatchStep](b) }
