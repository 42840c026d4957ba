package clientgopodset

import (
	"context"

	"k8s.io/client-go/rest"

	"github.com/kubeprop/kubeprop/controllers/podset"
	"github.com/kubeprop/kubeprop/harness"
)

// Spec is the conformance check of the controller run with opts: the
// PodSet check of controllers/podset, with the controller run by
// harness.Func.
func Spec(opts Options) harness.Spec {
	spec := podset.Spec(nil)
	spec.Controller = harness.Func(func(ctx context.Context, cfg *rest.Config) error { return Run(ctx, cfg, opts) })
	return spec
}
