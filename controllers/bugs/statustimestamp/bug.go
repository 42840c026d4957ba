package statustimestamp

import (
	"time"

	"github.com/kubeprop/kubeprop/controllers/podset"
)

// New returns the flawed reconciler.
func New() *podset.Reconciler {
	return &podset.Reconciler{Flaws: podset.Flaws{
		// The bug: a field that differs on every reconcile.
		Status: func(s *podset.PodSetStatus) { s.LastReconcileTime = time.Now().UTC().Format(time.RFC3339Nano) },
	}}
}
