// Package scenario reads and writes kubeprop's scenario files: a saved
// plan (its steps as YAML entries, {fault: NodeLoss, node: 0}), the test
// or the kubeprop spec file that replays it, and what a replay must see.
// The harness writes one for each shrunk failure (harness.Find, Check)
// and replays them (harness.Replay, ReplayDir); the kubeprop command reads
// and writes them through this package too.
//
// A scenario file starts with a comment that gives its replay command,
// and may be edited freely: a step changed, dropped or added, the
// expectation set to pass once the bug is fixed.
package scenario
