package suite

import (
	"context"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kubeprop/kubeprop/controllers/clientgopodset"
	"github.com/kubeprop/kubeprop/controllers/podset"
	"github.com/kubeprop/kubeprop/harness"
)

// PodSetSpec is the conformance check of a PodSet controller: a PodSet of
// three replicas under the default faults, with podset.Properties.
// newReconciler gives a fresh reconciler for every start of the
// controller; with nil, set Spec.Controller to another PodSet controller.
// It lives here, not in controllers/podset, so that the controllers and
// their binaries do not link the harness.
func PodSetSpec(newReconciler func() *podset.Reconciler) harness.Spec {
	spec := harness.Spec{Scheme: podset.Scheme(), Fixtures: podset.Fixtures, Properties: podset.Properties()}
	if newReconciler != nil {
		spec.Controller = harness.Manager(func(mgr manager.Manager, opts controller.Options) error {
			return newReconciler().SetupWithManager(mgr, opts)
		})
	}
	return spec
}

// ClientGoPodSetSpec is the conformance check of the client-go PodSet
// controller run with opts: PodSetSpec with the controller run by
// harness.Func. Unless opts names a namespace, each case's instance
// watches only its case's: cases that run side by side do not see each
// other's PodSets.
func ClientGoPodSetSpec(opts clientgopodset.Options) harness.Spec {
	spec := PodSetSpec(nil)
	spec.Controller = harness.Func(func(ctx context.Context, cfg *rest.Config) error {
		o := opts
		if ns, ok := harness.CaseNamespace(ctx); ok && o.Namespace == "" {
			o.Namespace = ns
		}
		return clientgopodset.Run(ctx, cfg, o)
	})
	return spec
}
