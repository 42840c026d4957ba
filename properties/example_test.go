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
		properties.Converges("deployment-ready", deploymentReady, 30*time.Second),
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
