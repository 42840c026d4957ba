package record

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
)

// TestCatchUpWaitsForLaggingWatches: a fresh list shows pod a newer than
// the recorder saw it and pod b gone; CatchUp returns only once both
// changes arrived. Pod c, made after the list, and pod d, deleted after
// it, are no lag.
func TestCatchUpWaitsForLaggingWatches(t *testing.T) {
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{pods: "PodList"})
	client.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		list := &unstructured.UnstructuredList{Items: []unstructured.Unstructured{*pod("a", "20", map[string]any{}), *pod("d", "18", map[string]any{})}}
		list.SetResourceVersion("30")
		return true, list, nil
	})
	r := New(Options{})
	r.client, r.namespace, r.watched = client, "ns", []schema.GroupVersionResource{pods}
	r.observe("pods", nil, pod("a", "10", map[string]any{}))
	r.observe("pods", nil, pod("b", "11", map[string]any{}))
	r.observe("pods", nil, pod("c", "35", map[string]any{})) // created after the list
	r.observe("pods", nil, pod("d", "18", map[string]any{}))
	r.observeDelete(pod("d", "32", map[string]any{})) // deleted after the list

	caughtUp := make(chan error, 1)
	go func() { caughtUp <- r.CatchUp(context.Background()) }()
	waiting := func(what string) {
		select {
		case err := <-caughtUp:
			t.Fatalf("CatchUp returned (%v) before %s arrived", err, what)
		case <-time.After(200 * time.Millisecond):
		}
	}
	waiting("a's change and b's deletion")
	r.observe("pods", pod("a", "10", map[string]any{}), pod("a", "20", map[string]any{}))
	waiting("b's deletion")
	r.observeDelete(pod("b", "15", map[string]any{}))
	select {
	case err := <-caughtUp:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("CatchUp still waits once every change arrived")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	r.observe("pods", nil, pod("b", "12", map[string]any{})) // seen again, older than the list: its deletion never comes
	err := r.CatchUp(ctx)
	require.ErrorContains(t, err, "waiting for the watches")
}
