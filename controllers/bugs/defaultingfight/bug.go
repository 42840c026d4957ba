package defaultingfight

import (
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/kubeprop/kubeprop/controllers/podset"
)

// New returns the flawed reconciler.
func New() *podset.Reconciler {
	return &podset.Reconciler{Flaws: podset.Flaws{
		Replace: func(pod *corev1.Pod, ps *podset.PodSet) bool {
			// The bug: the template's containers, as written, against the
			// pod's, as the API server defaulted them.
			return pod.Status.Phase == corev1.PodFailed || !apiequality.Semantic.DeepEqual(ps.Spec.Template.Spec.Containers, pod.Spec.Containers)
		},
	}}
}
