package faults

import (
	"context"
	"encoding/json"
	"fmt"

	"pgregory.net/rapid"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// UserChangeStep is the user editing the desired state of the Object-th
// fixture with a JSON merge patch, as drawn by a UserChange fault.
type UserChangeStep struct {
	Name   string `json:"-"` // the fault's: how plans and scenario files call it
	Object int    `json:"object"`
	Patch  string `json:"patch"`
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
	target := obj.DeepCopyObject().(client.Object)
	if err := t.UserClient().Patch(ctx, target, client.RawPatch("application/merge-patch+json", []byte(s.Patch))); err != nil {
		return fmt.Errorf("%s: patching %s with %s: %w", s.Name, obj.GetName(), s.Patch, err)
	}
	return nil
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
	s.Name = f.name
	return s, nil
}
