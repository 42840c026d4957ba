package record

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeprop/kubeprop/properties"
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

// TestFieldWritesOfAnotherIncarnation: an update whose old version has
// another UID (a relist after the object was deleted and created again
// under its name) writes every field of the new object, each with its UID,
// and does not diff it against the old one.
func TestFieldWritesOfAnotherIncarnation(t *testing.T) {
	object := func(uid string, replicas int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"kind":     "StatefulSet",
			"metadata": map[string]any{"name": "db", "uid": uid},
			"spec":     map[string]any{"replicas": replicas},
		}}
	}
	writes := fieldWrites(object("old", 3), object("new", 3), time.Now())
	require.Len(t, writes, 1, "the new incarnation's spec.replicas is written, though its value is the old one's")
	require.Equal(t, "spec.replicas", writes[0].Field)
	require.Equal(t, "new", string(writes[0].UID))
	require.Empty(t, fieldWrites(object("new", 3), object("new", 3), time.Now()))
}

// TestAttributeUnknown: a write that managedFields cannot attribute (a
// controller removing a label another writer set changes none of its own
// fields) goes to the field manager of the last successful write of the
// object received before the change was seen, from the audit log, which
// is in the order requests completed.
func TestAttributeUnknown(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return at.Add(time.Duration(n) * time.Millisecond) }
	requests := []properties.Request{
		{At: ms(5), Verb: "update", Resource: "pods", Name: "web-1", Code: 200, FieldManager: "podset-controller"},
		{At: ms(1), Verb: "patch", Resource: "pods", Name: "web-1", Code: 200, FieldManager: "kubeprop-conflicting-writer"},
		{At: ms(7), Verb: "update", Resource: "pods", Name: "web-1", Code: 409, FieldManager: "refused"},
		{At: ms(8), Verb: "create", Resource: "pods", Subresource: "exec", Name: "web-1", Code: 200, FieldManager: "kubectl"},
		{At: ms(9), Verb: "update", Resource: "podsets", Name: "web-1", Code: 200, FieldManager: "other-kind"},
		{At: ms(20), Verb: "update", Resource: "pods", Name: "web-1", Code: 200, FieldManager: "too-late"},
		{At: ms(30), Verb: "delete", Resource: "pods", Name: "web-2", Code: 200, FieldManager: "generic-garbage-collector"},
		{At: ms(40), Verb: "deletecollection", Resource: "pods", Code: 200, FieldManager: "namespace-controller"},
	}
	writes := []properties.Write{
		{At: ms(10), Manager: properties.ManagerUnknown, Kind: "Pod", Name: "web-1", Field: "metadata.labels.team"},
		{At: ms(10), Manager: "podset-controller", Kind: "Pod", Name: "web-1", Field: "spec.x"},
		{At: ms(31), Manager: properties.ManagerUnknown, Kind: "Pod", Name: "web-2", Field: "metadata.deletionTimestamp"},
		{At: ms(31), Manager: properties.ManagerUnknown, Kind: "Pod", Name: "web-3", Field: "metadata.deletionTimestamp"},
		{At: ms(41), Manager: properties.ManagerUnknown, Kind: "Pod", Name: "web-3", Field: "metadata.deletionTimestamp"},
	}
	got := attributeUnknown(writes, requests, map[string]string{"Pod": "pods", "PodSet": "podsets"})
	var managers []string
	for _, w := range got {
		managers = append(managers, w.Manager)
	}
	require.Equal(t, []string{"podset-controller", "podset-controller", "generic-garbage-collector", properties.ManagerUnknown, "namespace-controller"}, managers)
	require.Equal(t, properties.ManagerUnknown, writes[0].Manager, "the recorder's writes are left as they were")
}

// TestFieldManager: as the API server names a request's field manager.
func TestFieldManager(t *testing.T) {
	for _, c := range []struct{ uri, agent, want string }{
		{"/api/v1/namespaces/a/pods/web?fieldManager=kubeprop-conflicting-writer", "kubeprop/v0", "kubeprop-conflicting-writer"},
		{"/apis/apps/v1/namespaces/a/deployments/web", "kube-controller-manager/v1.37.2 (linux/amd64) kubernetes/abc/deployment-controller", "kube-controller-manager"},
		{"/api/v1/namespaces/a/pods/web?dryRun=All", "podset-controller", "podset-controller"},
		{"/api/v1/namespaces/a/pods/web", "", ""},
	} {
		require.Equal(t, c.want, fieldManager(c.uri, c.agent), "%s by %q", c.uri, c.agent)
	}
}

func pod(name, rv string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: fields}
	u.SetKind("Pod")
	u.SetName(name)
	u.SetResourceVersion(rv)
	return u
}

// TestStatesFollowResourceVersions: each resource has its own watch
// stream, so changes can arrive out of the order they were written in;
// states follow the API server's order, and their times stay in order.
func TestStatesFollowResourceVersions(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	r := New(Options{Clock: clk, TimeScale: 20, Controller: "kubeprop:controller"})
	r.observe("pods", nil, pod("a", "10", map[string]any{"spec": map[string]any{"nodeName": "n1"}}))
	clk.SetTime(clk.Now().Add(time.Second))
	r.observe("pods", nil, pod("c", "30", map[string]any{}))
	clk.SetTime(clk.Now().Add(time.Second))
	r.observe("pods", nil, pod("b", "20", map[string]any{})) // written before c, seen after it
	clk.SetTime(clk.Now().Add(time.Second))
	r.observeDelete(pod("a", "40", map[string]any{}))

	tr := r.Trace(nil, true)
	var states []string
	for _, s := range tr.States {
		var names []string
		for _, o := range s.Objects {
			names = append(names, o.GetName())
		}
		states = append(states, strings.Join(names, ","))
	}
	require.Equal(t, []string{"a", "a,b", "a,b,c", "b,c"}, states)
	for i := 1; i < len(tr.States); i++ {
		require.False(t, tr.States[i].At.Before(tr.States[i-1].At), "state %d's time goes back", i)
	}
	require.Equal(t, "kubeprop:controller", tr.Controller)
	require.Equal(t, 20.0, tr.TimeScale)
	require.Equal(t, properties.ManagerDeleted, tr.Writes[len(tr.Writes)-1].Manager)
	require.Zero(t, r.SinceLastWrite(), "the deletion, just now, is the last write")
	clk.SetTime(clk.Now().Add(time.Second))
	require.Equal(t, time.Second, r.SinceLastWrite())
}

// TestActedIsActivity: an action of the harness restarts the quiet period
// as a write would, before anything it set off has been seen.
func TestActedIsActivity(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	r := New(Options{Clock: clk})
	require.Greater(t, r.SinceLastWrite(), time.Hour, "nothing has happened yet")
	r.Acted()
	require.Zero(t, r.SinceLastWrite())
	clk.SetTime(clk.Now().Add(300 * time.Millisecond))
	require.Equal(t, 300*time.Millisecond, r.SinceLastWrite())
}

// TestFaultManagerWritesAreEvents: a write by a fault injector's field
// manager is an event (what follows it was driven).
func TestFaultManagerWritesAreEvents(t *testing.T) {
	r := New(Options{FaultManagers: []string{"kubeprop-conflicting-writer"}})
	at := metav1.Now()
	managed := []any{map[string]any{"manager": "kubeprop-conflicting-writer", "operation": "Apply", "time": at.UTC().Format(time.RFC3339), "fieldsType": "FieldsV1",
		"fieldsV1": map[string]any{"f:spec": map[string]any{"f:replicas": map[string]any{}}}}}
	before := &unstructured.Unstructured{Object: map[string]any{"kind": "PodSet", "metadata": map[string]any{"name": "web", "resourceVersion": "1"}, "spec": map[string]any{"replicas": int64(3)}}}
	after := before.DeepCopy()
	after.SetResourceVersion("2")
	after.SetManagedFields(nil)
	_ = unstructured.SetNestedSlice(after.Object, managed, "metadata", "managedFields")
	_ = unstructured.SetNestedField(after.Object, int64(0), "spec", "replicas")
	r.observe("podsets", nil, before)
	r.observe("podsets", before, after)
	tr := r.Trace(nil, false)
	require.Len(t, tr.Events, 1)
	require.Equal(t, "write by kubeprop-conflicting-writer", tr.Events[0].Name)
}

// fakeQueue is a controller queue with n items.
type fakeQueue struct{ n int }

func (q *fakeQueue) Pending() bool { return q.n > 0 }

// TestIdle: busy while a reconcile runs, a queue holds items or a restart
// is under way; a reconcile of a killed instance is not recorded; a failed
// one has the back-off its rate limiter gave.
func TestIdle(t *testing.T) {
	r := New(Options{})
	q := &fakeQueue{}
	r.AddQueue(q)
	require.True(t, r.Idle())
	q.n = 1
	require.False(t, r.Idle())
	q.n = 0
	r.ReconcileStarted("podset", "ns/web")
	require.False(t, r.Idle())
	r.ReconcileOutcome("podset", "ns/web", OutcomeRequeueAfter, 5*time.Second)
	r.ReconcileDone("podset", "ns/web", true)
	r.ReconcileStarted("podset", "ns/web")
	r.ReconcileDone("podset", "ns/web", false)
	require.True(t, r.Idle())
	r.Restart(1)
	require.False(t, r.Idle())
	r.Restart(-1)
	require.True(t, r.Idle())
	// A failed reconcile: AddRateLimited asks the limiter, which records
	// its delay.
	r.ReconcileStarted("podset", "ns/web")
	r.ReconcileOutcome("podset", "ns/web", OutcomeRateLimited, 40*time.Millisecond)
	r.ReconcileDone("podset", "ns/web", true)
	tr := r.Trace(nil, false)
	require.Len(t, tr.Reconciles, 2)
	require.Equal(t, 5*time.Second, tr.Reconciles[0].RequeueAfter)
	require.Equal(t, 40*time.Millisecond, tr.Reconciles[1].Backoff)
	require.True(t, tr.Reconciles[1].Requeue)
}

// TestAuditReader: the requests of one namespace written after the reader
// was made, its field manager named; a partial last line is read once
// complete.
func TestAuditReader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	line := func(ns, verb, uri, agent string, code int) string {
		return fmt.Sprintf(`{"verb":%q,"requestURI":%q,"userAgent":%q,"requestReceivedTimestamp":"2026-12-02T10:00:00.000001Z","user":{"username":"kubeprop:controller"},"objectRef":{"resource":"pods","namespace":%q,"name":"web-1"},"responseStatus":{"code":%d}}`+"\n", verb, uri, agent, ns, code)
	}
	require.NoError(t, os.WriteFile(path, []byte(line("kp-1", "update", "/api/v1/namespaces/kp-1/pods/web-1", "old/v1", 200)), 0o644))
	a, err := NewAuditReader(path, "kp-1")
	require.NoError(t, err)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	defer f.Close()
	whole := line("kp-1", "patch", "/api/v1/namespaces/kp-1/pods/web-1?fieldManager=kubeprop-conflicting-writer", "harness.test/v0", 200)
	_, err = f.WriteString(line("kp-2", "update", "/api/v1/namespaces/kp-2/pods/web-1", "other/v1", 200) +
		line("kp-10", "update", "/api/v1/namespaces/kp-10/pods/web-1", "other/v1", 200) + "not json\n" + whole[:40])
	require.NoError(t, err)
	reqs, err := a.Read()
	require.NoError(t, err)
	require.Empty(t, reqs, "other namespaces' requests (one whose name starts with this one's), a broken line and a partial one")
	_, err = f.WriteString(whole[40:])
	require.NoError(t, err)
	reqs, err = a.Read()
	require.NoError(t, err)
	require.Len(t, reqs, 1)
	require.Equal(t, properties.Request{At: time.Date(2026, 12, 2, 10, 0, 0, 1000, time.UTC), User: "kubeprop:controller", UserAgent: "harness.test/v0",
		Verb: "patch", Resource: "pods", Namespace: "kp-1", Name: "web-1", Code: 200, FieldManager: "kubeprop-conflicting-writer"}, reqs[0])
}

// TestAuditReaderAcrossRotation: the API server rotates its log (renames
// it to a backup and starts anew); the requests written to the old file
// since the last read, and those of the new one from its start, are read,
// none twice; a read between the rename and the new file loses nothing.
func TestAuditReaderAcrossRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	line := func(name string) string {
		return fmt.Sprintf(`{"verb":"update","requestURI":"/api/v1/namespaces/kp-1/pods/%s","userAgent":"a/v1","requestReceivedTimestamp":"2026-12-02T10:00:00Z","user":{"username":"kubeprop:controller"},"objectRef":{"resource":"pods","namespace":"kp-1","name":%q},"responseStatus":{"code":200}}`+"\n", name, name)
	}
	appendTo := func(path, text string) {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		require.NoError(t, err)
		_, err = f.WriteString(text)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	names := func(reqs []properties.Request) []string {
		var out []string
		for _, r := range reqs {
			out = append(out, r.Name)
		}
		return out
	}
	appendTo(path, line("before")+strings.Repeat("x", 4096)+"\n")
	a, err := NewAuditReader(path, "kp-1")
	require.NoError(t, err)
	appendTo(path, line("a"))
	reqs, err := a.Read()
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, names(reqs))

	appendTo(path, line("b")+line("c"))
	require.NoError(t, os.Rename(path, filepath.Join(dir, "audit-2026-12-02T10-00-00.000.log")))
	reqs, err = a.Read()
	require.NoError(t, err, "between the rename and the new file")
	require.Equal(t, []string{"a"}, names(reqs))
	appendTo(path, line("d"))
	reqs, err = a.Read()
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "c", "d"}, names(reqs), "the old file's rest, then the new file from its start (shorter than the old offset)")
	appendTo(path, line("e"))
	reqs, err = a.Read()
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "c", "d", "e"}, names(reqs))

	// A backup removed before it was read is an error, not a silent loss.
	require.NoError(t, os.Rename(path, filepath.Join(dir, "audit-2026-12-02T10-00-01.000.log")))
	appendTo(path, line("f"))
	require.NoError(t, os.Remove(filepath.Join(dir, "audit-2026-12-02T10-00-01.000.log")))
	_, err = a.Read()
	require.ErrorContains(t, err, "was rotated and the file read so far is not among its 1 backups")
}

// TestFieldWritesKeyListsAsManagedFieldsDo: a list's items are keyed as
// the managers' field sets key them (a container port by containerPort
// and protocol, which the API's schema names), so each port is a field of
// its own with its own owner; a list no field set keys is keyed by name.
func TestFieldWritesKeyListsAsManagedFieldsDo(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	port := func(n int64) map[string]any {
		return map[string]any{"containerPort": n, "protocol": "TCP"}
	}
	entry := func(manager string, ports ...int64) map[string]any {
		items := map[string]any{".": map[string]any{}}
		for _, n := range ports {
			items[fmt.Sprintf(`k:{"containerPort":%d,"protocol":"TCP"}`, n)] = map[string]any{".": map[string]any{}, "f:containerPort": map[string]any{}, "f:protocol": map[string]any{}}
		}
		return map[string]any{"manager": manager, "operation": "Update", "time": at.UTC().Format(time.RFC3339), "fieldsType": "FieldsV1",
			"fieldsV1": map[string]any{"f:spec": map[string]any{"f:containers": map[string]any{`k:{"name":"app"}`: map[string]any{".": map[string]any{}, "f:ports": items}}}}}
	}
	object := func(managed []any, ports ...any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"kind":     "Pod",
			"metadata": map[string]any{"name": "web-1", "managedFields": managed},
			"spec":     map[string]any{"containers": []any{map[string]any{"name": "app", "ports": ports}}},
		}}
	}
	old := object([]any{entry("podset-controller", 80)}, port(80))
	obj := object([]any{entry("podset-controller", 80), entry("kubectl-edit", 443)}, port(80), port(443))
	got := map[string]string{}
	for _, w := range fieldWrites(old, obj, at.Time) {
		got[w.Field] = w.Manager + " " + w.Value
	}
	require.Equal(t, map[string]string{
		"spec.containers[name=app].ports[containerPort=443,protocol=TCP].containerPort": "kubectl-edit 443",
		"spec.containers[name=app].ports[containerPort=443,protocol=TCP].protocol":      `kubectl-edit "TCP"`,
	}, got)

	// The port removed by another: not in the new field sets, its keys
	// come from the old ones.
	got = map[string]string{}
	for _, w := range fieldWrites(obj, object([]any{entry("podset-controller", 80)}, port(80)), at.Time) {
		got[w.Field] = w.Manager
	}
	require.Equal(t, map[string]string{
		"spec.containers[name=app].ports[containerPort=443,protocol=TCP].containerPort": properties.ManagerUnknown,
		"spec.containers[name=app].ports[containerPort=443,protocol=TCP].protocol":      properties.ManagerUnknown,
	}, got, "a removal whose writer managedFields do not name is left to the audit log")
}
