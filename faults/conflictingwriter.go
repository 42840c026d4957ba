package faults

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"pgregory.net/rapid"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// ConflictingWriterManager is the field manager of the conflicting writer.
const ConflictingWriterManager = "kubeprop-conflicting-writer"

// ConflictingWriterStep is another writer taking over an integer field of
// the Object-th fixture with server-side apply, under a field manager of
// its own: once (Rounds 1), or as a persistent co-owner that writes again
// after each settle, Rounds times.
type ConflictingWriterStep struct {
	Object int    `json:"object"`
	Field  string `json:"field"`
	Value  int64  `json:"value"`
	Rounds int    `json:"rounds"`
}

func (ConflictingWriterStep) Fault() string { return "ConflictingWriter" }

func (s ConflictingWriterStep) Apply(ctx context.Context, t Target) error {
	obj, err := fixture(t, s.Object)
	if err != nil {
		return err
	}
	gvk, err := apiutil.GVKForObject(obj, t.Client().Scheme())
	if err != nil {
		return fmt.Errorf("conflicting writer: %w", err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(obj.GetNamespace())
	u.SetName(obj.GetName())
	if err := unstructured.SetNestedField(u.Object, s.Value, strings.Split(s.Field, ".")...); err != nil {
		return fmt.Errorf("conflicting writer: field %s: %w", s.Field, err)
	}
	for round := range max(1, s.Rounds) {
		if round > 0 {
			if err := t.Settle(ctx); err != nil {
				return err
			}
		}
		err := t.Client().Apply(ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()),
			client.FieldOwner(ConflictingWriterManager), client.ForceOwnership)
		if err != nil {
			return fmt.Errorf("conflicting writer: setting %s of %s: %w", s.Field, obj.GetName(), err)
		}
	}
	return nil
}

// ConflictOptions configures ConflictingWriter. Zero values take the
// defaults.
type ConflictOptions struct {
	// Field is the integer field the other writer takes over. Empty means
	// spec.replicas.
	Field string
	// Max is the largest value drawn (from 0). Zero means 5.
	Max int64
	// MaxRounds is the most rounds a persistent co-owner writes. Zero
	// means 5.
	MaxRounds int
}

// ConflictingWriter is another field manager writing a field the
// controller manages.
func ConflictingWriter(opts ConflictOptions) Fault {
	if opts.Field == "" {
		opts.Field = "spec.replicas"
	}
	if opts.Max == 0 {
		opts.Max = 5
	}
	if opts.MaxRounds == 0 {
		opts.MaxRounds = 5
	}
	return conflictingWriter{opts: opts}
}

type conflictingWriter struct{ opts ConflictOptions }

func (conflictingWriter) Name() string { return ConflictingWriterStep{}.Fault() }

func (f conflictingWriter) Steps(c Config) *rapid.Generator[Step] {
	return rapid.Custom(func(t *rapid.T) Step {
		return ConflictingWriterStep{
			Object: intIn(t, 0, c.Fixtures-1, "object"),
			Field:  f.opts.Field,
			Value:  rapid.Int64Range(0, f.opts.Max).Draw(t, "value"),
			Rounds: intIn(t, 1, f.opts.MaxRounds, "rounds"),
		}
	})
}

func (conflictingWriter) Decode(b []byte) (Step, error) { return decodeStep[ConflictingWriterStep](b) }
