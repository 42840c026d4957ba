package properties

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func entries() int {
	n := 0
	converted.Range(func(any, any) bool { n++; return true })
	return n
}

// TestAsConvertsOnce: an object is converted once per type, however many
// states ask; its entry goes with it.
func TestAsConvertsOnce(t *testing.T) {
	pod := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": name}, "status": map[string]any{"phase": "Running"}}}
	}
	before := entries()
	a, b := pod("a"), pod("b")
	first, err := As[corev1.Pod](a)
	require.NoError(t, err)
	again, err := As[corev1.Pod](a)
	require.NoError(t, err)
	require.Same(t, first, again, "the same object converted twice")
	other, err := As[corev1.Pod](b)
	require.NoError(t, err)
	require.NotSame(t, first, other)
	require.Equal(t, "b", other.Name)
	require.Equal(t, corev1.PodRunning, first.Status.Phase)
	meta, err := As[corev1.Namespace](a) // another type: converted apart
	require.NoError(t, err)
	require.Equal(t, "a", meta.Name)
	require.Equal(t, before+3, entries())

	_, err = As[corev1.Pod](&unstructured.Unstructured{Object: map[string]any{"spec": "not an object"}})
	require.Error(t, err)

	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	require.Eventually(t, func() bool {
		runtime.GC()
		return entries() == before
	}, 10*time.Second, 50*time.Millisecond, "the conversions of collected objects are still held: %d entries", entries())
}
