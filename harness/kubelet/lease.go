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

// renewLease creates or renews the node's Lease in kube-node-lease, as the
// kubelet's nodelease controller does: an update of the last lease it
// wrote, and after a conflict a fresh read on the next renewal.
func (n *Node) renewLease(ctx context.Context, nodeUID types.UID) error {
	leases := n.sim.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(n.sim.opts.Clock.Now())
	n.mu.Lock()
	lease := n.lease.DeepCopy()
	n.mu.Unlock()

	var err error
	if lease == nil {
		lease, err = leases.Get(ctx, n.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			lease, err = leases.Create(ctx, n.newLease(nodeUID, now), metav1.CreateOptions{})
			if err == nil {
				n.setLease(lease)
				return nil
			}
		}
		if err != nil {
			return fmt.Errorf("kubelet simulator: creating the lease of node %s: %w", n.name, err)
		}
	}
	lease.Spec.RenewTime = &now
	updated, err := leases.Update(ctx, lease, metav1.UpdateOptions{})
	if err != nil {
		n.setLease(nil)
		return fmt.Errorf("kubelet simulator: renewing the lease of node %s: %w", n.name, err)
	}
	n.setLease(updated)
	return nil
}

// newLease is the Lease a kubelet creates: owned by its Node, so that the
// garbage collector deletes it with the Node.
func (n *Node) newLease(nodeUID types.UID, now metav1.MicroTime) *coordinationv1.Lease {
	durationSeconds := int32(max(1, math.Round(n.sim.opts.wall(nodeLeaseDuration).Seconds())))
	return &coordinationv1.Lease{
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
}

func (n *Node) setLease(l *coordinationv1.Lease) {
	n.mu.Lock()
	n.lease = l
	n.mu.Unlock()
}
