package faults

import (
	"context"

	"pgregory.net/rapid"
)

// NodeLossStep makes a simulated node stop its heartbeats and status
// writes. The real node lifecycle controller marks it Unknown and taints
// it; the taint manager evicts its pods after the (scaled) toleration. The
// step lasts until the eviction: a node loss is what follows it.
type NodeLossStep struct {
	Node int `json:"node"`
}

func (NodeLossStep) Fault() string { return "NodeLoss" }

// Lasts: the step waits out the eviction.
func (NodeLossStep) Lasts() bool { return true }

func (s NodeLossStep) Apply(ctx context.Context, t Target) error { return t.LoseNode(ctx, s.Node) }

// NodeLoss is the node-loss fault.
func NodeLoss() Fault { return nodeLoss{} }

type nodeLoss struct{}

func (nodeLoss) Name() string { return NodeLossStep{}.Fault() }

func (nodeLoss) Steps(c Config) *rapid.Generator[Step] {
	return rapid.Custom(func(t *rapid.T) Step { return NodeLossStep{Node: intIn(t, 0, c.Nodes-1, "node")} })
}

// Aims: a node lost under what the controller makes, when it creates
// anything (pods, or a workload that runs them): the pods there are
// evicted, and must be replaced, or, a StatefulSet's, must not be yet.
func (nodeLoss) Aims(c Config) []*rapid.Generator[Step] {
	if c.Nodes == 0 || !c.createsAnything() {
		return nil
	}
	return []*rapid.Generator[Step]{nodeLoss{}.Steps(c)}
}

func (nodeLoss) Decode(b []byte) (Step, error) { return decodeStep[NodeLossStep](b) }
