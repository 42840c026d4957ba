package faults

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"pgregory.net/rapid"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ScaleChangeStep is the user editing the desired state: it sets an
// integer field (spec.replicas by default) of the Object-th fixture. The
// field may index a list: spec.workerGroupSpecs[0].replicas.
type ScaleChangeStep struct {
	Object int    `json:"object"`
	Field  string `json:"field"`
	Value  int64  `json:"value"`
}

func (ScaleChangeStep) Fault() string { return "ScaleChange" }

var _ DesiredStateChange = ScaleChangeStep{}

// UserChange marks the step as the user's, not a fault's.
func (ScaleChangeStep) UserChange() {}

func (s ScaleChangeStep) Apply(ctx context.Context, t Target) error {
	obj, err := fixture(t, s.Object)
	if err != nil {
		return err
	}
	patchType, patch, err := setFieldPatch(s.Field, s.Value)
	if err != nil {
		return fmt.Errorf("ScaleChange: %w", err)
	}
	if err := patchFixture(ctx, t, obj, types.PatchType(patchType), patch); err != nil {
		return fmt.Errorf("setting %s of %s to %d: %w", s.Field, obj.GetName(), s.Value, err)
	}
	return nil
}

var _ fieldSetter = ScaleChangeStep{}

func (s ScaleChangeStep) setsFields() (int, [][]string, bool) {
	elems, err := parseFieldPath(s.Field)
	if err != nil {
		return s.Object, nil, false
	}
	return s.Object, [][]string{pathNames(elems)}, true
}

// patchFixture patches a fixture as the user; a fixture that is not
// there (deleted, not yet created again) makes it a no-op.
func patchFixture(ctx context.Context, t Target, obj client.Object, patchType types.PatchType, patch []byte) error {
	err := t.UserClient().Patch(ctx, obj.DeepCopyObject().(client.Object), client.RawPatch(patchType, patch))
	if apierrors.IsNotFound(err) {
		return noOp("%s is not there (deleted, not yet created again)", obj.GetName())
	}
	return err
}

// ScaleOptions configures ScaleChange. Zero values take the defaults.
type ScaleOptions struct {
	// Field is the integer field to set, e.g. spec.workerGroupSpecs[0].replicas.
	// Empty means spec.replicas.
	Field string
	// Max is the largest value drawn (from 0). Zero means 5.
	Max int64
}

// ScaleChange is the user's change of the desired replica count.
func ScaleChange(opts ScaleOptions) Fault {
	if opts.Field == "" {
		opts.Field = "spec.replicas"
	}
	if opts.Max == 0 {
		opts.Max = 5
	}
	return scaleChange{opts: opts}
}

type scaleChange struct{ opts ScaleOptions }

var _ Validator = scaleChange{}

func (f scaleChange) Validate() error {
	if _, err := parseFieldPath(f.opts.Field); err != nil {
		return fmt.Errorf("%s: %w", f.Name(), err)
	}
	return nil
}

func (scaleChange) Name() string { return ScaleChangeStep{}.Fault() }

func (f scaleChange) Steps(c Config) *rapid.Generator[Step] {
	return rapid.Custom(func(t *rapid.T) Step {
		object := intIn(t, 0, c.Fixtures-1, "object")
		var near []int64
		if object < len(c.Objects) {
			if v, ok := intField(c.Objects[object], f.opts.Field); ok {
				near = []int64{v}
			}
		}
		return ScaleChangeStep{Object: object, Field: f.opts.Field, Value: amount(t, 0, f.opts.Max, near, "value")}
	})
}

func (scaleChange) Decode(b []byte) (Step, error) { return decodeStep[ScaleChangeStep](b) }

// MergedScaleChanges are the plans one step shorter than plan that keep
// the change a ScaleChange makes: for each ScaleChange followed by another
// of the same field of the same fixture, the plan without the first and
// with the second moving the field as far from the value before the first
// as it did from the first's value. [ScaleChange{Value: 0} CrashAfterWrite
// ScaleChange{Value: 1}] on a fixture of 3 gives [CrashAfterWrite
// ScaleChange{Value: 4}]: a scale-up by one, as before. A shrinker that
// only drops steps loses that scale-up with either ScaleChange, and a bug
// that needs something created (or deleted) after a fault is lost with it.
// objects are the fixtures as created: the value before a plan's first
// ScaleChange of a field is theirs; where it is unknown no merge is made.
func MergedScaleChanges(plan []Step, objects []client.Object) [][]Step {
	type field struct {
		object int
		path   string
	}
	set := map[field]int64{} // each field's value as the plan's ScaleChanges set it so far
	var out [][]Step
	for i, st := range plan {
		first, ok := st.(ScaleChangeStep)
		if !ok {
			continue
		}
		f := field{first.Object, first.Field}
		from, known := set[f]
		if !known && first.Object < len(objects) {
			from, known = intField(objects[first.Object], first.Field)
		}
		set[f] = first.Value
		if !known || from == first.Value {
			continue // unknown, or a no-op that a plain drop removes
		}
		for j := i + 1; j < len(plan); j++ {
			second, ok := plan[j].(ScaleChangeStep)
			if !ok || second.Object != first.Object || second.Field != first.Field {
				continue
			}
			merged := slices.Clone(plan)
			second.Value = max(0, from+second.Value-first.Value)
			merged[j] = second
			out = append(out, slices.Delete(merged, i, i+1))
			break
		}
	}
	return out
}
