package storage

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// syncVolume deletes a volume of the driver that its claim released, when
// its reclaim policy is Delete, as the external provisioner does (the
// binder leaves volumes it did not provision to their provisioner).
func (p *Provisioner) syncVolume(ctx context.Context, name string) error {
	volume, err := p.volumes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if volume.DeletionTimestamp != nil || volume.Status.Phase != corev1.VolumeReleased ||
		volume.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete ||
		volume.Spec.CSI == nil || volume.Spec.CSI.Driver != Driver {
		return nil
	}
	uid := volume.UID
	err = p.client.CoreV1().PersistentVolumes().Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("storage provisioner: deleting released volume %s: %w", name, err)
	}
	return nil
}
