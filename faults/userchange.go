package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"pgregory.net/rapid"
	"sigs.k8s.io/yaml"
)

// UserChangeStep is the user editing the desired state of the Object-th
// fixture with a patch, as drawn by a UserChange or FieldChange fault: a
// JSON merge patch, or with Type "json" a JSON patch (a field in a list:
// spec.groups[0].size).
type UserChangeStep struct {
	Name   string `json:"-"` // the fault's: how plans and scenario files call it
	Object int    `json:"object"`
	Patch  string `json:"patch"`
	Type   string `json:"type,omitempty"`
}

// JSONPatch is UserChangeStep.Type of a JSON patch.
const JSONPatch = "json"

func (s UserChangeStep) patchType() types.PatchType {
	if s.Type == JSONPatch {
		return types.JSONPatchType
	}
	return types.MergePatchType
}

func (s UserChangeStep) Fault() string { return s.Name }

var _ DesiredStateChange = UserChangeStep{}

// UserChange marks the step as the user's, not a fault's.
func (UserChangeStep) UserChange() {}

func (s UserChangeStep) Apply(ctx context.Context, t Target) error {
	obj, err := fixture(t, s.Object)
	if err != nil {
		return err
	}
	if err := patchFixture(ctx, t, obj, s.patchType(), []byte(s.Patch)); err != nil {
		return fmt.Errorf("%s: patching %s with %s: %w", s.Name, obj.GetName(), s.Patch, err)
	}
	return nil
}

var _ fieldSetter = UserChangeStep{}

// setsFields: a merge patch sets its leaves (a value other than an object
// with fields, null included); a JSON patch, the paths it replaces, and
// its reach is not known when it does anything else.
func (s UserChangeStep) setsFields() (int, [][]string, bool) {
	if s.Type == JSONPatch {
		var ops []struct {
			Op   string `json:"op"`
			Path string `json:"path"`
		}
		if err := json.Unmarshal([]byte(s.Patch), &ops); err != nil {
			return s.Object, nil, false
		}
		var paths [][]string
		for _, op := range ops {
			if op.Op != "replace" {
				return s.Object, nil, false
			}
			var path []string
			for _, e := range strings.Split(strings.TrimPrefix(op.Path, "/"), "/") {
				path = append(path, strings.NewReplacer("~1", "/", "~0", "~").Replace(e))
			}
			paths = append(paths, path)
		}
		return s.Object, paths, true
	}
	var patch any
	if err := json.Unmarshal([]byte(s.Patch), &patch); err != nil {
		return s.Object, nil, false
	}
	var paths [][]string
	var leaves func(prefix []string, v any)
	leaves = func(prefix []string, v any) {
		m, ok := v.(map[string]any)
		if !ok {
			paths = append(paths, prefix)
			return
		}
		for k, child := range m { // an empty object sets nothing
			leaves(append(slices.Clip(prefix), k), child)
		}
	}
	if _, ok := patch.(map[string]any); !ok {
		return s.Object, nil, false
	}
	leaves(nil, patch)
	return s.Object, paths, true
}

// UserChange is a change of the desired state of the user's own design,
// where ScaleChange's one integer field is not enough: patches draws JSON
// merge patches for a fixture, e.g.
//
//	faults.UserChange("ImageChange", rapid.Custom(func(t *rapid.T) map[string]any {
//		image := rapid.SampledFrom([]string{"web:1", "web:2"}).Draw(t, "image")
//		return map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
//			"containers": []any{map[string]any{"name": "app", "image": image}}}}}}
//	}))
//
// name names the fault in plans and scenario files; a scenario stores the
// patch itself, so it replays without the generator.
func UserChange(name string, patches *rapid.Generator[map[string]any]) Fault {
	return userChange{name: name, patches: patches}
}

type userChange struct {
	name    string
	patches *rapid.Generator[map[string]any]
}

func (f userChange) Name() string { return f.name }

func (f userChange) Steps(c Config) *rapid.Generator[Step] {
	return rapid.Custom(func(t *rapid.T) Step {
		object := intIn(t, 0, c.Fixtures-1, "object")
		patch, err := json.Marshal(f.patches.Draw(t, "patch"))
		if err != nil {
			t.Fatalf("%s: the drawn patch is not JSON: %v", f.name, err)
		}
		return UserChangeStep{Name: f.name, Object: object, Patch: string(patch)}
	})
}

func (f userChange) Decode(b []byte) (Step, error) {
	var s UserChangeStep
	if err := yaml.UnmarshalStrict(b, &s); err != nil {
		return nil, fmt.Errorf("reading a %s step: %w", f.name, err)
	}
	if !json.Valid([]byte(s.Patch)) {
		return nil, fmt.Errorf("reading a %s step: patch %q is not JSON", f.name, s.Patch)
	}
	if s.Type != "" && s.Type != JSONPatch {
		return nil, fmt.Errorf("reading a %s step: type %q: leave it out for a JSON merge patch, or write %q for a JSON patch", f.name, s.Type, JSONPatch)
	}
	s.Name = f.name
	return s, nil
}

// FieldChange is a UserChange that sets one field of a fixture to one of
// values: FieldChange("StorageChange", "spec.storage", "1Gi", "2Gi"). The
// field may index a list (spec.groups[0].size), and values may be of any
// JSON type.
func FieldChange(name, field string, values ...any) Fault {
	return fieldChange{userChange: userChange{name: name}, field: field, values: values}
}

type fieldChange struct {
	userChange
	field  string
	values []any
}

var _ Validator = fieldChange{}

func (f fieldChange) Validate() error {
	if _, err := parseFieldPath(f.field); err != nil {
		return fmt.Errorf("%s: %w", f.name, err)
	}
	if len(f.values) == 0 {
		return fmt.Errorf("%s: no values for %s: give the values the user sets it to", f.name, f.field)
	}
	return nil
}

func (f fieldChange) Steps(c Config) *rapid.Generator[Step] {
	return rapid.Custom(func(t *rapid.T) Step {
		object := intIn(t, 0, c.Fixtures-1, "object")
		patchType, patch, err := setFieldPatch(f.field, rapid.SampledFrom(f.values).Draw(t, "value"))
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		s := UserChangeStep{Name: f.name, Object: object, Patch: string(patch)}
		if patchType == string(types.JSONPatchType) {
			s.Type = JSONPatch
		}
		return s
	})
}
