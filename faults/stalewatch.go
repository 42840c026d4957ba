package faults

import (
	"context"
	"time"

	"pgregory.net/rapid"
)

// StaleWatchStep makes the controller's view of the cluster stale: its
// watch events arrive DelayMs late for ForMs milliseconds, or, with Drop,
// its open watches are cut (the informers must re-watch, and re-list when
// their resource version is gone). With Resource (a resource as the API
// path names it: "pods", "statefulsets"), only the watches of that
// resource: each informer has a watch of its own, and one can lag
// behind the others (a pod watch late while the owner's events come on
// time is how a controller that counts its pods in its cache makes too
// many).
type StaleWatchStep struct {
	DelayMs  int    `json:"delayMs,omitempty"`
	ForMs    int    `json:"forMs,omitempty"`
	Drop     bool   `json:"drop,omitempty"`
	Resource string `json:"resource,omitempty"`
}

func (StaleWatchStep) Fault() string { return "StaleWatch" }

// Armed: it acts on what the controller does after it.
func (StaleWatchStep) Armed() {}

func (s StaleWatchStep) Apply(_ context.Context, t Target) error {
	if s.Drop {
		return t.DropWatches(s.Resource)
	}
	if s.DelayMs <= 0 || s.ForMs <= 0 {
		return noOp("no delay or no window")
	}
	return t.DelayWatches(s.Resource, time.Duration(s.DelayMs)*time.Millisecond, time.Duration(s.ForMs)*time.Millisecond)
}

// StaleWatch is the stale-watch fault.
func StaleWatch() Fault { return staleWatch{} }

type staleWatch struct{}

func (staleWatch) Name() string { return StaleWatchStep{}.Fault() }

// The delay's bounds: up to 2 s late, for up to 5 s.
const (
	maxQuarterSeconds = 8
	maxWatchSeconds   = 5
)

func (staleWatch) Steps(Config) *rapid.Generator[Step] {
	return rapid.Custom(func(t *rapid.T) Step {
		if rapid.Bool().Draw(t, "drop") {
			return StaleWatchStep{Drop: true}
		}
		return StaleWatchStep{DelayMs: 250 * amountIn(t, 1, maxQuarterSeconds, "quarterSeconds"), ForMs: 1000 * amountIn(t, 1, maxWatchSeconds, "seconds")}
	})
}

var _ Aimer = staleWatch{}

// Aims: the controller's view late as long as the fault goes (a stale
// read shows only when the controller acts within the delay), of every
// resource and of each it watches (Config.Watched): one informer behind
// the others; then its watches cut. Not known, the pods are taken as one
// it watches, as the aims at what it makes take them.
func (staleWatch) Aims(c Config) []*rapid.Generator[Step] {
	late := func(resource string) *rapid.Generator[Step] {
		return rapid.Custom(func(t *rapid.T) Step {
			return StaleWatchStep{Resource: resource, DelayMs: 250 * rapid.IntRange(maxQuarterSeconds/2, maxQuarterSeconds).Draw(t, "quarterSeconds"),
				ForMs: 1000 * rapid.IntRange(maxWatchSeconds-2, maxWatchSeconds).Draw(t, "seconds")}
		})
	}
	aims := []*rapid.Generator[Step]{late("")}
	watched := c.Watched
	if !c.WritesKnown {
		watched = []string{"pods"}
	}
	if len(watched) > 1 || !c.WritesKnown {
		for _, r := range watched {
			aims = append(aims, late(r))
		}
	}
	return append(aims, rapid.Just[Step](StaleWatchStep{Drop: true}))
}

func (staleWatch) Decode(b []byte) (Step, error) { return decodeStep[StaleWatchStep](b) }
