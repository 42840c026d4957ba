// Package storage is the hollow cluster's storage: a default StorageClass
// and a simulated CSI driver that does what an external provisioner and an
// external resizer do on a real cluster.
//
// The StorageClass ClassName ("standard") is the cluster's default, binds
// at once (Immediate) and allows expansion. kube-controller-manager's real
// persistent-volume binder marks each claim of that class for the driver
// (the volume.kubernetes.io/storage-provisioner annotation); the
// Provisioner then creates a PersistentVolume for it, pre-bound to the
// claim through claimRef, and the binder completes the binding, so that a
// StatefulSet's volume claim templates bind and its pods schedule through
// the real scheduler. A claim whose request grows is resized as the
// external resizer and the kubelet would: the volume's capacity first,
// then the claim's status.capacity. A volume released by its deleted claim
// is deleted when its reclaim policy says Delete.
//
// A claim of a class that does not exist stays Pending, as on a real
// cluster: the binder's ProvisioningFailed event says why. Volumes hold no
// data: the simulated kubelets mount nothing.
package storage
