// Package faults is kubeprop's fault catalog, one file per fault. A Fault
// is a rapid generator of steps; a Step is a comparable value that names
// nodes and objects by index (NodeLoss{Node: 1}), so that a plan prints on
// one line, saves as YAML and shrinks well, and that applies itself to a
// Target, which the harness provides. Draws never look at the live
// cluster: a step that no longer applies when its turn comes (a node
// already lost, no pod to kill) returns an error wrapping ErrNoOp, and the
// harness records it as a no-op.
//
// Steps declare what they are by marker methods: a UserChange is the
// user's change of the desired state, not a fault (the properties judge
// the controller's answer to it); an Armed step waits for the
// controller's coming writes or watch events, so plans place it before a
// step that makes the controller act (ArmedBeforeAction).
//
// Plan draws a plan from every fault; AimedPlans draws plans aimed at what
// the controller does (Config.Writes, from a run with no fault): each
// Aimer's step at one place where it matters, right before a user change.
// A step that picks by index what only exists at its turn (the claim
// VolumeGrowth grows) names it as it acts (Target.NameStep).
package faults
