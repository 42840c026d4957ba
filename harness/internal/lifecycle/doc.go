// Package lifecycle is a case's life, behind harness.Run and the
// search: the hollow cluster a case runs on (Env), what it tests (Spec,
// the controller routes Manager, Func, Process and ControllerManager), and
// one case from its namespace and nodes to its teardown: the fixtures,
// each step and the settle after it, the heal, the properties' judging
// (while the steps settle too), the reference run of MatchesReference,
// the Report with its timeline page and evidence, and what the teardown
// had to force. The harness package gives these names to its users; the
// search (package search) runs its cases through RunCase and Probe.
package lifecycle
