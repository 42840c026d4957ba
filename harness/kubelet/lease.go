package kubelet

import (
	"context"
	"fmt"
	"math"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

type leaseState struct {
	lease *coordinationv1.Lease
}

// renewLease creates or renews the node's Lease in kube-node-lease, as the
// kubelet's nodelease controller does: an update of the last lease it wrote,
// falling back to a read on conflict.
func (n *Node) renewLease(ctx context.Context, nodeUID types.UID) error {
	sim := n.sim
	leases := sim.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(sim.opts.Clock.Now())
	n.mu.Lock()
	st := n.lease
	n.mu.Unlock()
	if st == nil {
		durationSeconds := int32(max(1, math.Round(sim.opts.wall(nodeLeaseDuration).Seconds())))
		lease := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name:      n.name,
				Namespace: corev1.NamespaceNodeLease,
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "v1", Kind: "Node", Name: n.name, UID: nodeUID,
				}},
			},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(n.name),
				LeaseDurationSeconds: ptr.To(durationSeconds),
				RenewTime:            &now,
			},
		}
		created, err := leases.Create(ctx, lease, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			created, err = leases.Get(ctx, n.name, metav1.GetOptions{})
		}
		if err != nil {
			return fmt.Errorf("kubelet simulator: creating the lease of node %s: %w", n.name, err)
		}
		n.setLease(created)
		if created.Spec.RenewTime != nil && created.Spec.RenewTime.Equal(&now) {
			return nil
		}
		st = &leaseState{lease: created}
	}
	lease := st.lease.DeepCopy()
	lease.Spec.RenewTime = &now
	updated, err := leases.Update(ctx, lease, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		n.mu.Lock()
		n.lease = nil
		n.mu.Unlock()
		return n.renewLease(ctx, nodeUID)
	}
	if err != nil {
		return fmt.Errorf("kubelet simulator: renewing the lease of node %s: %w", n.name, err)
	}
	n.setLease(updated)
	return nil
}

func (n *Node) setLease(l *coordinationv1.Lease) {
	n.mu.Lock()
	n.lease = &leaseState{lease: l}
	n.mu.Unlock()
}
