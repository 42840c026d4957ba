package scenario_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness/scenario"
)

// A scenario written by hand, or edited: read it back and decode its plan
// with the faults a spec knows.
func Example() {
	dir, _ := os.MkdirTemp("", "scenario")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "at-most-replicas-2.yaml")
	_ = os.WriteFile(path, []byte(`version: 1
plan:
- {fault: StaleWatch, delayMs: 500, forMs: 4000}
- {fault: ScaleChange, object: 0, field: spec.replicas, value: 5}
expect: {outcome: fail, property: at-most-replicas}
`), 0o644)
	s, plan, err := scenario.ReadPlan(path, faults.Catalog())
	fmt.Println(faults.FormatPlan(plan), s.Expect.Outcome, s.Expect.Property, err)
	// Output:
	// [StaleWatch{DelayMs: 500, ForMs: 4000} ScaleChange{Object: 0, Field: spec.replicas, Value: 5}] fail at-most-replicas <nil>
}
