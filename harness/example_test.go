package harness_test

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeprop/kubeprop/harness"
	"github.com/kubeprop/kubeprop/harness/kubelet"
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
