package search

import "github.com/kubeprop/kubeprop/harness/internal/lifecycle"

// The case's life is package lifecycle's: the search runs its cases.
type (
	Env      = lifecycle.Env
	Spec     = lifecycle.Spec
	Report   = lifecycle.Report
	Failure  = lifecycle.Failure
	Times    = lifecycle.Times
	Replays  = lifecycle.Replays
	Teardown = lifecycle.Teardown
)

// MaxParallel bounds SearchOptions.Parallel.
const MaxParallel = lifecycle.MaxParallel

// DefaultParallel is what a zero SearchOptions.Parallel means.
func DefaultParallel() int { return lifecycle.DefaultParallel() }
