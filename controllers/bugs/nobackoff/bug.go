package nobackoff

import (
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kubeprop/kubeprop/controllers/podset"
)

// New returns the flawed reconciler.
func New() *podset.Reconciler {
	return &podset.Reconciler{Flaws: podset.Flaws{
		// The bug: the error is dropped and the retry comes at once.
		OnError: func(error) (ctrl.Result, error) { return ctrl.Result{RequeueAfter: 10 * time.Millisecond}, nil },
	}}
}
