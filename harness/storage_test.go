package harness_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness"
	"github.com/kubeprop/kubeprop/harness/storage"
	"github.com/kubeprop/kubeprop/properties"
)

// TestStatefulSetVolumes runs kube-controller-manager's StatefulSet
// controller and volume binder with the simulated provisioner: the volume
// claim templates' claims bind and the pods run; a grown claim is resized;
// a deleted claim's volume is deleted; a claim of an unknown class stays
// Pending.
func TestStatefulSetVolumes(t *testing.T) {
	cs := clientset(t)
	ctx := context.Background()
	ns := namespace(t, cs)
	addNodes(t, 2)

	_, err := cs.AppsV1().StatefulSets(ns).Create(ctx, statefulSet(ns, 2), metav1.CreateOptions{})
	require.NoError(t, err)
	waitReady(t, cs, ns, "db", 2)
	for i := range 2 {
		claim := waitClaim(t, cs, ns, fmt.Sprintf("data-db-%d", i), "1Gi")
		pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, claim.Spec.VolumeName, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, storage.Driver, pv.Spec.CSI.Driver)
		require.Equal(t, corev1.VolumeBound, pv.Status.Phase)
		require.Equal(t, claim.UID, pv.Spec.ClaimRef.UID, "pre-bound to its claim")
	}

	// Growing a claim: the volume first, then the claim's status.
	_, err = cs.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, "data-db-0", types.MergePatchType,
		[]byte(`{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	claim := waitClaim(t, cs, ns, "data-db-0", "2Gi")
	pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, claim.Spec.VolumeName, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "2Gi", ptr.To(pv.Spec.Capacity[corev1.ResourceStorage]).String())

	// Scaled down and its claim deleted, a replica's volume is deleted
	// (the class's reclaim policy is Delete).
	gone := waitClaim(t, cs, ns, "data-db-1", "1Gi").Spec.VolumeName
	_, err = cs.AppsV1().StatefulSets(ns).Patch(ctx, "db", types.MergePatchType, []byte(`{"spec":{"replicas":1}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	waitReady(t, cs, ns, "db", 1)
	require.NoError(t, cs.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "data-db-1", metav1.DeleteOptions{}))
	eventually(t, 30*time.Second, "volume "+gone+" deleted", func(ctx context.Context) (bool, string, error) {
		pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, gone, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, "", err
		}
		return false, string(pv.Status.Phase), nil
	})

	// A class that does not exist: Pending, as on a real cluster.
	_, err = cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claimOf(ns, "nowhere", "fast"), metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, 30*time.Second, "the binder's ProvisioningFailed event of claim nowhere", func(ctx context.Context) (bool, string, error) {
		events, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=nowhere,reason=ProvisioningFailed"})
		if err != nil {
			return false, "", err
		}
		return len(events.Items) > 0, fmt.Sprintf("%d events", len(events.Items)), nil
	})
	c, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "nowhere", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, corev1.ClaimPending, c.Status.Phase)
	require.Empty(t, c.Spec.VolumeName)
}

// TestCaseRecordsClaims: a case records its claims like its pods, its
// timeline says why a claim is Pending, and its teardown deletes its
// volumes.
func TestCaseRecordsClaims(t *testing.T) {
	spec := harness.Spec{
		Fixtures: func(ns string) []client.Object {
			return []client.Object{statefulSet(ns, 2), claimOf(ns, "nowhere", "fast")}
		},
		// kube-controller-manager's StatefulSet controller is the
		// controller; the one under test does nothing.
		Controller: harness.Func(func(ctx context.Context, _ *rest.Config) error {
			<-ctx.Done()
			return nil
		}),
		Properties: []properties.Property{properties.Converges("three bound claims", func(s properties.State) error {
			bound := 0
			for _, c := range s.ByKind("PersistentVolumeClaim") {
				if phase, _, _ := unstructured.NestedString(c.Object, "status", "phase"); phase == "Bound" {
					bound++
				}
			}
			if bound != 3 {
				return fmt.Errorf("%d claims bound, want 3", bound)
			}
			return nil
		}, properties.ConvergeOptions{Within: 30 * time.Second})},
		Setup: 30 * time.Second, SettleCap: 5 * time.Second,
		Ready: writesNothing,
	}
	rep, err := harness.Run(context.Background(), env, spec, []faults.Step{faults.ScaleChangeStep{Field: "spec.replicas", Value: 3}})
	require.NoError(t, err)
	require.False(t, rep.Failed(), "%+v\n%s", rep.Failures, strings.Join(rep.Timeline, "\n"))
	timeline := strings.Join(rep.Timeline, "\n")
	require.Contains(t, timeline, `PersistentVolumeClaim nowhere is Pending: ProvisioningFailed: storageclass.storage.k8s.io "fast" not found`)
	require.Empty(t, rep.Teardown.Left)
	ns := caseNamespace(t, rep)
	volumes, err := clientset(t).CoreV1().PersistentVolumes().List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	for _, v := range volumes.Items {
		require.False(t, v.Spec.ClaimRef != nil && v.Spec.ClaimRef.Namespace == ns, "volume %s of the case left", v.Name)
	}
}

// waitClaim waits until a claim is Bound with the capacity given.
func waitClaim(t *testing.T, cs kubernetes.Interface, ns, name, capacity string) *corev1.PersistentVolumeClaim {
	t.Helper()
	var claim *corev1.PersistentVolumeClaim
	eventually(t, 30*time.Second, fmt.Sprintf("claim %s Bound with %s", name, capacity), func(ctx context.Context) (bool, string, error) {
		c, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, "not created", nil
		}
		if err != nil {
			return false, "", err
		}
		claim = c
		got := c.Status.Capacity[corev1.ResourceStorage]
		return c.Status.Phase == corev1.ClaimBound && got.String() == capacity, fmt.Sprintf("%s %s", c.Status.Phase, got.String()), nil
	})
	return claim
}

// statefulSet is a StatefulSet named db with a 1Gi volume claim template
// of the default class.
func statefulSet(ns string, replicas int32) *appsv1.StatefulSet {
	labels := map[string]string{"app": "db"}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "db", Image: "registry.k8s.io/pause:3.10",
					VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				}}},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
		},
	}
}

// claimOf is a 1Gi claim of the class given.
func claimOf(ns, name, class string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To(class),
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}
