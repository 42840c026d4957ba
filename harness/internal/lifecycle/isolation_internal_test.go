package lifecycle

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestIsolationNodeFilter(t *testing.T) {
	r := newCaseNodes()
	all := []string{"node-a", "kp-1-node-0", "kp-1-node-1", "kp-10-node-0", "kp-2-node-0"}
	require.Equal(t, all, r.filter("kp-1", all), "before any claim, every node is free")

	r.claim("kp-1", "kp-1-node-0", "kp-1-node-1")
	r.claim("kp-10", "kp-10-node-0")
	r.claim("kp-3") // a case with no node yet
	require.Equal(t, []string{"kp-1-node-0", "kp-1-node-1"}, r.filter("kp-1", all))
	require.Equal(t, []string{"kp-10-node-0"}, r.filter("kp-10", all))
	require.Empty(t, r.filter("kp-3", all), "a case's pods never go to another's or a free node")
	// kp-2 is no case (yet): its node is free, like node-a.
	require.Equal(t, []string{"node-a", "kp-2-node-0"}, r.filter("test-x", all))
	require.Equal(t, []string{"node-a", "kp-2-node-0"}, r.filter("", all))

	r.release("kp-1")
	require.Equal(t, []string{"node-a", "kp-1-node-0", "kp-1-node-1", "kp-2-node-0"}, r.filter("test-x", all))
	require.Equal(t, []string{"node-a", "kp-1-node-0", "kp-1-node-1", "kp-2-node-0"}, r.filter("kp-1", all), "a released namespace is no case")
	require.Equal(t, []string{"kp-10-node-0"}, r.filter("kp-10", all))
}

// TestIsolationNodePicker: a case's pods go round its nodes in order, the
// nodes a pod is not offered (lost, tainted) are skipped, a pod tried
// again keeps its node, and pods of no case are left to the scheduler.
func TestIsolationNodePicker(t *testing.T) {
	r := newCaseNodes()
	nodes := []string{"kp-1-node-0", "kp-1-node-1", "kp-1-node-2"}
	r.claim("kp-1", nodes...)
	pod := func(uid string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kp-1", Name: uid, UID: types.UID(uid)}}
	}
	var got []string
	for _, uid := range []string{"a", "b", "c", "d"} {
		got = append(got, r.pick(pod(uid), nodes))
	}
	require.Equal(t, []string{"kp-1-node-0", "kp-1-node-1", "kp-1-node-2", "kp-1-node-0"}, got)
	require.Equal(t, "kp-1-node-1", r.pick(pod("b"), nodes), "a pod tried again keeps its node")
	// Node 0 is lost: its replacements go to the others, fewest first.
	require.Equal(t, "kp-1-node-1", r.pick(pod("e"), nodes[1:]))
	require.Equal(t, "kp-1-node-2", r.pick(pod("f"), nodes[1:]))
	require.Equal(t, "", r.pick(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "test-x", Name: "p"}}, []string{"node-a"}))
	r.release("kp-1")
	require.Empty(t, r.placed)
	require.Empty(t, r.placements)
}
