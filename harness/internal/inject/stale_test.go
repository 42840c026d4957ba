package inject

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// staleServer is an API server whose etcd keeps revisions from compacted
// on, at revision current: a list at an older exact revision is 410 Gone.
// It records the query of each request it answers; a watch streams one
// event, then waits.
func staleServer(t *testing.T, compacted, current uint64) (*httptest.Server, func() []string) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		mu.Lock()
		seen = append(seen, r.URL.RawQuery)
		mu.Unlock()
		if q.Get("watch") == "true" {
			_, _ = io.WriteString(w, `{"type":"ADDED"}`+"\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		rv := current
		if asked := q.Get("resourceVersion"); asked != "" && asked != "0" {
			rv, _ = strconv.ParseUint(asked, 10, 64)
		}
		if rv < compacted {
			w.WriteHeader(http.StatusGone)
			_ = json.NewEncoder(w).Encode(metav1.Status{Code: http.StatusGone, Reason: metav1.StatusReasonExpired})
			return
		}
		_ = json.NewEncoder(w).Encode(metav1.List{ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatUint(rv, 10)}})
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := seen
		seen = nil
		return out
	}
}

func TestStaleView(t *testing.T) {
	f := New(Options{Namespace: "ns"})
	srv, seen := staleServer(t, 100, 500)
	inst := &Instance{}
	rt := f.WrapTransport(inst)(http.DefaultTransport)
	var told []string
	inst.ServeStale(150, time.Now().Add(time.Second), func(s string) { told = append(told, s) })
	get := func(query string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/namespaces/ns/pods?"+query, nil)
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		return resp
	}
	listRV := func(resp *http.Response) string {
		defer resp.Body.Close()
		var l metav1.List
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&l))
		return l.ResourceVersion
	}

	// An informer's first list, at 0, and a list not older than a version
	// before the view's: the view's.
	require.Equal(t, "150", listRV(get("resourceVersion=0&limit=500")))
	require.Equal(t, []string{"limit=500&resourceVersion=150&resourceVersionMatch=Exact"}, seen())
	require.Equal(t, "150", listRV(get("resourceVersion=120")))
	seen()
	// Consistent reads, newer versions and pages go through as asked.
	for _, q := range []string{"resourceVersion=", "resourceVersion=300", "continue=abc", "resourceVersion=120&resourceVersionMatch=Exact"} {
		get(q).Body.Close()
		require.Equal(t, []string{q}, seen(), q)
	}
	// A watch-list is refused as an API server without WatchList does:
	// the informer lists instead.
	resp := get("watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan")
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Empty(t, seen(), "not sent on")
	resp.Body.Close()

	// A watch's events wait for the view's end.
	start := time.Now()
	resp = get("watch=true&resourceVersion=150")
	line := make([]byte, len(`{"type":"ADDED"}`+"\n"))
	_, err := io.ReadFull(resp.Body, line)
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond, "held until the view ends")
	resp.Body.Close()
	seen()

	// The view's end: lists are fresh.
	require.Equal(t, "500", listRV(get("resourceVersion=0")))
	require.Equal(t, []string{"resourceVersion=0"}, seen())
	require.Empty(t, told)

	// Older than the compaction: the oldest version served, and said.
	inst.ServeStale(20, time.Now().Add(time.Minute), func(s string) { told = append(told, s) })
	require.Equal(t, "100", listRV(get("resourceVersion=0")))
	require.Equal(t, []string{"the stale view at resource version 20 is older than the API server's compaction window: served the oldest it has, resource version 100"}, told)
	require.Equal(t, "100", listRV(get("resourceVersion=0")), "the view stays at the oldest")
	require.Len(t, told, 1)

	// The heal ends the view.
	f.Heal()
	require.Equal(t, "500", listRV(get("resourceVersion=0")))
}
