package faults_test

import (
	"context"
	"fmt"

	"pgregory.net/rapid"
	"sigs.k8s.io/yaml"

	"github.com/kubeprop/kubeprop/faults"
)

// PodBurstStep deletes Pods of the case's pods at once: a fault of the
// user's own, written outside the faults package.
type PodBurstStep struct {
	Pods int `json:"pods"`
}

func (PodBurstStep) Fault() string { return "PodBurst" }

func (s PodBurstStep) Apply(ctx context.Context, t faults.Target) error {
	pods, err := t.Pods(ctx)
	if err != nil {
		return err
	}
	if len(pods) == 0 {
		return fmt.Errorf("%w: no pod to delete", faults.ErrNoOp)
	}
	for _, p := range pods[:min(s.Pods, len(pods))] {
		if err := t.Client().Delete(ctx, &p); err != nil {
			return fmt.Errorf("PodBurst: deleting pod %s: %w", p.Name, err)
		}
	}
	return nil
}

// Simpler makes the step Simplifiable: the shrinker tries one pod after
// it has dropped every step it can.
func (s PodBurstStep) Simpler() []faults.Step {
	if s.Pods <= 1 {
		return nil
	}
	return []faults.Step{PodBurstStep{Pods: 1}}
}

// podBurst draws PodBurst steps of 1..Max pods.
type podBurst struct{ Max int }

func (podBurst) Name() string { return "PodBurst" }

func (f podBurst) Steps(faults.Config) *rapid.Generator[faults.Step] {
	return rapid.Custom(func(t *rapid.T) faults.Step {
		return PodBurstStep{Pods: rapid.IntRange(1, f.Max).Draw(t, "pods")}
	})
}

func (podBurst) Decode(fields []byte) (faults.Step, error) {
	var s PodBurstStep
	if err := yaml.UnmarshalStrict(fields, &s); err != nil {
		return nil, fmt.Errorf("reading a PodBurst step: %w", err)
	}
	return s, nil
}

// Validate makes the fault a Validator: harness.Spec's validation calls it
// before the first case.
func (f podBurst) Validate() error {
	if f.Max < 1 {
		return fmt.Errorf("PodBurst: Max is %d: give at least 1 pod", f.Max)
	}
	return nil
}

// A fault of one's own declares what it can do as the catalog's faults
// do: a step that is Simplifiable shrinks its values, a fault that is a
// Validator has its options checked, a step with a UserChange method is a
// DesiredStateChange and one with an Armed method waits for the
// controller's next writes.
func Example_ownFault() {
	var step faults.Step = PodBurstStep{Pods: 3}
	fmt.Println(faults.FormatPlan(faults.Simpler(step)))
	fmt.Println(faults.IsUserChange(step), faults.IsArmed(step))

	var fault faults.Fault = podBurst{Max: 0}
	if v, ok := fault.(faults.Validator); ok {
		fmt.Println(v.Validate())
	}

	entry, _ := faults.EncodeStep(step)
	decoded, err := faults.DecodeStep(entry, []faults.Fault{podBurst{Max: 3}})
	fmt.Println(faults.Format(decoded), err)
	// Output:
	// [PodBurst{Pods: 1}]
	// false false
	// PodBurst: Max is 0: give at least 1 pod
	// PodBurst{Pods: 3} <nil>
}
