// Command podset-controller is the client-go PodSet controller
// (controllers/clientgopodset) as a binary: the controller that the README's
// "Test any controller binary" runs with harness.Process and kubeprop run.
// It connects with the kubeconfig in $KUBECONFIG (or --kubeconfig) and
// stops on SIGTERM or SIGINT. --seeded-bug=nobackoff runs the seeded-bug
// twin (controllers/bugs/clientgonobackoff) instead: retries with no
// back-off, for a run that kubeprop must fail.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeprop/kubeprop/controllers/bugs/clientgonobackoff"
	"github.com/kubeprop/kubeprop/controllers/clientgopodset"
)

func main() {
	namespace := flag.String("namespace", "", "watch only this namespace (empty: all)")
	workers := flag.Int("workers", 2, "sync workers")
	// controller-runtime's client defaults; client-go's own (5 and 10)
	// would throttle a retry storm into an accidental back-off.
	qps := flag.Float64("kube-api-qps", 20, "requests per second to the API server")
	burst := flag.Int("kube-api-burst", 30, "request burst to the API server")
	bug := flag.String("seeded-bug", "", "run a seeded bug: nobackoff")
	flag.Parse()
	opts := clientgopodset.Options{}
	switch *bug {
	case "":
	case "nobackoff":
		opts = clientgonobackoff.Options()
	default:
		fmt.Fprintf(os.Stderr, "podset-controller: unknown --seeded-bug %q; the one there is: nobackoff\n", *bug)
		os.Exit(2)
	}
	opts.Namespace, opts.Workers = *namespace, *workers
	// controller-runtime, linked in through the harness, defines
	// --kubeconfig already.
	kubeconfig := os.Getenv("KUBECONFIG")
	if f := flag.Lookup("kubeconfig"); f != nil && f.Value.String() != "" {
		kubeconfig = f.Value.String()
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "podset-controller:", err)
		os.Exit(2)
	}
	cfg.QPS, cfg.Burst = float32(*qps), *burst
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := clientgopodset.Run(ctx, cfg, opts); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "podset-controller:", err)
		os.Exit(1)
	}
}
