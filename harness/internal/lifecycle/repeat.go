package lifecycle

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/kubeprop/kubeprop/faults"
)

// Replays are the reports of a plan's runs (Repeat), in order.
type Replays []*Report

// Failing is how many of the runs property failed in; with property
// empty, how many failed at all.
func (r Replays) Failing(property string) int {
	n := 0
	for _, rep := range r {
		if rep.FailedOn(property) {
			n++
		}
	}
	return n
}

// RepeatOptions configure Repeat. Zero values take the defaults.
type RepeatOptions struct {
	// Count is how many times the plan runs. Zero means once.
	Count int
	// Parallel is how many of the runs go at once, at most MaxParallel.
	// Zero means DefaultParallel.
	Parallel int
}

// Repeat is harness.Repeat: see its documentation there.
func Repeat(ctx context.Context, env *Env, spec Spec, plan []faults.Step, opts RepeatOptions) (Replays, error) {
	count, parallel := max(opts.Count, 1), opts.Parallel
	if parallel == 0 {
		parallel = DefaultParallel()
	}
	if parallel < 0 || parallel > MaxParallel {
		return nil, fmt.Errorf("repeating a plan: Parallel is %d; give 1 to %d, or 0 for the default", parallel, MaxParallel)
	}
	reps := make(Replays, count)
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for i := range count {
		g.Go(func() error {
			rep, err := Run(ctx, env, spec, plan)
			if err != nil {
				return fmt.Errorf("replay %d of %d: %w", i+1, count, err)
			}
			reps[i] = rep
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return reps, nil
}
