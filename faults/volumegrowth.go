package faults

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"pgregory.net/rapid"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// VolumeGrowthStep is the user growing the storage request of the
// Claim-th bound PersistentVolumeClaim of the namespace (by name, modulo
// their number) by ByGi gibibytes, as one grows a StatefulSet's volume: its
// claims are the StatefulSet controller's, made from a template that
// cannot change, so the user edits the claim. The hollow cluster's
// resizer grows the volume, then the claim's status.capacity.
type VolumeGrowthStep struct {
	Claim int `json:"claim"`
	ByGi  int `json:"byGi"`
}

func (VolumeGrowthStep) Fault() string { return "VolumeGrowth" }

var _ DesiredStateChange = VolumeGrowthStep{}

// UserChange marks the step as the user's, not a fault's.
func (VolumeGrowthStep) UserChange() {}

func (s VolumeGrowthStep) Apply(ctx context.Context, t Target) error {
	if s.ByGi <= 0 {
		return noOp("byGi is not set")
	}
	var claims corev1.PersistentVolumeClaimList
	if err := t.UserClient().List(ctx, &claims, client.InNamespace(t.Namespace())); err != nil {
		return fmt.Errorf("VolumeGrowth: listing the claims: %w", err)
	}
	// Only a bound claim's request may change (the API server refuses
	// others').
	var live []corev1.PersistentVolumeClaim
	for _, c := range claims.Items {
		if c.DeletionTimestamp == nil && c.Status.Phase == corev1.ClaimBound {
			live = append(live, c)
		}
	}
	if len(live) == 0 {
		return noOp("no bound claim to grow")
	}
	sort.Slice(live, func(i, j int) bool { return live[i].Name < live[j].Name })
	claim := live[nth(s.Claim, len(live))]
	size := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	size.Add(*resource.NewQuantity(int64(s.ByGi)<<30, resource.BinarySI))
	patch := fmt.Sprintf(`{"spec":{"resources":{"requests":{"storage":%q}}}}`, size.String())
	if err := t.UserClient().Patch(ctx, &claim, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		return fmt.Errorf("VolumeGrowth: growing claim %s to %s: %w", claim.Name, size.String(), err)
	}
	return nil
}

var _ Simplifiable = VolumeGrowthStep{}

// Simpler: growing by 1 GiB is the simplest growth.
func (s VolumeGrowthStep) Simpler() []Step {
	if s.ByGi <= 1 {
		return nil
	}
	return []Step{VolumeGrowthStep{Claim: s.Claim, ByGi: 1}}
}

// VolumeGrowth is the user's growth of a volume: a claim's storage
// request raised. It is in the Catalog but not in Default: only
// controllers whose pods have claims feel it.
func VolumeGrowth() Fault { return volumeGrowth{} }

type volumeGrowth struct{}

func (volumeGrowth) Name() string { return VolumeGrowthStep{}.Fault() }

func (volumeGrowth) Steps(Config) *rapid.Generator[Step] {
	return rapid.Custom(func(t *rapid.T) Step {
		return VolumeGrowthStep{Claim: intIn(t, 0, 9, "claim"), ByGi: amountIn(t, 1, 10, "byGi")}
	})
}

func (volumeGrowth) Decode(b []byte) (Step, error) { return decodeStep[VolumeGrowthStep](b) }
