// Package properties holds kubeprop's invariants: general statements about
// controllers, each a pure function of a recorded Trace (states observed,
// field writes with their managers, the API server's audit of requests,
// in-process reconciles, panics, and the faults and user changes that drove
// them). They are unit-tested on synthetic traces, without a cluster.
//
// The harness checks a property on the growing trace while a case runs; a
// property says whether its verdict is final (done), so that a case ends as
// soon as every verdict is in, and at the latest at the property's Horizon
// after the faults healed.
//
// Failure messages are deterministic: they name objects, fields and
// managers, never UIDs, resource versions, times or counts, so that rapid's
// shrinker keeps the same failure while it shrinks. The detail goes in
// Verdict.Detail, for the log and the report.
package properties
