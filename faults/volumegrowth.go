package faults

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/wait"
	"pgregory.net/rapid"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// VolumeGrowthStep is the user growing the storage request of the
// Claim-th PersistentVolumeClaim of the namespace not being deleted (by
// name, modulo their number) by ByGi gibibytes, as one grows a
// StatefulSet's volume: its claims are the StatefulSet controller's, made
// from a template that cannot change, so the user edits the claim. The
// hollow cluster's resizer grows the volume, then the claim's
// status.capacity. The claim is picked among all, bound or not, so that
// the same plan grows the same claim in every run (a reference run's
// too); only a bound claim's request may change, so the step waits for it
// to bind. The step names the claim it grew (Name): how many claims there
// are when it comes is timing (a StatefulSet makes them one by one), and
// a run that grew another claim is another run.
type VolumeGrowthStep struct {
	Claim int    `json:"claim"`
	ByGi  int    `json:"byGi"`
	Name  string `json:"name,omitempty"`
}

func (VolumeGrowthStep) Fault() string { return "VolumeGrowth" }

var _ DesiredStateChange = VolumeGrowthStep{}

// claimBindWait bounds VolumeGrowth's wait for its claim to bind (a
// variable for the tests).
var claimBindWait = 10 * time.Second

// UserChange marks the step as the user's, not a fault's.
func (VolumeGrowthStep) UserChange() {}

func (s VolumeGrowthStep) Apply(ctx context.Context, t Target) error {
	if s.ByGi <= 0 {
		return noOp("byGi is not set")
	}
	var claim corev1.PersistentVolumeClaim
	if s.Name != "" {
		claim.Name, claim.Namespace = s.Name, t.Namespace()
	} else {
		var claims corev1.PersistentVolumeClaimList
		if err := t.UserClient().List(ctx, &claims, client.InNamespace(t.Namespace())); err != nil {
			return fmt.Errorf("VolumeGrowth: listing the claims: %w", err)
		}
		var live []corev1.PersistentVolumeClaim
		for _, c := range claims.Items {
			if c.DeletionTimestamp == nil {
				live = append(live, c)
			}
		}
		if len(live) == 0 {
			return noOp("no claim to grow")
		}
		sort.Slice(live, func(i, j int) bool { return live[i].Name < live[j].Name })
		claim = live[nth(s.Claim, len(live))]
		t.NameStep(VolumeGrowthStep{Claim: s.Claim, ByGi: s.ByGi, Name: claim.Name})
	}
	// Each read with the step's context, not the poll's: the client's
	// rate limiter refuses a wait that would pass the poll's deadline,
	// and that refusal is no answer about the claim.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, claimBindWait, true, func(context.Context) (bool, error) {
		err := t.UserClient().Get(ctx, client.ObjectKeyFromObject(&claim), &claim)
		return err == nil && claim.Status.Phase == corev1.ClaimBound && claim.DeletionTimestamp == nil, client.IgnoreNotFound(err)
	})
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case wait.Interrupted(err):
		return noOp("claim %s is not there and bound", claim.Name)
	case err != nil:
		return fmt.Errorf("VolumeGrowth: reading claim %s: %w", claim.Name, err)
	}
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
	return []Step{VolumeGrowthStep{Claim: s.Claim, ByGi: 1, Name: s.Name}}
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
