package faults

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"pgregory.net/rapid"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// ConflictingWriterManager is the field manager of the conflicting writer.
const ConflictingWriterManager = "kubeprop-conflicting-writer"

// ConflictingWriterStep is another writer taking over a field of the
// Object-th fixture (of the Pod-th pod that Selector matches, when set)
// with server-side apply, under a field manager of its own: once (Rounds
// 1), or as a persistent co-owner that writes again after each settle,
// Rounds times. It writes Value, or Text when set.
type ConflictingWriterStep struct {
	Object   int    `json:"object"`
	Field    string `json:"field"`
	Value    int64  `json:"value"`
	Rounds   int    `json:"rounds"`
	Selector string `json:"selector,omitempty"`
	Pod      int    `json:"pod,omitempty"`
	Text     string `json:"text,omitempty"`
}

func (ConflictingWriterStep) Fault() string { return "ConflictingWriter" }

func (s ConflictingWriterStep) Apply(ctx context.Context, t Target) error {
	var obj client.Object
	if s.Selector != "" {
		pod, err := podAt(ctx, t, s.Selector, s.Pod)
		if err != nil {
			return err
		}
		obj = &pod
	} else {
		var err error
		if obj, err = fixture(t, s.Object); err != nil {
			return err
		}
	}
	gvk, err := apiutil.GVKForObject(obj, t.Client().Scheme())
	if err != nil {
		return fmt.Errorf("conflicting writer: %w", err)
	}
	names, err := fieldNames(s.Field)
	if err != nil {
		return fmt.Errorf("conflicting writer: %w", err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(obj.GetNamespace())
	u.SetName(obj.GetName())
	var value any = s.Value
	if s.Text != "" {
		value = s.Text
	}
	if err := unstructured.SetNestedField(u.Object, value, names...); err != nil {
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
		switch {
		case apierrors.IsNotFound(err) && s.Selector != "":
			return noOp("the pod is gone")
		case err != nil:
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
	// Values, when set, are the strings the writer writes (one drawn per
	// step) instead of an integer: for labels and other string fields.
	Values []string
	// Pods, when set, is a label selector: the writer takes over the
	// field of one of the matching pods instead of a fixture's, e.g.
	// Field metadata.labels[app.kubernetes.io/name] of ray.io/node-type=worker.
	Pods string
}

var _ Simplifiable = ConflictingWriterStep{}

// Simpler: a single round, the other writer's one write.
func (s ConflictingWriterStep) Simpler() []Step {
	if s.Rounds <= 1 {
		return nil
	}
	one := s
	one.Rounds = 1
	return []Step{one}
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

var _ Validator = conflictingWriter{}

func (f conflictingWriter) Validate() error {
	if _, err := fieldNames(f.opts.Field); err != nil {
		return fmt.Errorf("%s: %w: server-side apply takes a list whole; take over a field outside lists", f.Name(), err)
	}
	return checkSelector(f.Name(), f.opts.Pods)
}

func (conflictingWriter) Name() string { return ConflictingWriterStep{}.Fault() }

func (f conflictingWriter) Steps(c Config) *rapid.Generator[Step] {
	return f.steps(c, 1)
}

var _ Aimer = conflictingWriter{}

// Aims: a persistent co-owner of the field, for as many rounds as the
// fault goes, as the other aims go as hard as their faults do. A fight
// needs the controller to take the field back and lose it again, and
// shows past properties.NoFightLoop's alternations (3 by default), which
// a few rounds do not pass: against a controller that takes the field
// back every time, 2 and 3 rounds passed, 4 and 5 failed.
func (f conflictingWriter) Aims(c Config) []*rapid.Generator[Step] {
	return []*rapid.Generator[Step]{f.steps(c, f.opts.MaxRounds)}
}

// steps draws steps of at least minRounds rounds.
func (f conflictingWriter) steps(c Config, minRounds int) *rapid.Generator[Step] {
	return rapid.Custom(func(t *rapid.T) Step {
		s := ConflictingWriterStep{Field: f.opts.Field, Selector: f.opts.Pods}
		if f.opts.Pods != "" {
			s.Pod = intIn(t, 0, 9, "pod")
		} else {
			s.Object = intIn(t, 0, c.Fixtures-1, "object")
		}
		if len(f.opts.Values) > 0 {
			s.Text = rapid.SampledFrom(f.opts.Values).Draw(t, "text")
		} else {
			s.Value = amount(t, 0, f.opts.Max, nil, "value")
		}
		s.Rounds = amountIn(t, minRounds, f.opts.MaxRounds, "rounds")
		return s
	})
}

func (conflictingWriter) Decode(b []byte) (Step, error) { return decodeStep[ConflictingWriterStep](b) }
