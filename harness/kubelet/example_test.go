package kubelet_test

import (
	"context"
	"fmt"

	"k8s.io/client-go/rest"

	"github.com/kubeprop/kubeprop/harness/kubelet"
)

// Simulated kubelets against an API server, at ten times real time.
func ExampleStart() {
	var cfg *rest.Config // the simulator's identity, e.g. from cluster.Cluster.AddUser
	sim, err := kubelet.Start(context.Background(), cfg, kubelet.Options{
		TimeScale: 10,
		OnEvent:   func(e kubelet.Event) { fmt.Println(e.Kind, e.Node, e.Pod) },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sim.Stop()
	node, err := sim.AddNode(context.Background(), "node-a")
	if err != nil {
		fmt.Println(err)
		return
	}
	node.Lose()
	node.Recover()
}
