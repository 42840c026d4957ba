package properties_test

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/kubeprop/kubeprop/properties"
)

// The properties a controller author lists in a harness.Spec.
func Example() {
	deploymentReady := func(s properties.State) error {
		for _, u := range s.ByKind("Deployment") {
			d, err := properties.As[appsv1.Deployment](u)
			if err != nil {
				return err
			}
			if d.Spec.Replicas != nil && d.Status.ReadyReplicas != *d.Spec.Replicas {
				return fmt.Errorf("Deployment %s has %d of %d replicas ready", d.Name, d.Status.ReadyReplicas, *d.Spec.Replicas)
			}
		}
		return nil
	}
	props := []properties.Property{
		properties.Converges("deployment-ready", deploymentReady, properties.ConvergeOptions{Within: 30 * time.Second}),
		properties.BoundedBackoff(properties.BackoffOptions{}),
		properties.NoFightLoop(properties.FightOptions{}),
		properties.Quiescent(properties.QuiesceOptions{}),
		properties.NoPanics(),
	}
	for _, p := range props {
		fmt.Println(p.Name())
	}
	// Output:
	// deployment-ready
	// bounded-backoff
	// no-fight-loop
	// quiescent
	// no-panics
}

// A property of changes: a Deployment's replicas never drop by more than
// one from one observed state to the next.
func ExampleTransitions() {
	replicas := func(s properties.State, name string) int32 {
		if u := s.Get("Deployment", name); u != nil {
			if d, err := properties.As[appsv1.Deployment](u); err == nil && d.Spec.Replicas != nil {
				return *d.Spec.Replicas
			}
		}
		return 0
	}
	p := properties.Transitions("scales-down-one-at-a-time", func(prev, next properties.State) error {
		for _, d := range next.ByKind("Deployment") {
			if was, now := replicas(prev, d.GetName()), replicas(next, d.GetName()); now < was-1 {
				return fmt.Errorf("Deployment %s went from %d replicas to %d", d.GetName(), was, now)
			}
		}
		return nil
	})
	fmt.Println(p.Name())
	// Output: scales-down-one-at-a-time
}
