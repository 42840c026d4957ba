package harness_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestDeploymentScales runs the real Deployment and ReplicaSet controllers,
// the real scheduler and the simulated kubelets together.
func TestDeploymentScales(t *testing.T) {
	cs := clientset(t)
	ctx := context.Background()
	ns := namespace(t, cs)
	addNodes(t, 3)

	deploy(t, cs, ns, "web", 3)
	for _, replicas := range []int32{5, 1} {
		patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
		_, err := cs.AppsV1().Deployments(ns).Patch(ctx, "web", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		require.NoError(t, err)
		waitReady(t, cs, ns, "web", int(replicas))
	}

	// What the kubelet wrote is what a kubelet writes.
	p := waitReady(t, cs, ns, "web", 1)[0]
	require.NotEmpty(t, p.Status.PodIP)
	require.NotEmpty(t, p.Status.HostIP)
	require.NotNil(t, p.Status.StartTime)
	require.Len(t, p.Status.ContainerStatuses, 1)
	cst := p.Status.ContainerStatuses[0]
	require.NotNil(t, cst.State.Running)
	require.True(t, cst.Ready)
	require.Contains(t, cst.ContainerID, "containerd://")
	for _, typ := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.PodReadyToStartContainers, corev1.ContainersReady, corev1.PodReady} {
		found := false
		for _, c := range p.Status.Conditions {
			if c.Type == typ {
				found = true
				require.Equal(t, corev1.ConditionTrue, c.Status, "condition %s", typ)
			}
		}
		require.True(t, found, "condition %s missing", typ)
	}
	// The readiness probe's 5 s initial delay is cluster time: Ready comes
	// at least 5 s (cluster) after the container started.
	var readyAt metav1.Time
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			readyAt = c.LastTransitionTime
		}
	}
	require.False(t, readyAt.Before(&cst.State.Running.StartedAt), "Ready before the container started")
}
