// Package search is kubeprop's search and shrinker, behind harness.Find
// and harness.Check; package lifecycle runs each case. Here rapid is the
// generator of plans, and kubeprop runs them and shrinks a failure itself.
// A case takes seconds and mostly waits (settling, evictions, deadlines),
// so cases run Parallel at a time; rapid's own loop runs one property call
// at a time, and its shrinker tries bit streams one by one, many of which
// draw a plan already run.
//
// Plan i of a search, for even i, is what rapid.Check would draw for its
// i-th check with the same seed (rapid's seeds go S, S+1, S+3, S+6, ...),
// whatever Parallel is; the odd ones are aimed at the controller (see
// aim.go, plans.go; shard.go cuts a search into shards). The failure
// shrunk is the first failing case judged: at Parallel 1 the failing plan
// of the lowest index; with Parallel > 1 the one that failed first, and
// the cases still running, before it or after it, are cut short. Waiting
// for the plans before it gave each search the time of the slowest of them
// (a correct case waits out its properties' deadlines, a safety failure
// beside it is judged in seconds). So at Parallel > 1 which of a batch's
// failing plans is shrunk depends on timing; its replay does not. The
// search goes on (to the shrinker) while the cases cut short tear down,
// each in its slot of Parallel until it has. Shrinking keeps each change
// after which the same property still fails: it drops the steps the case
// recorded as no-ops, and those it did not run because a property had
// already failed, together (one run), then tries each step alone, then
// dropping each step (and each ScaleChange merged into a later one of its
// field, which keeps the change it made: see faults.MergedScaleChanges),
// then each step's simpler forms (faults.Simpler), each fault at every
// write or watch at one the failing case's controller tried
// (faults.Narrowed) and each burst split into settled steps
// (faults.SplitBursts), Parallel candidates at a time,
// taking the first in that order that fails, until none does (twice: a
// timing-dependent bug fails in some runs of its plan only) or ShrinkTime
// has passed since the failure was found. A candidate that failed so
// before (in an earlier pass, placed after the one taken but judged before
// it) counts without a run. The search's draws keep only the failure they
// take.
package search
