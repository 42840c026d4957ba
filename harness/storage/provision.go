package storage

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Annotations of the persistent-volume binder and the external provisioner
// (k8s.io/component-helpers/storage/volume).
const (
	annStorageProvisioner = "volume.kubernetes.io/storage-provisioner"
	annProvisionedBy      = "pv.kubernetes.io/provisioned-by"
)

// HandedToDriver reports whether a claim's annotations say the binder
// gave it to the driver to provision (the external provisioner's test).
func HandedToDriver(annotations map[string]string) bool {
	return annotations[annStorageProvisioner] == Driver
}

// syncClaim provisions a volume for a claim the binder gave to the driver,
// and resizes the volume of a bound claim whose request grew.
func (p *Provisioner) syncClaim(ctx context.Context, namespace, name string) error {
	claim, err := p.claims.PersistentVolumeClaims(namespace).Get(name)
	if apierrors.IsNotFound(err) || err == nil && claim.DeletionTimestamp != nil {
		return nil
	}
	if err != nil {
		return err
	}
	if claim.Spec.VolumeName == "" {
		return p.provision(ctx, claim)
	}
	return p.resize(ctx, claim)
}

// provision creates the volume of a claim that the binder marked for the
// driver (the class's provisioner), as the external provisioner does: the
// claim's request, access modes and volume mode, pre-bound to the claim.
// The volume's name derives from the claim's UID, so a claim handled
// twice gets one volume.
func (p *Provisioner) provision(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	if !HandedToDriver(claim.Annotations) {
		return nil // not ours, or the binder has not got to it yet
	}
	name := "pvc-" + string(claim.UID)
	if _, err := p.volumes.Get(name); err == nil {
		return nil
	}
	request, ok := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		return nil // the API server refuses such claims
	}
	policy := corev1.PersistentVolumeReclaimDelete
	if class, err := p.client.StorageV1().StorageClasses().Get(ctx, className(claim), metav1.GetOptions{}); err == nil && class.ReclaimPolicy != nil {
		policy = *class.ReclaimPolicy
	}
	volume := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{annProvisionedBy: Driver}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: request},
			AccessModes:                   claim.Spec.AccessModes,
			VolumeMode:                    claim.Spec.VolumeMode,
			StorageClassName:              className(claim),
			PersistentVolumeReclaimPolicy: policy,
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: Driver, VolumeHandle: name, FSType: "ext4"}},
		},
	}
	_, err := p.client.CoreV1().PersistentVolumes().Create(ctx, volume, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("storage provisioner: provisioning a volume for claim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	return nil
}

func className(claim *corev1.PersistentVolumeClaim) string {
	if claim.Spec.StorageClassName != nil {
		return *claim.Spec.StorageClassName
	}
	return ""
}

// resize grows the volume of a bound claim whose request is more than its
// capacity, as the external resizer and then the kubelet do: the volume's
// capacity, then the claim's status (capacity and allocated resources,
// its resize conditions cleared). The API server refuses a grown request
// unless the class allows expansion, so every grown request is to follow.
func (p *Provisioner) resize(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	if claim.Status.Phase != corev1.ClaimBound {
		return nil
	}
	request, ok := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	capacity := claim.Status.Capacity[corev1.ResourceStorage]
	if !ok || request.Cmp(capacity) <= 0 {
		return nil
	}
	volume, err := p.volumes.Get(claim.Spec.VolumeName)
	if err != nil {
		return fmt.Errorf("storage provisioner: resizing claim %s/%s: its volume: %w", claim.Namespace, claim.Name, err)
	}
	if volume.Spec.CSI == nil || volume.Spec.CSI.Driver != Driver {
		return nil // not ours
	}
	if current := volume.Spec.Capacity[corev1.ResourceStorage]; request.Cmp(current) > 0 {
		volume = volume.DeepCopy()
		volume.Spec.Capacity[corev1.ResourceStorage] = request
		if _, err := p.client.CoreV1().PersistentVolumes().Update(ctx, volume, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("storage provisioner: resizing volume %s: %w", volume.Name, err)
		}
	}
	claim = claim.DeepCopy()
	claim.Status.Capacity = withStorage(claim.Status.Capacity, request)
	claim.Status.AllocatedResources = withStorage(claim.Status.AllocatedResources, request)
	claim.Status.AllocatedResourceStatuses = nil
	var kept []corev1.PersistentVolumeClaimCondition
	for _, c := range claim.Status.Conditions {
		if c.Type != corev1.PersistentVolumeClaimResizing && c.Type != corev1.PersistentVolumeClaimFileSystemResizePending {
			kept = append(kept, c)
		}
	}
	claim.Status.Conditions = kept
	if _, err := p.client.CoreV1().PersistentVolumeClaims(claim.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("storage provisioner: resizing claim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	return nil
}

func withStorage(list corev1.ResourceList, q resource.Quantity) corev1.ResourceList {
	out := corev1.ResourceList{}
	for k, v := range list {
		out[k] = v
	}
	out[corev1.ResourceStorage] = q
	return out
}
