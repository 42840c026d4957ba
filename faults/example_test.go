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

// Plans aimed at a controller's writes: the crash after its status write,
// right before a user change.
func ExampleAimedPlans() {
	writes := faults.SortWrites([]faults.WriteMatch{{Verb: "update", Resource: "podsets/status"}, {Verb: "create", Resource: "pods"}})
	c := faults.Config{Nodes: 3, Fixtures: 1, Writes: writes, WritesKnown: true}
	aims := faults.AimedPlans([]faults.Fault{faults.CrashAfterWrite(), faults.ScaleChange(faults.ScaleOptions{})}, c, 5)
	fmt.Println(len(aims), "aims")
	plan := aims[1].Example(1)
	crash := plan[len(plan)-2].(faults.CrashAfterWriteStep)
	fmt.Println(crash.Verb, crash.Resource, faults.IsUserChange(plan[len(plan)-1]))
	// Output:
	// 2 aims
	// update podsets/status true
}
