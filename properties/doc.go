// Package properties holds kubeprop's invariants: general statements about
// controllers, each a pure function of a recorded Trace (states observed,
// field writes with their managers, the API server's audit of requests,
// in-process reconciles, panics, and the faults and user changes that drove
// them). They are unit-tested on synthetic traces, without a cluster.
//
// The harness checks a property on the growing trace while a case runs,
// during the steps as well as after the heal; a property says whether its
// verdict is final (done). A failure found while a step settles (a safety
// property violated, a retry streak beyond its budget, a fight) ends the
// case: the steps left are not run. After the heal, the case
// ends once the first failure in the Spec's order is in or every verdict
// is, and at the latest at the property's Horizon after the faults
// healed. So Done with an error must mean that no more trace can undo the
// failure.
//
// Failure messages are deterministic: they name objects, fields and
// managers, never UIDs, resource versions, times or counts, so that rapid's
// shrinker keeps the same failure while it shrinks. The detail goes in
// Verdict.Detail, for the log and the report.
package properties
