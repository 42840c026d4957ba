package faults_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubeprop/kubeprop/faults"
)

// TestNarrowed: a step at every write or watch is narrowed to each one
// (sorted, once each); one aimed already, or another fault, is not.
func TestNarrowed(t *testing.T) {
	writes := []faults.WriteMatch{{Verb: "patch", Resource: "persistentvolumeclaims"}, {Verb: "update", Resource: "databases/status"}, {Verb: "patch", Resource: "persistentvolumeclaims"}}
	require.Equal(t, []faults.Step{
		faults.APIErrorsStep{Error: faults.Conflict, ForMs: 4000, Verb: "update", Resource: "databases/status"},
		faults.APIErrorsStep{Error: faults.Conflict, ForMs: 4000, Verb: "patch", Resource: "persistentvolumeclaims"},
	}, faults.Narrowed(faults.APIErrorsStep{Error: faults.Conflict, ForMs: 4000}, writes, nil))
	require.Equal(t, []faults.Step{
		faults.CrashAfterWriteStep{Verb: "update", Resource: "databases/status", Writes: 2},
		faults.CrashAfterWriteStep{Verb: "patch", Resource: "persistentvolumeclaims", Writes: 2},
	}, faults.Narrowed(faults.CrashAfterWriteStep{Writes: 2}, writes, nil))
	require.Equal(t, []faults.Step{faults.StaleWatchStep{Drop: true, Resource: "pods"}, faults.StaleWatchStep{Drop: true, Resource: "podsets"}},
		faults.Narrowed(faults.StaleWatchStep{Drop: true}, writes, []string{"pods", "podsets"}))
	require.Empty(t, faults.Narrowed(faults.APIErrorsStep{Error: faults.Timeout, Requests: 30, Verb: "patch", Resource: "persistentvolumeclaims"}, writes, nil))
	require.Empty(t, faults.Narrowed(faults.StaleWatchStep{DelayMs: 1000, ForMs: 3000, Resource: "pods"}, writes, []string{"pods"}))
	require.Empty(t, faults.Narrowed(faults.NodeLossStep{Node: 1}, writes, []string{"pods"}))
}
