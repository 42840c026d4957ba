package recreatescrashing

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/kubeprop/kubeprop/controllers/podset"
)

// New returns the flawed reconciler.
func New() *podset.Reconciler {
	return &podset.Reconciler{Flaws: podset.Flaws{
		Replace: func(pod *corev1.Pod, ps *podset.PodSet) bool {
			if pod.Status.Phase == corev1.PodFailed {
				return true
			}
			// The bug: a crashed container means a new pod, at once.
			for _, c := range pod.Status.ContainerStatuses {
				if c.RestartCount > 0 {
					return true
				}
			}
			return false
		},
	}}
}
