package faults_test

import (
	"fmt"

	"github.com/kubeprop/kubeprop/faults"
)

// Steps name nodes and objects by index, print on one line and save as
// scenario-file entries.
func Example() {
	plan := []faults.Step{
		faults.NodeLossStep{Node: 1},
		faults.ConflictingWriterStep{Object: 0, Field: "spec.replicas", Value: 2, Rounds: 20},
	}
	fmt.Println(faults.FormatPlan(plan))
	entry, _ := faults.EncodeStep(plan[0])
	fmt.Println(entry)
	// Output:
	// [NodeLoss{Node: 1} ConflictingWriter{Object: 0, Field: spec.replicas, Value: 2, Rounds: 20}]
	// map[fault:NodeLoss node:1]
}
