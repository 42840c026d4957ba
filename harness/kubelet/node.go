package kubelet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// Node is one simulated node.
type Node struct {
	sim   *Simulator
	name  string
	index int

	mu         sync.Mutex
	lost       bool
	removed    bool
	lastReport time.Time
	lease      *coordinationv1.Lease // the last one written, renewed by update
	podSeq     int                   // pods started, for their addresses
	server     *http.Server          // the kubelet endpoint; nil while lost
	port       int                   // the kubelet endpoint's port
	wake       chan struct{}
	stop       context.CancelFunc
	done       chan struct{}
}

// AddNode registers a node of that name, with the simulator's capacity and
// the labels a kubelet sets, and starts its heartbeats. It returns once the
// Node and its Lease exist.
func (s *Simulator) AddNode(ctx context.Context, name string) (*Node, error) {
	return s.AddNodeWithLabels(ctx, name, nil)
}

// AddNodeWithLabels is AddNode with labels added to the kubelet's own, as
// the kubelet's --node-labels adds them (a zone, say); where they name the
// same key, the given label wins.
func (s *Simulator) AddNodeWithLabels(ctx context.Context, name string, labels map[string]string) (*Node, error) {
	s.mu.Lock()
	if _, ok := s.nodeByKey[name]; ok {
		s.mu.Unlock()
		return nil, fmt.Errorf("kubelet simulator: node %q is already simulated", name)
	}
	n := &Node{sim: s, name: name, index: s.nodeCount, wake: make(chan struct{}, 1), done: make(chan struct{})}
	s.nodeCount++
	s.nodeByKey[name] = n
	s.mu.Unlock()
	if err := n.listen(0); err != nil {
		s.forgetNode(name)
		return nil, err
	}

	now := s.opts.Clock.Now()
	nodeLabels := map[string]string{
		corev1.LabelHostname:     name,
		corev1.LabelOSStable:     "linux",
		corev1.LabelArchStable:   "amd64",
		"kubeprop.dev/simulated": "true",
	}
	maps.Copy(nodeLabels, labels)
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      nodeLabels,
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"},
		},
		Spec: corev1.NodeSpec{PodCIDR: podCIDR(n.index), PodCIDRs: []string{podCIDR(n.index)}},
		Status: corev1.NodeStatus{
			Capacity:    s.opts.Capacity.DeepCopy(),
			Allocatable: s.opts.Capacity.DeepCopy(),
			Phase:       corev1.NodeRunning,
			Conditions:  nodeConditions(nil, now),
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: nodeIP(n.index)},
				{Type: corev1.NodeHostName, Address: name},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(n.port)}},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID:               name,
				SystemUUID:              name,
				BootID:                  name,
				KernelVersion:           "6.1.0-kubeprop",
				OSImage:                 "kubeprop simulated node",
				ContainerRuntimeVersion: "containerd://2.1.0",
				KubeletVersion:          kubeletVersion,
				OperatingSystem:         "linux",
				Architecture:            "amd64",
			},
		},
	}
	created, err := s.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		n.closeEndpoint()
		s.forgetNode(name)
		return nil, fmt.Errorf("kubelet simulator: registering node %s: %w", name, err)
	}
	n.lastReport = now
	if err := n.renewLease(ctx, created.UID); err != nil {
		n.closeEndpoint()
		s.forgetNode(name)
		return nil, err
	}
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	n.stop = cancel
	s.wg.Go(func() { n.loop(loopCtx, created.UID) })
	s.emit(Event{Kind: NodeRegistered, Time: now, Node: name})
	return n, nil
}

func (s *Simulator) forgetNode(name string) {
	s.mu.Lock()
	delete(s.nodeByKey, name)
	s.mu.Unlock()
}

// Name is the node's name.
func (n *Node) Name() string { return n.name }

// Lose stops the node's heartbeats and every status write for it and its
// pods, as when a node loses its network or power. The node lifecycle
// controller marks it Unknown after the node monitor grace period.
func (n *Node) Lose() {
	n.mu.Lock()
	if n.lost || n.removed {
		n.mu.Unlock()
		return
	}
	n.lost = true
	n.mu.Unlock()
	n.closeEndpoint()
	n.sim.emit(Event{Kind: NodeLost, Time: n.sim.opts.Clock.Now(), Node: n.name})
}

// Recover resumes the node's heartbeats at once and resyncs its pods:
// pods deleted while it was away are confirmed gone.
func (n *Node) Recover() {
	n.mu.Lock()
	if !n.lost || n.removed {
		n.mu.Unlock()
		return
	}
	n.lost = false
	port := n.port
	n.mu.Unlock()
	if err := n.listen(port); err != nil {
		utilruntime.HandleError(err)
	}
	n.sim.emit(Event{Kind: NodeRecovered, Time: n.sim.opts.Clock.Now(), Node: n.name})
	select {
	case n.wake <- struct{}{}:
	default:
	}
	n.sim.enqueueNodePods(n.name)
}

// Lost reports whether the node is lost.
func (n *Node) Lost() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lost
}

func (n *Node) silent() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lost || n.removed
}

// Remove stops the node and deletes its Node object; the garbage collector
// deletes its Lease (owned by the Node) and the pod GC its pods.
func (n *Node) Remove(ctx context.Context) error {
	n.mu.Lock()
	if n.removed {
		n.mu.Unlock()
		return nil
	}
	n.removed = true
	n.mu.Unlock()
	n.closeEndpoint()
	n.stopLoop()
	n.sim.forgetNode(n.name)
	n.sim.emit(Event{Kind: NodeRemoved, Time: n.sim.opts.Clock.Now(), Node: n.name})
	err := n.sim.client.CoreV1().Nodes().Delete(ctx, n.name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kubelet simulator: deleting node %s: %w", n.name, err)
	}
	return nil
}

func (n *Node) stopLoop() {
	if n.stop != nil {
		n.stop()
		<-n.done
	}
}

// loop renews the Lease and posts node status on the kubelet's schedules.
func (n *Node) loop(ctx context.Context, uid types.UID) {
	defer close(n.done)
	opts := n.sim.opts
	leaseTicker := opts.Clock.NewTicker(opts.wall(nodeLeaseRenewInterval))
	defer leaseTicker.Stop()
	statusTicker := opts.Clock.NewTicker(opts.wall(nodeStatusUpdateFrequency))
	defer statusTicker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-leaseTicker.C():
			if !n.silent() {
				n.report(n.renewLease(ctx, uid))
			}
		case <-statusTicker.C():
			if !n.silent() {
				n.report(n.updateStatus(ctx, false))
			}
		case <-n.wake:
			if !n.silent() {
				n.report(n.renewLease(ctx, uid))
				n.report(n.updateStatus(ctx, true))
			}
		}
	}
}

func (n *Node) report(err error) {
	// A node stopped mid-request, or removed, has nothing to report.
	if err != nil && !apierrors.IsNotFound(err) && !errors.Is(err, context.Canceled) {
		utilruntime.HandleError(err)
	}
}

// updateStatus posts the node's conditions when they differ from what the
// API server has, or when the report frequency has passed, as the kubelet's
// tryUpdateNodeStatus does. force posts them regardless (on recovery).
func (n *Node) updateStatus(ctx context.Context, force bool) error {
	sim := n.sim
	now := sim.opts.Clock.Now()
	current, err := sim.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("kubelet simulator: reading node %s: %w", n.name, err)
	}
	n.mu.Lock()
	due := now.Sub(n.lastReport) >= sim.opts.wall(nodeStatusReportFrequency)
	n.mu.Unlock()
	if !force && !due && conditionsCurrent(current.Status.Conditions) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": nodeConditions(current.Status.Conditions, now)}})
	if err != nil {
		return err
	}
	if _, err := sim.client.CoreV1().Nodes().Patch(ctx, n.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("kubelet simulator: posting the status of node %s: %w", n.name, err)
	}
	n.mu.Lock()
	n.lastReport = now
	n.mu.Unlock()
	return nil
}

// kubeletConditions are the node conditions a healthy kubelet reports,
// with the reasons and messages of pkg/kubelet/nodestatus/setters.go.
var kubeletConditions = []corev1.NodeCondition{
	{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
	{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
	{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available"},
	{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"},
}

// nodeConditions returns the kubelet's conditions with heartbeat now,
// keeping each transition time where the status did not change.
func nodeConditions(current []corev1.NodeCondition, now time.Time) []corev1.NodeCondition {
	out := make([]corev1.NodeCondition, len(kubeletConditions))
	for i, c := range kubeletConditions {
		c.LastHeartbeatTime = metav1.NewTime(now)
		c.LastTransitionTime = metav1.NewTime(now)
		for _, cur := range current {
			if cur.Type == c.Type && cur.Status == c.Status {
				c.LastTransitionTime = cur.LastTransitionTime
			}
		}
		out[i] = c
	}
	return out
}

// conditionsCurrent reports whether the node shows the kubelet's conditions.
func conditionsCurrent(current []corev1.NodeCondition) bool {
	for _, c := range kubeletConditions {
		found := false
		for _, cur := range current {
			if cur.Type == c.Type && cur.Status == c.Status && cur.Reason == c.Reason {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}
