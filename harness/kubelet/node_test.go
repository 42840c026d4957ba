package kubelet

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeSimulator is a simulator on a fake API server and a fake clock: its
// nodes register but never tick.
func fakeSimulator() *Simulator {
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := Options{Clock: clock}.withDefaults()
	return &Simulator{opts: opts, client: fake.NewClientset(), nodeByKey: map[string]*Node{}, pods: map[string]*podState{}}
}

func TestAddNodeWithLabels(t *testing.T) {
	ctx := context.Background()
	sim := fakeSimulator()
	n, err := sim.AddNodeWithLabels(ctx, "kp-1-node-0", map[string]string{
		corev1.LabelTopologyZone: "kp-1",
		corev1.LabelOSStable:     "plan9", // given labels win
	})
	require.NoError(t, err)
	defer func() { require.NoError(t, n.Remove(ctx)) }()
	node, err := sim.client.CoreV1().Nodes().Get(ctx, "kp-1-node-0", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, map[string]string{
		corev1.LabelHostname:     "kp-1-node-0",
		corev1.LabelOSStable:     "plan9",
		corev1.LabelArchStable:   "amd64",
		"kubeprop.dev/simulated": "true",
		corev1.LabelTopologyZone: "kp-1",
	}, node.Labels)

	// AddNode keeps the kubelet's labels alone.
	m, err := sim.AddNode(ctx, "node-a")
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Remove(ctx)) }()
	node, err = sim.client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotContains(t, node.Labels, corev1.LabelTopologyZone)
	require.Equal(t, "linux", node.Labels[corev1.LabelOSStable])
}
