package countsterminating

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/kubeprop/kubeprop/controllers/podset"
)

// New returns the flawed reconciler.
func New() *podset.Reconciler {
	return &podset.Reconciler{Flaws: podset.Flaws{
		// The bug: a pod being deleted still counts.
		Counts: func(pod *corev1.Pod) bool {
			return pod.Status.Phase != corev1.PodFailed && pod.Status.Phase != corev1.PodSucceeded
		},
	}}
}
