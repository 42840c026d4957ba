// Command database-operator is the Database operator (controllers/database)
// as a binary, packaged the way an operator is for a cluster: it watches
// only its own namespace, named by $OPERATOR_NAMESPACE, connects with the
// kubeconfig in $KUBECONFIG (or --kubeconfig; in a pod, its service
// account), serves no metrics or health probes, and stops on SIGTERM or
// SIGINT. --leader-elect holds a Lease in its namespace, so that of two
// replicas one reconciles. --seeded-bug runs a seeded-bug variant
// (controllers/bugs/resizemarksfirst, cleanupbyname, observedafter)
// instead, for a run that kubeprop must fail.
//
// It does not link kubeprop's harness.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2/textlogger"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kubeprop/kubeprop/controllers/bugs/cleanupbyname"
	"github.com/kubeprop/kubeprop/controllers/bugs/observedafter"
	"github.com/kubeprop/kubeprop/controllers/bugs/resizemarksfirst"
	"github.com/kubeprop/kubeprop/controllers/database"
)

// seededBugs are the variants --seeded-bug runs.
var seededBugs = map[string]func() *database.Reconciler{
	"resizemarksfirst": resizemarksfirst.New,
	"cleanupbyname":    cleanupbyname.New,
	"observedafter":    observedafter.New,
}

func main() {
	bug := flag.String("seeded-bug", "", "run a seeded bug: "+strings.Join(bugNames(), ", "))
	leaderElect := flag.Bool("leader-elect", false, "hold a Lease in the operator's namespace; reconcile only while holding it")
	flag.Parse()
	newReconciler := func() *database.Reconciler { return &database.Reconciler{} }
	if *bug != "" {
		var ok bool
		if newReconciler, ok = seededBugs[*bug]; !ok {
			fmt.Fprintf(os.Stderr, "database-operator: unknown --seeded-bug %q; the ones there are: %s\n", *bug, strings.Join(bugNames(), ", "))
			os.Exit(2)
		}
	}
	namespace := os.Getenv("OPERATOR_NAMESPACE")
	if namespace == "" {
		fmt.Fprintln(os.Stderr, "database-operator: unable to find operator namespace: set OPERATOR_NAMESPACE")
		os.Exit(2)
	}
	ctrl.SetLogger(textlogger.NewLogger(textlogger.NewConfig()))
	if err := run(namespace, *leaderElect, newReconciler()); err != nil {
		fmt.Fprintln(os.Stderr, "database-operator:", err)
		os.Exit(1)
	}
}

func run(namespace string, leaderElect bool, r *database.Reconciler) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := database.AddToScheme(scheme); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         leaderElect,
		LeaderElectionID:       "database-operator.apps.kubeprop.dev",
		// Its own namespace: the operator may write nowhere else.
		LeaderElectionNamespace: namespace,
		LeaseDuration:           ptr.To(4 * time.Second),
		RenewDeadline:           ptr.To(3 * time.Second),
		RetryPeriod:             ptr.To(time.Second),
		// A replica stopped on SIGTERM hands the Lease over at once.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := r.SetupWithManager(mgr, controller.Options{}); err != nil {
		return fmt.Errorf("setting up the operator: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running the manager: %w", err)
	}
	return nil
}

func bugNames() []string {
	var names []string
	for name := range seededBugs {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
