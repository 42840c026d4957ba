package faults

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"pgregory.net/rapid"
)

// ChildDeleteStep is a rogue client deleting the Child-th object that the
// fixtures own (by kind and name, modulo their number).
type ChildDeleteStep struct {
	Child int `json:"child"`
}

func (ChildDeleteStep) Fault() string { return "ChildDelete" }

func (s ChildDeleteStep) Apply(ctx context.Context, t Target) error {
	children, err := t.Children(ctx)
	if err != nil {
		return err
	}
	if len(children) == 0 {
		return noOp("no owned object to delete")
	}
	child := children[nth(s.Child, len(children))]
	if err := t.Client().Delete(ctx, child); err != nil {
		if apierrors.IsNotFound(err) {
			return noOp("%s already gone", child.GetName())
		}
		return fmt.Errorf("deleting %s: %w", child.GetName(), err)
	}
	return nil
}

// ChildDelete is the rogue deletion of an owned object.
func ChildDelete() Fault { return childDelete{} }

type childDelete struct{}

func (childDelete) Name() string { return ChildDeleteStep{}.Fault() }

func (childDelete) Steps(Config) *rapid.Generator[Step] {
	return rapid.Custom(func(t *rapid.T) Step { return ChildDeleteStep{Child: intIn(t, 0, 9, "child")} })
}

// Aims: one of the fixtures' children deleted, when the controller
// creates anything: its children are what it must make again.
func (childDelete) Aims(c Config) []*rapid.Generator[Step] {
	if !c.createsAnything() {
		return nil
	}
	return []*rapid.Generator[Step]{childDelete{}.Steps(c)}
}

func (childDelete) Decode(b []byte) (Step, error) { return decodeStep[ChildDeleteStep](b) }
