package harness_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNodeLossEvictsAndReplaces loses a node and watches the real node
// lifecycle controller, taint manager and ReplicaSet controller react.
func TestNodeLossEvictsAndReplaces(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs)
	nodes := addNodes(t, 3)

	pods := deploy(t, cs, ns, "web", 6)

	// Lose a node that runs pods.
	lost := nodes[0]
	for _, n := range nodes {
		for _, p := range pods {
			if p.Spec.NodeName == n.Name() {
				lost = n
			}
		}
	}
	var onLost []string
	for _, p := range pods {
		if p.Spec.NodeName == lost.Name() {
			onLost = append(onLost, p.Name)
		}
	}
	require.NotEmpty(t, onLost)
	lostAt := time.Now()
	lost.Lose()

	eventually(t, 30*time.Second, "the lost node to be Unknown and tainted unreachable", func(ctx context.Context) (bool, string, error) {
		node, err := cs.CoreV1().Nodes().Get(ctx, lost.Name(), metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return nodeReady(node) == corev1.ConditionUnknown && hasTaint(node, corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute),
			fmt.Sprintf("ready=%s taints=%v", nodeReady(node), node.Spec.Taints), nil
	})
	unknownAfter := time.Since(lostAt)
	t.Logf("node %s Unknown and tainted after %v wall, %v cluster (grace period 50 s)", lost.Name(), unknownAfter, env.ClusterDuration(unknownAfter))
	require.GreaterOrEqual(t, env.ClusterDuration(unknownAfter), 40*time.Second, "the node went Unknown well before the 50 s grace period")

	eventually(t, 60*time.Second, "the lost node's pods evicted and replaced by 6 Ready pods elsewhere", func(ctx context.Context) (bool, string, error) {
		ready, ps, desc, err := readyPods(ctx, cs, ns, "app=web")
		if err != nil {
			return false, "", err
		}
		readyElsewhere := 0
		evicted := 0
		for _, p := range ps {
			if p.Spec.NodeName == lost.Name() && p.DeletionTimestamp != nil {
				evicted++
			}
			if p.Spec.NodeName != lost.Name() && p.DeletionTimestamp == nil && podReady(&p) {
				readyElsewhere++
			}
		}
		return evicted == len(onLost) && readyElsewhere == 6 && ready == 6, desc, nil
	})
	evictedAfter := env.ClusterDuration(time.Since(lostAt))
	t.Logf("pods evicted and replaced %v (cluster) after the loss (grace 50 s + toleration 300 s)", evictedAfter)
	require.GreaterOrEqual(t, evictedAfter, 300*time.Second, "pods were evicted before the 300 s unreachable toleration")

	// The evicted pods stay Terminating while their kubelet is away, as on
	// a real cluster; recovery confirms their deletion and clears the taints.
	lost.Recover()
	eventually(t, 30*time.Second, "the recovered node Ready without taints, its evicted pods gone", func(ctx context.Context) (bool, string, error) {
		node, err := cs.CoreV1().Nodes().Get(ctx, lost.Name(), metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		_, ps, _, err := readyPods(ctx, cs, ns, "app=web")
		if err != nil {
			return false, "", err
		}
		left := 0
		for _, p := range ps {
			for _, name := range onLost {
				if p.Name == name {
					left++
				}
			}
		}
		return nodeReady(node) == corev1.ConditionTrue && len(node.Spec.Taints) == 0 && left == 0,
			fmt.Sprintf("ready=%s taints=%v evicted pods left=%d", nodeReady(node), node.Spec.Taints, left), nil
	})
}

func nodeReady(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

func hasTaint(n *corev1.Node, key string, effect corev1.TaintEffect) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key && t.Effect == effect {
			return true
		}
	}
	return false
}
