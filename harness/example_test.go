package harness_test

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kubeprop/kubeprop/faults"

	"github.com/kubeprop/kubeprop/harness"
	"github.com/kubeprop/kubeprop/harness/kubelet"
	"github.com/kubeprop/kubeprop/properties"
)

// A hollow cluster with two simulated nodes; one is lost and recovers, and
// a container is OOM-killed. In a test binary, start the Env once in
// TestMain and share it.
func ExampleStart() {
	env, err := harness.Start(harness.EnvOptions{TimeScale: 10})
	if err != nil {
		fmt.Println(err) // names what is missing and how to fix it, e.g. `make bins`
		return
	}
	defer env.Stop()

	ctx := context.Background()
	a, _ := env.Kubelets.AddNode(ctx, "node-a")
	if _, err := env.Kubelets.AddNode(ctx, "node-b"); err != nil {
		fmt.Println(err)
		return
	}
	cs := kubernetes.NewForConfigOrDie(env.Config())
	nodes, _ := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	fmt.Println(len(nodes.Items), "nodes")

	a.Lose()    // after 50 s of cluster time (5 s here), node-a is Unknown and tainted
	a.Recover() // heartbeats resume and the taints clear

	// Restarted at once, then with CrashLoopBackOff if it is killed again.
	_ = env.Kubelets.KillContainer(ctx, "default", "web-0", "app", kubelet.OOMKilled)
}

// The shape of a conformance test: a Spec, Check to draw and shrink fault
// plans, ReplayDir to replay the saved scenarios on every go test.
func ExampleCheck() {
	var t *testing.T // the test's
	spec := harness.Spec{
		Controller: harness.Manager(func(mgr manager.Manager, opts controller.Options) error {
			return nil // (&myctrl.Reconciler{}).SetupWithManager(mgr, opts)
		}),
		Fixtures: func(ns string) []client.Object { return nil },
		Faults:   faults.Default(),
		Properties: []properties.Property{
			properties.Quiescent(properties.QuiesceOptions{}),
			properties.NoPanics(),
		},
	}
	var env *harness.Env // started in TestMain
	harness.Check(t, env, spec)
	harness.ReplayDir(t, env, spec, harness.ScenarioDir)
}
