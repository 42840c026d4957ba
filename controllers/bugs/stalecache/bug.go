package stalecache

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeprop/kubeprop/controllers/podset"
)

// New returns the flawed reconciler.
func New() *podset.Reconciler {
	return &podset.Reconciler{Flaws: podset.Flaws{
		ListPods: func(ctx context.Context, r *podset.Reconciler, ps *podset.PodSet) ([]corev1.Pod, error) {
			var pods corev1.PodList
			// The bug: the cache, not the API server.
			if err := r.Client.List(ctx, &pods, client.InNamespace(ps.Namespace), client.MatchingLabels{podset.LabelName: ps.Name}); err != nil {
				return nil, err
			}
			return podset.OwnedPods(pods.Items, ps), nil
		},
	}}
}
