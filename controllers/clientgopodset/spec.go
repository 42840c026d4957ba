package clientgopodset

import (
	"context"

	"k8s.io/client-go/rest"

	"github.com/kubeprop/kubeprop/controllers/podset"
	"github.com/kubeprop/kubeprop/harness"
)

// Spec is the conformance check of the controller run with opts: the
// PodSet check of controllers/podset, with the controller run by
// harness.Func. Unless opts names a namespace, each case's instance
// watches only its case's: cases that run side by side do not see each
// other's PodSets.
func Spec(opts Options) harness.Spec {
	spec := podset.Spec(nil)
	spec.Controller = harness.Func(func(ctx context.Context, cfg *rest.Config) error {
		o := opts
		if ns, ok := harness.CaseNamespace(ctx); ok && o.Namespace == "" {
			o.Namespace = ns
		}
		return Run(ctx, cfg, o)
	})
	return spec
}
