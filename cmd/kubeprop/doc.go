// Command kubeprop runs kubeprop's conformance search on any controller
// binary, from a spec file: kubeprop run spec.yaml draws fault plans,
// checks the spec's CEL invariants and the general properties, and saves
// the shrunk plan of a failure as a scenario; kubeprop replay
// scenario.yaml runs it again. Run kubeprop help for the spec format.
package main
