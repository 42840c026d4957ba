package harness_test

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
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
	a, _ := env.Kubelets().AddNode(ctx, "node-a")
	if _, err := env.Kubelets().AddNode(ctx, "node-b"); err != nil {
		fmt.Println(err)
		return
	}
	cs := kubernetes.NewForConfigOrDie(env.Config())
	nodes, _ := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	fmt.Println(len(nodes.Items), "nodes")

	a.Lose()    // after 50 s of cluster time (5 s here), node-a is Unknown and tainted
	a.Recover() // heartbeats resume and the taints clear

	// Restarted at once, then with CrashLoopBackOff if it is killed again.
	_ = env.Kubelets().KillContainer(ctx, "default", "web-0", "app", kubelet.OOMKilled)
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

// A controller written on plain client-go: informers and a workqueue,
// started from a rest.Config, returning when its context ends.
func ExampleFunc() {
	var t *testing.T // the test's
	var env *harness.Env
	spec := harness.Spec{
		Controller: harness.Func(func(ctx context.Context, cfg *rest.Config) error {
			kube, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			_ = kube // start informers and workers here, e.g. sampleController(kube).Run(ctx)
			<-ctx.Done()
			return nil
		}),
		Fixtures:   func(ns string) []client.Object { return nil },
		Properties: []properties.Property{properties.NoPanics()},
	}
	harness.Check(t, env, spec)
}

// A controller binary: any language, any framework. It connects with the
// kubeconfig in $KUBECONFIG; ${KUBEPROP_NAMESPACE} in its arguments is the
// case's namespace.
func ExampleProcess() {
	var t *testing.T // the test's
	var env *harness.Env
	spec := harness.Spec{
		Controller: harness.Process("./bin/my-operator", "--watch-namespace=${KUBEPROP_NAMESPACE}", "--leader-elect=false"),
		Fixtures:   func(ns string) []client.Object { return nil },
		Properties: []properties.Property{properties.NoPanics()},
	}
	harness.Check(t, env, spec)
}

// Find is Check outside go test: a search that returns what it found, for
// reports and benchmarks. Its options are a value; Check reads them from
// rapid's flags and -kubeprop.parallel.
func ExampleFind() {
	var env *harness.Env
	var spec harness.Spec
	f, err := harness.Find(env, spec, "my-controller", harness.SearchOptions{Checks: 50, Seed: 7, Parallel: 4, Dir: "reports/my-controller"})
	switch {
	case err != nil:
		fmt.Println(err)
	case f == nil:
		fmt.Println("every plan passed")
	default:
		fmt.Println(f.Message, faults.FormatPlan(f.Plan), f.Scenario)
	}
}
