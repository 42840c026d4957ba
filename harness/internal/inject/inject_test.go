package inject

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeprop/kubeprop/faults"
)

// watchServer streams one line, then a second after a pause, then ends.
func watchServer(t *testing.T, pause time.Duration) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		select {
		case <-time.After(pause):
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "second\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestWatchDelay(t *testing.T) {
	f := New(Options{Namespace: "ns"})
	srv := watchServer(t, 0)
	rt := f.WrapTransport(&Instance{})(http.DefaultTransport)

	// Not a watch: untouched.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/pods", nil)
	resp, err := rt.RoundTrip(req)
	require.NoError(t, err)
	_, isDelayed := resp.Body.(*delayedBody)
	require.False(t, isDelayed)
	require.NoError(t, resp.Body.Close())

	// A watch: its bytes come no sooner than the delay after they arrived,
	// all of them and in order.
	f.DelayWatches("", 300*time.Millisecond, time.Minute)
	req, _ = http.NewRequest(http.MethodGet, srv.URL+"/api/v1/pods?watch=true", nil)
	start := time.Now()
	resp, err = rt.RoundTrip(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "first\nsecond\n", string(body))
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	require.NoError(t, resp.Body.Close())

	// The heal ends the delay, pending bytes included.
	f.DelayWatches("", time.Hour, time.Hour)
	req, _ = http.NewRequest(http.MethodGet, srv.URL+"/api/v1/pods?watch=1", nil)
	resp, err = rt.RoundTrip(req)
	require.NoError(t, err)
	time.Sleep(50 * time.Millisecond)
	f.Heal()
	body, err = io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "first\nsecond\n", string(body))
	require.NoError(t, resp.Body.Close())
}

// TestWatchDelayOfOneResource: a delay of one resource's watches holds
// those back and lets the others through; the resources watched are
// known by their names.
func TestWatchDelayOfOneResource(t *testing.T) {
	f := New(Options{Namespace: "ns"})
	srv := watchServer(t, 0)
	rt := f.WrapTransport(&Instance{})(http.DefaultTransport)
	f.DelayWatches("pods", time.Hour, time.Hour)

	watch := func(path string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path+"?watch=true", nil)
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	pods := watch("/api/v1/namespaces/ns/pods")
	podsets := watch("/apis/example.com/v1/namespaces/ns/podsets")
	body, err := io.ReadAll(podsets.Body)
	require.NoError(t, err)
	require.Equal(t, "first\nsecond\n", string(body), "another resource's watch comes on time")
	require.Equal(t, []string{"pods", "podsets"}, f.Watched())

	read := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(pods.Body)
		read <- string(b)
	}()
	select {
	case b := <-read:
		t.Fatalf("the pods' watch came through its delay: %q", b)
	case <-time.After(200 * time.Millisecond):
	}
	require.False(t, f.DropWatches("services"), "no watch of services is open")
	require.True(t, f.DropWatches("pods"))
	require.Empty(t, <-read, "a cut watch ends with what it held back")
}

func TestWatchDrop(t *testing.T) {
	f := New(Options{Namespace: "ns"})
	srv := watchServer(t, time.Minute)
	rt := f.WrapTransport(&Instance{})(http.DefaultTransport)
	require.False(t, f.DropWatches(""), "no watch is open yet")

	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL+"/api/v1/pods?watch=true", nil)
	resp, err := rt.RoundTrip(req)
	require.NoError(t, err)
	first := make([]byte, 6)
	_, err = io.ReadFull(resp.Body, first)
	require.NoError(t, err)
	require.Equal(t, "first\n", string(first))

	require.True(t, f.DropWatches(""))
	_, err = io.ReadAll(resp.Body)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF, "a cut watch ends like a dropped connection")
	require.NoError(t, resp.Body.Close())
	require.False(t, f.DropWatches(""), "a cut watch is forgotten")
}

// TestWriteOf: the writes the HTTP-level fault injection sees, read as
// the API server reads them; reads are not writes.
func TestWriteOf(t *testing.T) {
	for _, c := range []struct {
		method, path string
		want         string // verb group/resource namespace name subresource, or "" for no write
	}{
		{"POST", "/api/v1/namespaces/ns/pods", "create /pods ns  "},
		{"PUT", "/api/v1/namespaces/ns/pods/web-1", "update /pods ns web-1 "},
		{"PATCH", "/api/v1/namespaces/ns/pods/web-1/status", "patch /pods ns web-1 status"},
		{"POST", "/api/v1/namespaces/ns/pods/web-1/eviction", "create /pods ns web-1 eviction"},
		{"PUT", "/apis/apps.kubeprop.dev/v1/namespaces/ns/podsets/web/status", "update apps.kubeprop.dev/podsets ns web status"},
		{"DELETE", "/api/v1/namespaces/ns/pods/web-1", "delete /pods ns web-1 "},
		{"DELETE", "/api/v1/namespaces/ns/pods?labelSelector=app%3Dweb", "deletecollection /pods ns  "},
		{"PUT", "/api/v1/nodes/n1", "update /nodes  n1 "},
		{"DELETE", "/api/v1/namespaces/ns", "delete /namespaces  ns "},
		{"PUT", "/api/v1/namespaces/ns/finalize", "update /namespaces  ns finalize"},
		{"GET", "/api/v1/namespaces/ns/pods/web-1", ""},
		{"GET", "/api/v1/namespaces/ns/pods?watch=true", ""},
		{"POST", "/apis", ""},
		{"GET", "/healthz", ""},
	} {
		req, err := http.NewRequest(c.method, "https://127.0.0.1:6443"+c.path, nil)
		require.NoError(t, err)
		got := ""
		if info, ok := writeOf(req); ok {
			got = fmt.Sprintf("%s %s/%s %s %s %s", info.Verb, info.APIGroup, info.Resource, info.Namespace, info.Name, info.Subresource)
		}
		require.Equal(t, c.want, got, "%s %s", c.method, c.path)
	}
}

// TestRefusalInTheCaseNamespace: API errors refuse the case's writes only;
// a controller of every namespace writing to an earlier case's goes
// through, and the refusals left are not used up by it. Writes into
// another case's namespace are noted, each once; others are not.
func TestRefusalInTheCaseNamespace(t *testing.T) {
	f := New(Options{Namespace: "kp-2", IsCaseNamespace: func(ns string) bool { return ns == "kp-1" || ns == "kp-2" }})
	f.FailWrites(faults.InternalError, faults.WriteMatch{}, 1, 0)
	pods := schema.GroupResource{Resource: "pods"}
	require.NoError(t, f.refusal("create", "kp-1", pods, "", "", never))
	require.NoError(t, f.refusal("create", "kp-1", pods, "", "b", never))
	require.NoError(t, f.refusal("delete", "kp-1", pods, "", "a", never))
	require.NoError(t, f.refusal("create", "kube-system", pods, "", "", never))
	require.NoError(t, f.refusal("create", "kp-x", pods, "", "", never))
	require.NoError(t, f.refusal("create", "", schema.GroupResource{Resource: "nodes"}, "", "n1", never))
	// A leader's lease renewals and its Events go through, uncounted.
	require.NoError(t, f.refusal("update", "kp-2", schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "", "leader", always))
	require.NoError(t, f.refusal("create", "kp-2", schema.GroupResource{Resource: "events"}, "", "", never))
	require.Error(t, f.refusal("create", "kp-2", pods, "", "", never))
	require.NoError(t, f.refusal("create", "kp-2", pods, "", "", never), "one refusal only")
	require.Equal(t, []string{"create pods in kp-1", "delete pods in kp-1"}, f.ForeignWrites())
}

// TestRefusalOfNamedWrites: API errors named by verb and resource refuse
// those writes only, and the others do not use up the refusals.
func TestRefusalOfNamedWrites(t *testing.T) {
	f := New(Options{Namespace: "kp-1"})
	f.FailWrites(faults.Conflict, faults.WriteMatch{Verb: "update", Resource: "podsets/status"}, 2, 0)
	podsets := schema.GroupResource{Group: "kubeprop.dev", Resource: "podsets"}
	require.NoError(t, f.refusal("update", "kp-1", podsets, "", "a", always), "the main resource is another write")
	require.NoError(t, f.refusal("patch", "kp-1", podsets, "status", "a", always), "another verb")
	require.NoError(t, f.refusal("create", "kp-1", schema.GroupResource{Resource: "pods"}, "", "", never))
	require.Error(t, f.refusal("update", "kp-1", podsets, "status", "a", always))
	require.Error(t, f.refusal("update", "kp-1", podsets, "status", "a", always))
	require.NoError(t, f.refusal("update", "kp-1", podsets, "status", "a", always), "two refusals only")
}

// TestConflictOnlyWhereOneCanHappen: a conflict answers updates, and
// patches that state the resourceVersion they read or are server-side
// applies; a plain merge patch goes through and does not use it up (a 409
// there would say the object was replaced, with no new object to show
// for it).
func TestConflictOnlyWhereOneCanHappen(t *testing.T) {
	f := New(Options{Namespace: "kp-1"})
	f.FailWrites(faults.Conflict, faults.WriteMatch{}, 1, 0)
	claims := schema.GroupResource{Resource: "persistentvolumeclaims"}
	require.NoError(t, f.refusal("patch", "kp-1", claims, "", "data-0", never))
	require.Error(t, f.refusal("patch", "kp-1", claims, "", "data-0", always))

	read := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-0", UID: "u1", ResourceVersion: "7"}}
	grown := read.DeepCopy()
	grown.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}
	require.False(t, lockedPatch(grown, client.MergeFrom(read)))
	require.True(t, lockedPatch(grown, client.MergeFromWithOptions(read, client.MergeFromWithOptimisticLock{})))
	require.True(t, lockedPatch(grown, client.RawPatch(types.ApplyPatchType, []byte("{}"))))
	require.False(t, lockedPatch(grown, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"uid":"u1"},"spec":{}}`))))
	require.True(t, lockedPatch(grown, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"test","path":"/metadata/resourceVersion","value":"7"}]`))))
	require.False(t, lockedPatch(grown, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"replace","path":"/spec/replicas","value":2}]`))))

	// Over HTTP (a binary's writes): the body is read and put back.
	body := `{"metadata":{"resourceVersion":"7"},"spec":{}}`
	req, err := http.NewRequest("PATCH", "https://127.0.0.1:6443/api/v1/namespaces/kp-1/persistentvolumeclaims/data-0", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", string(types.MergePatchType))
	require.True(t, lockedPatchRequest(req))
	left, err := io.ReadAll(req.Body)
	require.NoError(t, err)
	require.Equal(t, body, string(left))
	req, err = http.NewRequest("PATCH", "https://127.0.0.1:6443/api/v1/namespaces/kp-1/persistentvolumeclaims/data-0", strings.NewReader(`{"spec":{}}`))
	require.NoError(t, err)
	require.False(t, lockedPatchRequest(req))
	req.Header.Set("Content-Type", string(types.ApplyPatchType)+"; charset=utf-8")
	require.True(t, lockedPatchRequest(req))
}

// TestCrashAimsAtTheControllersKinds: an unnamed crash counts the
// controller's writes of its own kinds in the case's namespace, not its
// lease renewals, its Events or writes elsewhere; a crash named by its
// resource counts that resource's writes. The first of its own writes is
// when the controller acted.
func TestCrashAimsAtTheControllersKinds(t *testing.T) {
	f := New(Options{Namespace: "ns"})
	var named []faults.CrashAfterWriteStep
	f.CrashAfter(faults.WriteMatch{}, 2, func(s faults.CrashAfterWriteStep) { named = append(named, s) })
	leases := schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	events := schema.GroupResource{Resource: "events"}
	newEvents := schema.GroupResource{Group: "events.k8s.io", Resource: "events"}
	pods := schema.GroupResource{Resource: "pods"}
	require.False(t, f.wrote("update", "ns", leases, ""))
	require.False(t, f.wrote("create", "ns", events, ""))
	require.False(t, f.wrote("create", "ns", newEvents, ""))
	require.False(t, f.wrote("create", "other", pods, ""))
	require.False(t, f.wrote("create", "ns", pods, ""))
	require.False(t, f.wrote("update", "ns", leases, ""))
	require.True(t, f.wrote("patch", "ns", pods, "status"), "the second write of its own")
	require.Equal(t, []faults.CrashAfterWriteStep{{Verb: "patch", Resource: "pods/status", Writes: 1}}, named)

	f.CrashAfter(faults.WriteMatch{Resource: "leases"}, 1, func(s faults.CrashAfterWriteStep) { named = append(named, s) })
	require.False(t, f.wrote("update", "other", leases, ""), "named or not, only the case's namespace counts")
	require.True(t, f.wrote("update", "ns", leases, ""), "named, a lease renewal counts")

	select {
	case <-f.Acted():
		t.Fatal("acted before any write went through a connection")
	default:
	}
	for _, c := range []struct {
		method, path string
		acted        bool
	}{
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/leader", false},
		{"POST", "/api/v1/namespaces/ns/events", false},
		{"GET", "/api/v1/namespaces/ns/pods", false},
		{"POST", "/api/v1/namespaces/other/pods", false},
		{"POST", "/api/v1/namespaces/ns/pods", true},
	} {
		req, err := http.NewRequest(c.method, "https://127.0.0.1:6443"+c.path, nil)
		require.NoError(t, err)
		f.noteAct(req)
		acted := false
		select {
		case <-f.Acted():
			acted = true
		default:
		}
		require.Equal(t, c.acted, acted, "%s %s", c.method, c.path)
	}
}

// TestWatchStreamsLeaveNothingBehind: every way a watch stream ends (the
// server ends it, it is cut, the controller closes it while its events are
// held back, the controller stops reading) ends both goroutines of its
// delay buffer, and nothing keeps counting as undelivered.
func TestWatchStreamsLeaveNothingBehind(t *testing.T) {
	srv := watchServer(t, 100*time.Millisecond)
	f := New(Options{Namespace: "ns"})
	rt := f.WrapTransport(&Instance{})(http.DefaultTransport)
	open := func() io.ReadCloser {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/pods?watch=true", nil)
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		return resp.Body
	}

	// Read to the end, then closed.
	body := open()
	_, err := io.ReadAll(body)
	require.NoError(t, err)
	require.NoError(t, body.Close())

	// Read to the end and never closed: the stream's end ends both.
	_, err = io.ReadAll(open())
	require.NoError(t, err)

	// Cut while open.
	body = open()
	_, err = io.ReadFull(body, make([]byte, 6))
	require.NoError(t, err)
	require.True(t, f.DropWatches(""))
	require.NoError(t, body.Close())

	// Closed while its events are held back.
	f.DelayWatches("", time.Hour, time.Hour)
	body = open()
	time.Sleep(200 * time.Millisecond) // both lines arrive and are held
	require.NoError(t, body.Close())

	// Nobody reads, then it is closed.
	f.Heal()
	body = open()
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, body.Close())

	require.Eventually(t, func() bool { return goroutinesIn("(*delayedBody)") == 0 }, 5*time.Second, 10*time.Millisecond,
		"goroutines of watch delay buffers left:\n%s", stacksWith("(*delayedBody)"))
	require.Eventually(t, func() bool { return f.undelivered.Load() == 0 }, 5*time.Second, 10*time.Millisecond,
		"held-back chunks still counted: %d", f.undelivered.Load())
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Empty(t, f.watches, "a closed watch is still listed as open")
}

// stacksWith returns the stacks of the goroutines that have fn in theirs.
func stacksWith(fn string) string {
	var out []string
	for _, g := range goroutineStacks() {
		if strings.Contains(g, fn) {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// goroutinesIn counts the goroutines that have fn in their stacks.
func goroutinesIn(fn string) int {
	n := 0
	for _, g := range goroutineStacks() {
		if strings.Contains(g, fn) {
			n++
		}
	}
	return n
}

// goroutineStacks are the stacks of every goroutine, one a string.
func goroutineStacks() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(string(buf[:n]), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}
