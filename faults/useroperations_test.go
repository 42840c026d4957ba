package faults

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"pgregory.net/rapid"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// The user operations a stateful operator faces: bursts of changes, a
// resource deleted and created again, a stale view after a restart, a
// change of any field.

func TestBurst(t *testing.T) {
	scale := func(v int64) Step { return ScaleChangeStep{Field: "spec.replicas", Value: v} }
	b := BurstStep{Steps: []Step{scale(5), scale(2)}, GapMs: 40}
	require.Equal(t, "Burst{Steps: [ScaleChange{Object: 0, Field: spec.replicas, Value: 5} ScaleChange{Object: 0, Field: spec.replicas, Value: 2}], GapMs: 40}", Format(b))
	require.True(t, IsUserChange(b))
	require.False(t, IsArmed(b))

	// A scenario file holds its steps as a plan's.
	m, err := EncodeStep(b)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"fault": "Burst", "gapMs": float64(40), "steps": []any{
		map[string]any{"fault": "ScaleChange", "object": float64(0), "field": "spec.replicas", "value": float64(5)},
		map[string]any{"fault": "ScaleChange", "object": float64(0), "field": "spec.replicas", "value": float64(2)},
	}}, m)
	back, err := DecodeStep(m, Catalog())
	require.NoError(t, err)
	require.Equal(t, b, back)

	// A burst of one step is that step.
	one, err := DecodeStep(map[string]any{"fault": "Burst", "steps": []any{map[string]any{"fault": "Recreate", "object": 0}}}, Catalog())
	require.NoError(t, err)
	require.Equal(t, RecreateStep{}, one)
	_, err = DecodeStep(map[string]any{"fault": "Burst", "steps": []any{map[string]any{"fault": "NodeLoss", "node": 0}}}, Catalog())
	require.ErrorContains(t, err, "NodeLoss{Node: 0} is not a user change")
	_, err = DecodeStep(map[string]any{"fault": "Burst"}, Catalog())
	require.ErrorContains(t, err, "it has no steps")

	// The shrinker: each change dropped, the burst split into settled
	// steps.
	require.Equal(t, []Step{scale(2), scale(5)}, Simpler(b))
	require.Equal(t, [][]Step{{NodeLossStep{}, scale(5), scale(2)}}, SplitBursts([]Step{NodeLossStep{}, b}))

	// Applied one after another, GapMs apart, no settle between (a
	// Recreate's own neither).
	f := &fakeTarget{fixtures: []client.Object{&unstructured.Unstructured{}}}
	start := time.Now()
	require.NoError(t, BurstStep{Steps: []Step{RecreateStep{}, RecreateStep{Settle: true}}, GapMs: 50}.Apply(context.Background(), f))
	require.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
	require.Equal(t, []string{"recreate 0 settle false", "recreate 0 settle false"}, f.calls)
	noOps := BurstStep{Steps: []Step{UserChangeStep{Name: "X", Patch: "{}"}, UserChangeStep{Name: "X", Patch: "{}"}}}
	require.ErrorIs(t, noOps.Apply(context.Background(), &fakeTarget{}), ErrNoOp)

	// Drawn: 2 to 4 user changes, 0 to 100 ms apart.
	rapid.Check(t, func(rt *rapid.T) {
		s := Burst().Steps(Config{Fixtures: 1}).Draw(rt, "burst").(BurstStep)
		require.GreaterOrEqual(rt, len(s.Steps), 2)
		require.LessOrEqual(rt, len(s.Steps), 4)
		require.GreaterOrEqual(rt, s.GapMs, 0)
		require.LessOrEqual(rt, s.GapMs, 100)
	})
	require.NoError(t, Burst(ScaleChange(ScaleOptions{}), Recreate(), VolumeGrowth()).(Validator).Validate())
	require.ErrorContains(t, Burst(NodeLoss()).(Validator).Validate(), "Burst: NodeLoss is not a user change")
	require.ErrorContains(t, Burst(Burst()).(Validator).Validate(), "Burst: Burst is not a user change")
}

// TestBurstNet: a burst's net changes leave out those that later changes
// of the burst make again, and keep those a Recreate, a growth or a
// change of unknown reach comes after.
func TestBurstNet(t *testing.T) {
	scale := func(object int, field string, v int64) Step {
		return ScaleChangeStep{Object: object, Field: field, Value: v}
	}
	merge := func(patch string) Step { return UserChangeStep{Name: "Edit", Patch: patch} }
	jsonPatch := func(patch string) Step { return UserChangeStep{Name: "Edit", Patch: patch, Type: JSONPatch} }
	for _, tc := range []struct {
		name  string
		burst []Step
		net   Step
	}{
		{"the last value", []Step{scale(0, "spec.replicas", 5), scale(0, "spec.replicas", 2)}, scale(0, "spec.replicas", 2)},
		{"another fixture", []Step{scale(0, "spec.replicas", 5), scale(1, "spec.replicas", 2)},
			BurstStep{Steps: []Step{scale(0, "spec.replicas", 5), scale(1, "spec.replicas", 2)}, GapMs: 30}},
		{"another field", []Step{scale(0, "spec.replicas", 5), merge(`{"spec":{"storage":"2Gi"}}`), scale(0, "spec.replicas", 1)},
			BurstStep{Steps: []Step{merge(`{"spec":{"storage":"2Gi"}}`), scale(0, "spec.replicas", 1)}, GapMs: 30}},
		{"a merge patch's leaves, set by two later changes",
			[]Step{merge(`{"spec":{"replicas":4,"storage":"3Gi"}}`), scale(0, "spec.replicas", 1), merge(`{"spec":{"storage":"1Gi"}}`)},
			BurstStep{Steps: []Step{scale(0, "spec.replicas", 1), merge(`{"spec":{"storage":"1Gi"}}`)}, GapMs: 30}},
		{"a whole list sets its items", []Step{scale(0, "spec.groups[0].size", 3), merge(`{"spec":{"groups":[]}}`)}, merge(`{"spec":{"groups":[]}}`)},
		{"a JSON patch's replace", []Step{scale(0, "spec.groups[1].size", 3), jsonPatch(`[{"op":"replace","path":"/spec/groups/1/size","value":1}]`)},
			jsonPatch(`[{"op":"replace","path":"/spec/groups/1/size","value":1}]`)},
		{"an item removed shifts the others", []Step{scale(0, "spec.groups[1].size", 3), jsonPatch(`[{"op":"remove","path":"/spec/groups/0"}]`), scale(0, "spec.groups[1].size", 1)},
			BurstStep{Steps: []Step{scale(0, "spec.groups[1].size", 3), jsonPatch(`[{"op":"remove","path":"/spec/groups/0"}]`), scale(0, "spec.groups[1].size", 1)}, GapMs: 30}},
		{"an empty object sets nothing", []Step{scale(0, "spec.x.y", 3), merge(`{"spec":{"x":{}}}`)},
			BurstStep{Steps: []Step{scale(0, "spec.x.y", 3), merge(`{"spec":{"x":{}}}`)}, GapMs: 30}},
		{"a Recreate between", []Step{scale(0, "spec.replicas", 5), RecreateStep{}, scale(0, "spec.replicas", 2)},
			BurstStep{Steps: []Step{scale(0, "spec.replicas", 5), RecreateStep{}, scale(0, "spec.replicas", 2)}, GapMs: 30}},
		{"a growth between", []Step{scale(0, "spec.replicas", 5), VolumeGrowthStep{ByGi: 1}, scale(0, "spec.replicas", 2)},
			BurstStep{Steps: []Step{scale(0, "spec.replicas", 5), VolumeGrowthStep{ByGi: 1}, scale(0, "spec.replicas", 2)}, GapMs: 30}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.net, BurstStep{Steps: tc.burst, GapMs: 30}.Net())
		})
	}
}

func TestRecreateAndStaleRestart(t *testing.T) {
	f := &fakeTarget{fixtures: []client.Object{&unstructured.Unstructured{}, &unstructured.Unstructured{}}}
	ctx := context.Background()
	require.NoError(t, RecreateStep{Object: 3, Settle: true}.Apply(ctx, f))
	require.NoError(t, ControllerRestartStep{}.Apply(ctx, f))
	require.NoError(t, ControllerRestartStep{StaleMs: 2500}.Apply(ctx, f))
	require.NoError(t, ControllerRestartStep{Into: 75}.Apply(ctx, f)) // the step before began 4 s ago
	require.Equal(t, []string{"recreate 1 settle true", "restart", "restart 2.5s", "restart 1s"}, f.calls)
	require.ErrorContains(t, ControllerRestartStep{Into: 100}.Apply(ctx, f), "into is 100: give a percentage of the step before, 1-99")
	require.ErrorIs(t, RecreateStep{}.Apply(ctx, &fakeTarget{}), ErrNoOp)
	require.True(t, IsUserChange(RecreateStep{}))
	require.Equal(t, []Step{RecreateStep{Object: 1}}, Simpler(RecreateStep{Object: 1, Settle: true}))
	require.Equal(t, []Step{ControllerRestartStep{}}, Simpler(ControllerRestartStep{StaleMs: 500}))
	require.Equal(t, []Step{ControllerRestartStep{}}, Simpler(ControllerRestartStep{Into: 50}))
	require.Empty(t, Simpler(ControllerRestartStep{}))

	stale, into := 0, 0
	for seed := range 200 {
		s := ControllerRestart().Steps(Config{}).Example(seed).(ControllerRestartStep)
		if s.StaleMs > 0 {
			stale++
			require.LessOrEqual(t, s.StaleMs, 6000)
		}
		if s.Into > 0 {
			into++
			require.Contains(t, []int{25, 50, 75}, s.Into)
		}
	}
	require.InDelta(t, 100, stale+into, 30, "about half of the restarts are stale")
	require.InDelta(t, 50, into, 25, "half of those into the step before")
}

func TestFieldChange(t *testing.T) {
	storage := FieldChange("StorageChange", "spec.storage", "1Gi", "2Gi")
	groups := FieldChange("GroupResize", "spec.groups[1].size", 4)
	require.NoError(t, storage.(Validator).Validate())
	require.ErrorContains(t, FieldChange("X", "spec.storage").(Validator).Validate(), "X: no values for spec.storage")
	require.ErrorContains(t, FieldChange("X", "spec..storage", 1).(Validator).Validate(), "X: field path")
	known := append(Catalog(), storage, groups)
	for seed := range 20 {
		for _, f := range []Fault{storage, groups} {
			s := f.Steps(Config{Fixtures: 1}).Example(seed)
			require.True(t, IsUserChange(s))
			m, err := EncodeStep(s)
			require.NoError(t, err)
			back, err := DecodeStep(m, known)
			require.NoError(t, err)
			require.Equal(t, s, back)
		}
	}
	require.Regexp(t, `^StorageChange\{Object: 0, Patch: \{"spec":\{"storage":"[12]Gi"\}\}\}$`, Format(storage.Steps(Config{Fixtures: 1}).Example(0)))
	require.Equal(t, `GroupResize{Object: 0, Patch: [{"op":"replace","path":"/spec/groups/1/size","value":4}], Type: json}`,
		Format(groups.Steps(Config{Fixtures: 1}).Example(0)))

	// The JSON patch reaches the object as a JSON patch.
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "app", "namespace": "ns"}, "data": map[string]any{"a": "1"}}}
	user := fake.NewClientBuilder().WithObjects(obj.DeepCopy()).Build()
	change := UserChangeStep{Name: "X", Patch: `[{"op":"replace","path":"/data/a","value":"2"}]`, Type: JSONPatch}
	require.NoError(t, change.Apply(context.Background(), &fakeTarget{user: user, fixtures: []client.Object{obj}}))
	require.NoError(t, user.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
	require.Equal(t, "2", obj.Object["data"].(map[string]any)["a"])
	_, err := DecodeStep(map[string]any{"fault": "StorageChange", "object": 0, "patch": "{}", "type": "strategic"}, known)
	require.ErrorContains(t, err, `type "strategic"`)
	require.False(t, errors.Is(err, ErrNoOp))
}

// TestSetAgain: the user changes of a plan that later ones set again, the
// faults between passed over; a Recreate, a growth, a burst or another
// writer between ends the search.
func TestSetAgain(t *testing.T) {
	storage := func(gi string) Step {
		return UserChangeStep{Name: "StorageChange", Patch: `{"spec":{"storage":"` + gi + `"}}`}
	}
	scale := ScaleChangeStep{Field: "spec.replicas", Value: 1}
	errs := APIErrorsStep{Error: Timeout, Requests: 30}
	for _, tc := range []struct {
		name string
		plan []Step
		want map[int]int
	}{
		{"a fault between", []Step{errs, storage("3Gi"), CrashAfterWriteStep{}, storage("2Gi")}, map[int]int{1: 3}},
		{"another field between", []Step{storage("3Gi"), scale, storage("4Gi"), storage("2Gi")}, map[int]int{0: 2, 2: 3}},
		{"another fixture", []Step{storage("3Gi"), UserChangeStep{Name: "StorageChange", Object: 1, Patch: `{"spec":{"storage":"2Gi"}}`}}, map[int]int{}},
		{"a Recreate between", []Step{storage("3Gi"), RecreateStep{}, storage("2Gi")}, map[int]int{}},
		{"a growth between", []Step{storage("3Gi"), VolumeGrowthStep{ByGi: 1}, storage("2Gi")}, map[int]int{}},
		{"another writer between", []Step{scale, ConflictingWriterStep{Field: "spec.replicas", Value: 4, Rounds: 1}, scale}, map[int]int{}},
		{"a burst between", []Step{storage("3Gi"), BurstStep{Steps: []Step{scale, scale}}, storage("2Gi")}, map[int]int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, SetAgain(tc.plan))
		})
	}
}
