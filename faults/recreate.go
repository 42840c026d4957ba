package faults

import (
	"context"

	"pgregory.net/rapid"
)

// RecreateStep is the user deleting the Object-th fixture and creating it
// again under the same name: a new object, with a new UID, of the user's
// desired state (the fixture with the user's changes so far), as
// `kubectl replace --force` does or a user who deletes a resource to
// change an immutable field. With Settle the system settles between the
// delete and the create (the controller finalizes the old object, the
// garbage collector removes its children); without, the create follows as
// soon as the API server frees the name, while the old object's children
// are still being collected. An object whose deletion does not end within
// the harness's bound (three settle caps: a fault keeps the controller
// from removing its finalizer) is created again once the faults heal, and
// the user changes after the step wait for it: a user's commands run one
// after another. One still held then (a finalizer that nobody removes) is
// left deleting, and the case's timeline says so.
type RecreateStep struct {
	Object int  `json:"object"`
	Settle bool `json:"settle,omitempty"`
}

func (RecreateStep) Fault() string { return "Recreate" }

var _ DesiredStateChange = RecreateStep{}

// UserChange marks the step as the user's, not a fault's.
func (RecreateStep) UserChange() {}

func (s RecreateStep) Apply(ctx context.Context, t Target) error {
	if len(t.Fixtures()) == 0 {
		return noOp("no fixture")
	}
	return t.RecreateFixture(ctx, nth(s.Object, len(t.Fixtures())), s.Settle)
}

var _ Simplifiable = RecreateStep{}

// Simpler: at once, with no settle between the delete and the create, is
// the simpler form of the two (one step of the user's, not two).
func (s RecreateStep) Simpler() []Step {
	if !s.Settle {
		return nil
	}
	return []Step{RecreateStep{Object: s.Object}}
}

// Recreate is the user deleting a fixture and creating it again under its
// name.
func Recreate() Fault { return recreate{} }

type recreate struct{}

func (recreate) Name() string { return RecreateStep{}.Fault() }

func (recreate) Steps(c Config) *rapid.Generator[Step] {
	return rapid.Custom(func(t *rapid.T) Step {
		return RecreateStep{Object: intIn(t, 0, c.Fixtures-1, "object"), Settle: rapid.Bool().Draw(t, "settle")}
	})
}

func (recreate) Decode(b []byte) (Step, error) { return decodeStep[RecreateStep](b) }
