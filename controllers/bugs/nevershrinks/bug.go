package nevershrinks

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/kubeprop/kubeprop/controllers/podset"
)

// New returns the flawed reconciler.
func New() *podset.Reconciler {
	return &podset.Reconciler{Flaws: podset.Flaws{
		Excess: func([]corev1.Pod, int) []corev1.Pod { return nil }, // the bug
	}}
}
