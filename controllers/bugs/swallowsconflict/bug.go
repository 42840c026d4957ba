package swallowsconflict

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kubeprop/kubeprop/controllers/podset"
)

// New returns the flawed reconciler.
func New() *podset.Reconciler {
	return &podset.Reconciler{Flaws: podset.Flaws{
		OnError: func(err error) (ctrl.Result, error) {
			if apierrors.IsConflict(err) {
				return ctrl.Result{}, nil // the bug: "someone else changed it, they'll trigger us"
			}
			return ctrl.Result{}, err
		},
	}}
}
