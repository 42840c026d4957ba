package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeprop/kubeprop/properties"
)

// TestInvariantMessages: a false invariant says what it compared, with
// the values; a field not written yet is the CEL error, not a pass.
func TestInvariantMessages(t *testing.T) {
	env, err := celEnv()
	require.NoError(t, err)
	obj := func(kind, name string, fields map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: fields}
		u.SetKind(kind)
		u.SetName(name)
		return u
	}
	podSet := obj("PodSet", "web", map[string]any{"spec": map[string]any{"replicas": int64(3)}, "status": map[string]any{"readyReplicas": int64(2)}})
	running := obj("Pod", "web-1", map[string]any{"status": map[string]any{"phase": "Running"}})
	state := properties.State{Objects: []*unstructured.Unstructured{podSet, running}}

	pred, err := Invariant{Name: "ready", Kind: "PodSet", Expression: "object.status.readyReplicas == object.spec.replicas\n  && size(pods.filter(p, p.status.phase == 'Running')) >= 1"}.predicate(env, nil)
	require.NoError(t, err)
	require.EqualError(t, pred(state), "PodSet web: object.status.readyReplicas == object.spec.replicas && size(pods.filter(p, p.status.phase == 'Running')) >= 1: is false"+
		" (where object.status.readyReplicas = 2, object.spec.replicas = 3, size(pods.filter(p, p.status.phase == \"Running\")) = 1)")

	pred, err = Invariant{Name: "gen", Kind: "PodSet", Expression: "object.status.observedGeneration >= 1"}.predicate(env, nil)
	require.NoError(t, err)
	require.ErrorContains(t, pred(state), "PodSet web: object.status.observedGeneration >= 1: no such key: observedGeneration")

	podSet.Object["status"] = map[string]any{"readyReplicas": int64(3), "observedGeneration": int64(1)}
	require.NoError(t, pred(state))
	require.NoError(t, pred(properties.State{}), "no object of the kind: nothing to hold")
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
