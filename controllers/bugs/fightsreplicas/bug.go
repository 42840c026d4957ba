package fightsreplicas

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeprop/kubeprop/controllers/podset"
)

// New returns the flawed reconciler.
func New() *podset.Reconciler {
	var mu sync.Mutex
	pinned := map[types.UID]int32{}
	return &podset.Reconciler{Flaws: podset.Flaws{
		After: func(ctx context.Context, r *podset.Reconciler, ps *podset.PodSet) error {
			mu.Lock()
			want, seen := pinned[ps.UID]
			if !seen {
				want = ps.Replicas()
				pinned[ps.UID] = want
			}
			mu.Unlock()
			if want == ps.Replicas() {
				return nil
			}
			// The bug: the field is taken back, by force.
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": podset.GroupVersion.String(), "kind": "PodSet",
				"metadata": map[string]any{"name": ps.Name, "namespace": ps.Namespace},
				"spec":     map[string]any{"replicas": int64(want)},
			}}
			return r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(podset.Manager), client.ForceOwnership)
		},
	}}
}
