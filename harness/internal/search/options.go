package search

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/kubeprop/kubeprop/faults"
)

// ScenarioDir is where Check saves the scenarios of failures, under the
// test's name.
const ScenarioDir = "testdata/kubeprop"

// SearchOptions is harness.SearchOptions: see its documentation there.
type SearchOptions struct {
	// Checks is how many plans to draw. Zero means 100.
	Checks int
	// Seed makes a search repeatable: the same seed draws the same plans.
	// Zero draws a random one, which the finding names.
	Seed uint64
	// ShrinkTime bounds shrinking, from the first failure on: no
	// candidate starts after it. Zero means 1 m. The replays that check
	// that the plan shrunk reproduces as often as the plan drawn come
	// after it (3 at once; when it fell short, 3 of the plan drawn and
	// of plans kept between): a case time or more, minutes for a case
	// that waits out a convergence deadline.
	ShrinkTime time.Duration
	// Parallel is how many cases run at once, in the search and in each
	// shrink pass: 1 to 64. Zero means DefaultParallel().
	Parallel int
	// Shard, of a Count above 1, runs only that shard's plans (see
	// Shard): the Count shards of one Seed together run the plans of the
	// whole search, each shrinking its own failure. A shard needs a Seed.
	Shard Shard
	// Dir is where the scenario and the HTML timeline of a failure go.
	// Empty means testdata/kubeprop/<name>, relative to the working folder.
	Dir string
	// OnCase, when set, is called with the report of every case as it
	// ends, one call at a time (with Parallel > 1 from the goroutines that
	// ran the cases, never two at once).
	OnCase func(*Report)
	// OnSkip, when set, is called with a plan drawn that the search does
	// not run: the same plan ran before (rapid draws short plans more
	// than once). Called as OnCase is.
	OnSkip func(plan []faults.Step)
}

// The search's defaults: what zero SearchOptions.Checks and ShrinkTime
// mean.
const (
	DefaultChecks     = 100
	DefaultShrinkTime = time.Minute
)

func (o SearchOptions) withDefaults(name string) SearchOptions {
	if o.Checks == 0 {
		o.Checks = DefaultChecks
	}
	if o.Seed == 0 {
		o.Seed = rand.Uint64()
	}
	if o.ShrinkTime == 0 {
		o.ShrinkTime = DefaultShrinkTime
	}
	if o.Parallel == 0 {
		o.Parallel = DefaultParallel()
	}
	if o.Dir == "" {
		o.Dir = filepath.Join(ScenarioDir, name)
	}
	return o
}

func (o SearchOptions) validate() error {
	var errs []error
	if o.Checks < 0 {
		errs = append(errs, fmt.Errorf("SearchOptions.Checks is %d: give a number of plans, or 0 for %d", o.Checks, DefaultChecks))
	}
	if o.ShrinkTime < 0 {
		errs = append(errs, fmt.Errorf("SearchOptions.ShrinkTime is %v: give a duration, or 0 for %v", o.ShrinkTime, DefaultShrinkTime))
	}
	if err := o.Shard.validate(); err != nil {
		errs = append(errs, fmt.Errorf("SearchOptions.Shard: %w", err))
	}
	if o.Parallel < 0 || o.Parallel > MaxParallel {
		errs = append(errs, fmt.Errorf("SearchOptions.Parallel is %d: give 1 to %d cases at once, or 0 for the default (%d)", o.Parallel, MaxParallel, DefaultParallel()))
	}
	if err := writable(o.Dir); err != nil {
		errs = append(errs, fmt.Errorf("SearchOptions.Dir: %w", err))
	}
	return errors.Join(errs...)
}

// writable checks, without creating anything, that dir can be made and
// written: its nearest existing ancestor is a writable folder.
func writable(dir string) error {
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		info, err := os.Stat(p)
		switch {
		case err == nil && !info.IsDir():
			return fmt.Errorf("%s is not a folder, so %s cannot be made", p, dir)
		case err == nil:
			if err := syscall.Access(p, 2 /* W_OK */); err != nil {
				return fmt.Errorf("folder %s cannot be written: %w", p, err)
			}
			return nil
		case !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
			return fmt.Errorf("%s: %w", dir, err)
		}
		if filepath.Dir(p) == p {
			return nil
		}
	}
}
