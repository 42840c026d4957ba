package faults

import (
	"context"

	"pgregory.net/rapid"
)

// NodeRecoverStep resumes a lost node: heartbeats come back, the taints
// clear, and pods deleted while it was away are confirmed gone.
type NodeRecoverStep struct {
	Node int `json:"node"`
}

func (NodeRecoverStep) Fault() string { return "NodeRecover" }

func (s NodeRecoverStep) Apply(_ context.Context, t Target) error { return t.RecoverNode(s.Node) }

// NodeRecover is the node-recovery fault.
func NodeRecover() Fault { return nodeRecover{} }

type nodeRecover struct{}

func (nodeRecover) Name() string { return NodeRecoverStep{}.Fault() }

func (nodeRecover) Steps(c Config) *rapid.Generator[Step] {
	return rapid.Custom(func(t *rapid.T) Step { return NodeRecoverStep{Node: intIn(t, 0, c.Nodes-1, "node")} })
}

func (nodeRecover) Decode(b []byte) (Step, error) { return decodeStep[NodeRecoverStep](b) }
