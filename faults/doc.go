// Package faults is kubeprop's fault catalog, one file per fault. A Fault
// is a rapid generator of steps; a Step is a comparable value that names
// nodes and objects by index (NodeLoss{Node: 1}), so that a plan prints on
// one line, saves as YAML and shrinks well, and that applies itself to a
// Target, which the harness provides. Draws never look at the live
// cluster: a step that no longer applies when its turn comes (a node
// already lost, no pod to kill) returns an error wrapping ErrNoOp, and the
// harness records it as a no-op.
package faults
