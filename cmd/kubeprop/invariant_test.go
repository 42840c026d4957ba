package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeprop/kubeprop/properties"
)

// recordedHere are the kinds the invariant tests' cases record.
var recordedHere = []string{"apps.kubeprop.dev/v1 PodSet", "apps/v1 StatefulSet", "v1 PersistentVolumeClaim", "v1 Pod"}

// object is an object of kind, name and fields for the invariant tests.
func object(apiVersion, kind, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: fields}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetName(name)
	u.SetUID(types.UID("uid-" + name))
	return u
}

// compileInvariant compiles an invariant for the tests' recorded kinds.
func compileInvariant(t *testing.T, inv Invariant, schema map[string]any) (*compiledInvariant, error) {
	t.Helper()
	env, err := newInvariantEnv(recordedHere)
	require.NoError(t, err)
	return inv.compile(env, schema)
}

// podSetSchema is the PodSet CRD's schema.
func podSetSchema(t *testing.T) map[string]any {
	t.Helper()
	schemas, err := crdSchemas([]string{"../../testdata/crds/podsets.yaml"})
	require.NoError(t, err)
	require.NotNil(t, schemas["PodSet"])
	return schemas["PodSet"]
}

// TestInvariantMessages: a false invariant says what it compared, with
// the values; a field not written yet is the CEL error, not a pass.
func TestInvariantMessages(t *testing.T) {
	podSet := object("apps.kubeprop.dev/v1", "PodSet", "web", map[string]any{"spec": map[string]any{"replicas": int64(3)}, "status": map[string]any{"readyReplicas": int64(2)}})
	running := object("v1", "Pod", "web-1", map[string]any{"status": map[string]any{"phase": "Running"}})
	state := properties.State{Objects: []*unstructured.Unstructured{podSet, running}}

	c, err := compileInvariant(t, Invariant{Name: "ready", Kind: "PodSet", Expression: "object.status.readyReplicas == object.spec.replicas\n  && size(pods.filter(p, p.status.phase == 'Running')) >= 1"}, nil)
	require.NoError(t, err)
	require.EqualError(t, c.check(false)(state), "PodSet web: object.status.readyReplicas == object.spec.replicas && size(pods.filter(p, p.status.phase == 'Running')) >= 1: is false"+
		" (where object.status.readyReplicas = 2, object.spec.replicas = 3, size(pods.filter(p, p.status.phase == \"Running\")) = 1)")

	c, err = compileInvariant(t, Invariant{Name: "gen", Kind: "PodSet", Expression: "object.status.observedGeneration >= 1"}, nil)
	require.NoError(t, err)
	require.ErrorContains(t, c.check(false)(state), "PodSet web: object.status.observedGeneration >= 1: no such key: observedGeneration")

	podSet.Object["status"] = map[string]any{"readyReplicas": int64(3), "observedGeneration": int64(1)}
	require.NoError(t, c.check(false)(state))
	require.NoError(t, c.check(false)(properties.State{}), "no object of the kind in a state: nothing to hold")
	require.EqualError(t, c.check(true)(properties.State{}), "no PodSet in the case's namespace: nothing for object.status.observedGeneration >= 1 to hold on",
		"a convergence comes to objects, not to nothing")
}

// TestInvariantObjects: objects() reads every object of a kind the case
// records, so an invariant can compare a custom resource with its
// children and require that one exists; a kind the case does not record
// is bad input.
func TestInvariantObjects(t *testing.T) {
	inv := Invariant{Name: "set-matches", Kind: "PodSet",
		Expression: "objects('apps/v1', 'StatefulSet').exists(s, s.metadata.name == object.metadata.name && s.spec.replicas == object.spec.replicas)"}
	c, err := compileInvariant(t, inv, nil)
	require.NoError(t, err)
	podSet := object("apps.kubeprop.dev/v1", "PodSet", "web", map[string]any{"spec": map[string]any{"replicas": int64(3)}})
	set := object("apps/v1", "StatefulSet", "web", map[string]any{"spec": map[string]any{"replicas": int64(3)}})
	require.NoError(t, c.check(false)(properties.State{Objects: []*unstructured.Unstructured{podSet, set}}))
	require.EqualError(t, c.check(false)(properties.State{Objects: []*unstructured.Unstructured{podSet}}),
		"PodSet web: objects('apps/v1', 'StatefulSet').exists(s, s.metadata.name == object.metadata.name && s.spec.replicas == object.spec.replicas): is false"+
			" (where object.metadata.name = \"web\", object.spec.replicas = 3)", "no StatefulSet: the one required is missing")
	set.Object["spec"] = map[string]any{"replicas": int64(2)}
	require.ErrorContains(t, c.check(false)(properties.State{Objects: []*unstructured.Unstructured{podSet, set}}), "is false")

	_, err = compileInvariant(t, Invariant{Name: "svc", Kind: "PodSet", Expression: "size(objects('v1', 'Service')) == 1"}, nil)
	require.EqualError(t, err, `invariant "svc": objects("v1", "Service"): the case records no such objects (it records objects("apps.kubeprop.dev/v1", "PodSet"), `+
		`objects("apps/v1", "StatefulSet"), objects("v1", "PersistentVolumeClaim"), objects("v1", "Pod")); add {group: "", version: "v1", kind: "Service"} to watch, or fix the apiVersion`)
	_, err = compileInvariant(t, Invariant{Name: "svc", Kind: "Service", Expression: "true"}, nil)
	require.EqualError(t, err, `invariant "svc": the case records no Service (it records PodSet, StatefulSet, PersistentVolumeClaim, Pod): give one of those kinds, or add its group, version and kind to watch`)
}

// TestInvariantTransitions: an expression that reads oldObject judges
// each object that changed from one state to the next, null for the
// side that does not exist, and names the object and how it changed.
func TestInvariantTransitions(t *testing.T) {
	inv := Invariant{Name: "never-shrinks", Kind: "StatefulSet", Expression: "oldObject == null || object == null || object.spec.replicas >= oldObject.spec.replicas"}
	p, err := func() (properties.Property, error) {
		env, err := newInvariantEnv(recordedHere)
		require.NoError(t, err)
		return inv.property(env, nil)
	}()
	require.NoError(t, err)
	set := func(replicas int64, version string) *unstructured.Unstructured {
		o := object("apps/v1", "StatefulSet", "db", map[string]any{"spec": map[string]any{"replicas": replicas}})
		o.SetResourceVersion(version)
		return o
	}
	states := func(sets ...*unstructured.Unstructured) []properties.State {
		out := []properties.State{{}}
		for _, s := range sets {
			out = append(out, properties.State{Objects: []*unstructured.Unstructured{s}})
		}
		return append(out, properties.State{})
	}
	v := p.Check(&properties.Trace{States: states(set(1, "1"), set(3, "2"), set(3, "2")), Final: true})
	require.NoError(t, v.Err, "created, grown, unchanged, deleted")
	require.True(t, v.Done)
	v = p.Check(&properties.Trace{States: states(set(3, "1"), set(2, "2")), Final: true})
	require.EqualError(t, v.Err, "never-shrinks: violated: StatefulSet db: oldObject == null || object == null || object.spec.replicas >= oldObject.spec.replicas: is false"+
		" (where object.spec.replicas = 2, oldObject.spec.replicas = 3)")

	c, err := compileInvariant(t, Invariant{Name: "kept", Kind: "StatefulSet", Expression: "oldObject == null || object != null"}, nil)
	require.NoError(t, err)
	require.True(t, c.transition)
	require.NoError(t, c.checkChange(properties.State{}, properties.State{Objects: []*unstructured.Unstructured{set(1, "1")}}))
	require.EqualError(t, c.checkChange(properties.State{Objects: []*unstructured.Unstructured{set(1, "1")}}, properties.State{}),
		"StatefulSet db (deleted: object is null): oldObject == null || object != null: is false")
	c, err = compileInvariant(t, Invariant{Name: "grows", Kind: "StatefulSet", Expression: "object.spec.replicas > oldObject.spec.replicas"}, nil)
	require.NoError(t, err)
	require.ErrorContains(t, c.checkChange(properties.State{}, properties.State{Objects: []*unstructured.Unstructured{set(1, "1")}}),
		"StatefulSet db (created: oldObject is null): object.spec.replicas > oldObject.spec.replicas: ")

	env, err := newInvariantEnv(recordedHere)
	require.NoError(t, err)
	_, err = Invariant{Name: "grows", Kind: "StatefulSet", Within: "30s", Expression: "object.spec.replicas >= oldObject.spec.replicas"}.property(env, nil)
	require.EqualError(t, err, `invariant "grows": it reads oldObject, so it judges every change; within and rest do not apply: remove them`)
}

// TestInvariantNeverEvaluated: an invariant over a kind no state of the
// case had says so when the case ends, rather than passing.
func TestInvariantNeverEvaluated(t *testing.T) {
	env, err := newInvariantEnv(recordedHere)
	require.NoError(t, err)
	for _, expr := range []string{"object.spec.replicas >= 0", "oldObject == null || object.spec.replicas >= 0"} {
		p, err := Invariant{Name: "sane", Kind: "StatefulSet", Expression: expr}.property(env, nil)
		require.NoError(t, err)
		pod := object("v1", "Pod", "web-1", map[string]any{})
		tr := &properties.Trace{States: []properties.State{{}, {Objects: []*unstructured.Unstructured{pod}}}}
		require.False(t, p.Check(tr).Done)
		tr.Final = true
		v := p.Check(tr)
		require.True(t, v.Done)
		require.EqualError(t, v.Err, "sane: no StatefulSet in any state of the case: it was never evaluated; check the invariant's kind and the fixtures")

		tr.States = append(tr.States, properties.State{Objects: []*unstructured.Unstructured{object("apps/v1", "StatefulSet", "db", map[string]any{"spec": map[string]any{"replicas": int64(1)}})}})
		require.NoError(t, p.Check(tr).Err)
	}
}

// TestInvariantTypes: with the kind's CRD schema, an expression that
// compares a field with a value of another type fails when the spec
// loads; what the schema types alike, null checks and what it leaves
// open (metadata, preserved fields) pass.
func TestInvariantTypes(t *testing.T) {
	schema := podSetSchema(t)
	for expr, want := range map[string]string{
		"object.status.observedGeneration == '2'":                                                                  `the expression does not type-check against PodSet's schema: ERROR: <input>:1:34: found no matching overload for '_==_' applied to '(int, string)'`,
		"object.status.lastReconcileTime > 3":                                                                      `found no matching overload for '_>_' applied to '(string, int)'`,
		"object.status.conditions.exists(c, c.status == true)":                                                     `found no matching overload for '_==_' applied to '(string, bool)'`,
		"object.status.readyReplicas == object.spec.replicas":                                                      "",
		"object.status.readyReplicas <= object.spec.replicas * 1.5":                                                `found no matching overload for '_*_' applied to '(int, double)'`,
		"object.status.readyReplicas <= 2.5":                                                                       "",
		"oldObject == null || object.spec.replicas >= oldObject.spec.replicas":                                     "",
		"object.metadata.generation == object.status.observedGeneration && object.metadata.labels['app'] == 'web'": "",
		"object.spec.template.spec.containers.size() > 0 && size(pods) >= 0":                                       "",
	} {
		_, err := compileInvariant(t, Invariant{Name: "typed", Kind: "PodSet", Expression: expr}, schema)
		if want == "" {
			require.NoError(t, err, expr)
			continue
		}
		require.ErrorContains(t, err, want, expr)
		require.ErrorContains(t, err, "; fix the expression", expr)
	}
}

// TestPodSetSpecAtMostReplicas: the README's spec.yaml lets a scale-down
// be in progress (the controller has not seen the generation yet: its pods
// cannot be gone in the same instant) and catches an overshoot once it has.
func TestPodSetSpecAtMostReplicas(t *testing.T) {
	spec, err := loadSpec("../../testdata/podset/spec.yaml")
	require.NoError(t, err)
	var atMost properties.Property
	for _, p := range spec.spec.Properties {
		if p.Name() == "at-most-replicas" {
			atMost = p
		}
	}
	require.NotNil(t, atMost, "spec.yaml has an at-most-replicas invariant")

	podSet := &unstructured.Unstructured{Object: map[string]any{
		"kind":     "PodSet",
		"metadata": map[string]any{"name": "web", "uid": "u1", "generation": int64(2)},
		"spec":     map[string]any{"replicas": int64(0)},
		"status":   map[string]any{"observedGeneration": int64(1)},
	}}
	state := properties.State{Objects: []*unstructured.Unstructured{podSet}}
	for _, name := range []string{"web-1", "web-2"} {
		state.Objects = append(state.Objects, &unstructured.Unstructured{Object: map[string]any{
			"kind": "Pod",
			"metadata": map[string]any{"name": name, "ownerReferences": []any{
				map[string]any{"uid": "u1", "kind": "PodSet", "name": "web", "controller": true},
			}},
			"status": map[string]any{"phase": "Running"},
		}})
	}
	check := func() properties.Verdict {
		return atMost.Check(&properties.Trace{States: []properties.State{state}, Final: true})
	}
	v := check()
	require.True(t, v.Done)
	require.NoError(t, v.Err, "scaled to 0, not yet observed by the controller")

	podSet.Object["status"] = map[string]any{"observedGeneration": int64(2)}
	require.ErrorContains(t, check().Err, "at-most-replicas: violated: PodSet web: ")
}

// TestReadManifests: the documents of a YAML file, as kubectl reads them
// (a leading separator, empty and comment-only documents are skipped); a
// bad document is named by its number.
func TestReadManifests(t *testing.T) {
	write := func(text string) string {
		path := filepath.Join(t.TempDir(), "objects.yaml")
		require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
		return path
	}
	objs, err := readManifests(write("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  text: |\n    x: --- not a separator\n---\n# nothing here\n---\n\n---\napiVersion: apps.kubeprop.dev/v1\nkind: PodSet\nmetadata: {name: web}\n"))
	require.NoError(t, err)
	require.Len(t, objs, 2)
	require.Equal(t, "ConfigMap/a", objs[0].GetKind()+"/"+objs[0].GetName())
	require.Equal(t, "x: --- not a separator\n", objs[0].Object["data"].(map[string]any)["text"])
	require.Equal(t, "PodSet/web", objs[1].GetKind()+"/"+objs[1].GetName())

	_, err = readManifests(write("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\nkind: [unclosed\n"))
	require.ErrorContains(t, err, "document 2")
	_, err = readManifests(write("metadata: {name: a}\n"))
	require.ErrorContains(t, err, "document 1: no apiVersion or kind")
}

// TestBundledSpecsLoad: the spec files the project ships load, their
// invariants type-checked against their CRDs (KubeRay's too: a real
// operator's schema, with int-or-string and preserved fields).
func TestBundledSpecsLoad(t *testing.T) {
	for _, path := range []string{"../../testdata/podset/spec.yaml", "../../testdata/podset/nobackoff.yaml",
		"../../testdata/database/spec.yaml", "../../testdata/kuberay/raycluster.yaml", "../../testdata/kuberay/generic.yaml"} {
		_, err := loadSpec(path)
		require.NoError(t, err, "%s (the controller binaries: make bins)", path)
	}
}
