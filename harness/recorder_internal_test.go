package harness

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestFieldWritesNameTheOwnerOfDottedKeys: a label or annotation key with
// dots in it (apps.kubeprop.dev/pods) is one field, found in its owner's
// managedFields. A manager that writes twice within one second leaves its
// managedFields entry as it was (times are in seconds), so only the field's
// owner can name the second write's writer.
func TestFieldWritesNameTheOwnerOfDottedKeys(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	managed := []any{
		map[string]any{"manager": "kubeprop-user", "operation": "Update", "time": at.UTC().Format(time.RFC3339), "fieldsType": "FieldsV1",
			"fieldsV1": map[string]any{"f:spec": map[string]any{"f:replicas": map[string]any{}},
				"f:metadata": map[string]any{"f:labels": map[string]any{".": map[string]any{}, "f:app.kubernetes.io/name": map[string]any{}}}}},
		map[string]any{"manager": "podset-controller", "operation": "Update", "time": at.UTC().Format(time.RFC3339), "fieldsType": "FieldsV1",
			"fieldsV1": map[string]any{"f:metadata": map[string]any{"f:annotations": map[string]any{".": map[string]any{}, "f:apps.kubeprop.dev/pods": map[string]any{}}},
				"f:spec": map[string]any{"f:containers": map[string]any{`k:{"name":"app"}`: map[string]any{".": map[string]any{}, "f:image": map[string]any{}}}}}},
	}
	object := func(pods, name, image string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"kind": "PodSet",
			"metadata": map[string]any{"name": "web", "managedFields": managed,
				"labels":      map[string]any{"app.kubernetes.io/name": name},
				"annotations": map[string]any{"apps.kubeprop.dev/pods": pods}},
			"spec": map[string]any{"replicas": int64(2), "containers": []any{map[string]any{"name": "app", "image": image}}},
		}}
	}
	writes := fieldWrites(object("a", "web", "v1"), object("a,b", "shop", "v2"), at.Time)
	got := map[string]string{}
	for _, w := range writes {
		got[w.Field] = w.Manager
	}
	require.Equal(t, map[string]string{
		"metadata.annotations[apps.kubeprop.dev/pods]": "podset-controller",
		"metadata.labels[app.kubernetes.io/name]":      "kubeprop-user",
		"spec.containers[name=app].image":              "podset-controller",
	}, got)
}
