package lifecycle

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// pendingClaims logs each claim of the case still Pending when the case is
// judged, with the newest event about it: a claim of a class that does not
// exist stays Pending, as on a real cluster, and the binder's event says
// why ("storageclass.storage.k8s.io "fast" not found").
func (c *caseRun) pendingClaims(ctx context.Context) {
	var claims corev1.PersistentVolumeClaimList
	if err := c.userClient.List(ctx, &claims, client.InNamespace(c.namespace)); err != nil {
		c.logf("claims not listed: %v", err)
		return
	}
	var events corev1.EventList
	if err := c.userClient.List(ctx, &events, client.InNamespace(c.namespace)); err != nil {
		c.logf("events not listed: %v", err)
	}
	for _, claim := range claims.Items {
		if claim.Status.Phase != corev1.ClaimPending {
			continue
		}
		why := "no event says why"
		var newest time.Time
		for _, e := range events.Items {
			if e.InvolvedObject.Kind != "PersistentVolumeClaim" || e.InvolvedObject.UID != claim.UID {
				continue
			}
			if at := eventTime(&e); !at.Before(newest) {
				newest, why = at, e.Reason+": "+e.Message
			}
		}
		c.logf("PersistentVolumeClaim %s is Pending: %s", claim.Name, why)
	}
}

// eventTime is when an event last happened, by whichever field its
// reporter set.
func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	default:
		return e.CreationTimestamp.Time
	}
}

// deleteVolumes deletes the volumes of the case's claims, once its
// namespace is gone. The provisioner deletes a released volume itself, but
// maybe not before the case ends: volumes are cluster-scoped, and a
// campaign's would pile up. It returns what is still there at ctx's end.
func (c *caseRun) deleteVolumes(ctx context.Context) []string {
	var left []string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var volumes corev1.PersistentVolumeList
		if err := c.userClient.List(ctx, &volumes); err != nil {
			left = []string{"PersistentVolumes not listed: " + err.Error()}
			return false, nil
		}
		left = left[:0]
		for _, v := range volumes.Items {
			if v.Spec.ClaimRef == nil || v.Spec.ClaimRef.Namespace != c.namespace {
				continue
			}
			left = append(left, describeVolume(&v))
			if v.DeletionTimestamp == nil {
				if err := c.userClient.Delete(ctx, &v); err != nil && !apierrors.IsNotFound(err) {
					continue
				}
			}
			// pv-protection's finalizer goes once the claim is gone; the
			// case's claims are.
			if len(v.Finalizers) > 0 {
				_ = c.userClient.Patch(ctx, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: v.Name}},
					client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
			}
		}
		return len(left) == 0, nil
	})
	if err == nil {
		return nil
	}
	return left
}

func describeVolume(v *corev1.PersistentVolume) string {
	s := fmt.Sprintf("PersistentVolume %s of claim %s (%s)", v.Name, v.Spec.ClaimRef.Name, v.Status.Phase)
	if len(v.Finalizers) > 0 {
		s += fmt.Sprintf(" (finalizers %v)", v.Finalizers)
	}
	return s
}
