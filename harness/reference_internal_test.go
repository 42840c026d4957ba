package harness

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubeprop/kubeprop/faults"
)

// TestReferenceSteps: a reference run makes the user's changes, another
// writer's, and the node losses that last; no passing fault.
func TestReferenceSteps(t *testing.T) {
	scale := faults.ScaleChangeStep{Field: "spec.replicas", Value: 4}
	writer := faults.ConflictingWriterStep{Field: "spec.replicas", Value: 2, Rounds: 2}
	plan := []faults.Step{
		faults.NodeLossStep{Node: 0}, scale, faults.NodeLossStep{Node: 1}, faults.ContainerKillStep{Pod: 1},
		faults.APIErrorsStep{Error: faults.Conflict, Requests: 3}, writer, faults.NodeRecoverStep{Node: 4},
		faults.RecreateStep{}, faults.ControllerRestartStep{StaleMs: 1000}, faults.NodeLossStep{Node: 2},
	}
	// Node 4 is node 1 of 3: its loss passes.
	require.Equal(t, []faults.Step{faults.NodeLossStep{Node: 0}, scale, writer, faults.RecreateStep{}, faults.NodeLossStep{Node: 2}},
		referenceSteps(plan, 3))
	require.Empty(t, referenceSteps([]faults.Step{faults.ChildDeleteStep{}, faults.CrashLoopStep{Pod: 1, Starts: 2}}, 3))
}

// TestAsReferenceNamed: a case makes the user changes as its reference
// run named them (the claim it grew), its faults as they are.
func TestAsReferenceNamed(t *testing.T) {
	grow := faults.VolumeGrowthStep{Claim: 5, ByGi: 2}
	plan := []faults.Step{faults.ContainerKillStep{Pod: 1}, grow, faults.ControllerRestartStep{}, faults.ScaleChangeStep{Field: "spec.replicas", Value: 1}}
	named := []faults.Step{faults.VolumeGrowthStep{Claim: 5, ByGi: 2, Name: "data-db-0"}, faults.ScaleChangeStep{Field: "spec.replicas", Value: 1}}
	require.Equal(t, []faults.Step{faults.ContainerKillStep{Pod: 1}, named[0], faults.ControllerRestartStep{}, named[1]}, asReferenceNamed(plan, named, 3))
	require.Equal(t, grow, plan[1], "the plan given is left as it was")
	require.Equal(t, plan, asReferenceNamed(plan, named[:1], 3), "steps that do not line up are left")
}
