package properties

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A case whose predicate stays false fails once it has been at rest for
// its rest, not at its deadline; anything under way or due puts that off.
func TestConvergesAtRest(t *testing.T) {
	p := Converges("app-ready", allReady, ConvergeOptions{Within: 60 * s})
	// Ready 2 of 3 from 1 s on; the heal at 1 s; rest is 20 s (a third of
	// 60 s).
	stuck := func(end time.Duration) *Trace {
		return &Trace{Start: t0, Healed: at(1 * s), States: replicaStates(1, 2), End: at(end), Controller: "operator"}
	}

	tr := stuck(20 * s)
	require.False(t, p.Check(tr).Done, "at rest 19 s of 20")
	tr = stuck(21 * s)
	v := p.Check(tr)
	require.True(t, v.Done)
	require.EqualError(t, v.Err, "app-ready: did not converge after the faults healed: App web has 2 of 3 replicas ready")
	require.Contains(t, v.Detail, "at rest since 0s after the heal, for 20s")

	// The controller's last request restarts the rest.
	tr = stuck(21 * s)
	tr.Requests = []Request{{At: at(5 * s), User: "operator", Verb: "get", Resource: "apps"}}
	require.False(t, p.Check(tr).Done, "at rest since 5 s")
	// Not a watch, an Event or a lease renewal, nor another user's.
	tr.Requests = []Request{{At: at(5 * s), User: "operator", Verb: "watch", Resource: "apps"},
		{At: at(6 * s), User: "operator", Verb: "create", Resource: "events"},
		{At: at(7 * s), User: "operator", Verb: "update", Resource: "leases"},
		{At: at(8 * s), User: "someone", Verb: "get", Resource: "apps"}}
	require.True(t, p.Check(tr).Done)

	// So do watch events held back and delivered after the heal.
	tr = stuck(21 * s)
	tr.Events = []Event{{At: at(5 * s), Kind: DeliveryEvent, Name: "StaleWatch{}"}}
	require.False(t, p.Check(tr).Done, "news at 5 s")

	// A retry due after a refused request: attempts 2 s apart, the last
	// at 3 s, is due by 7 s; at rest from then.
	tr = stuck(26 * s)
	tr.Requests = []Request{{At: at(1 * s), User: "operator", Verb: "update", Resource: "apps", Code: 500},
		{At: at(3 * s), User: "operator", Verb: "update", Resource: "apps", Code: 500}}
	require.False(t, p.Check(tr).Done, "due at 7 s, at rest 19 s")
	tr.End = at(27 * s)
	require.True(t, p.Check(tr).Done)

	// A reconcile's RequeueAfter is due at its time; a failed reconcile's
	// retry at twice the gap since the key's last.
	tr = stuck(30 * s)
	tr.Reconciles = []Reconcile{{At: at(2 * s), Key: "ns/web", RequeueAfter: 15 * s}}
	require.False(t, p.Check(tr).Done, "due at 17 s")
	tr.End = at(37 * s)
	require.True(t, p.Check(tr).Done)
	tr = stuck(30 * s)
	tr.Reconciles = []Reconcile{{At: at(2 * s), Key: "ns/web", Err: "boom"}, {At: at(6 * s), Key: "ns/web", Err: "boom"}}
	require.False(t, p.Check(tr).Done, "due at 14 s")
	tr.End = at(34 * s)
	require.True(t, p.Check(tr).Done)

	// Under way: a pod not ready, a container waiting (a restart's
	// back-off), an object being deleted, ready replicas not yet
	// available. The deadline still ends the wait.
	pod := func(phase string, ready bool, waiting bool) *unstructured.Unstructured {
		status := map[string]any{"name": "app", "ready": ready}
		if waiting {
			status["state"] = map[string]any{"waiting": map[string]any{"reason": "CrashLoopBackOff"}}
		}
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "web-0"},
			"status": map[string]any{"phase": phase, "containerStatuses": []any{status}}}}
	}
	deleting := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "c", "deletionTimestamp": "2026-01-01T00:00:00Z"}}}
	unavailable := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "d"}, "status": map[string]any{"readyReplicas": int64(2), "availableReplicas": int64(1)}}}
	short := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "StatefulSet",
		"metadata": map[string]any{"name": "db"}, "spec": map[string]any{"replicas": int64(3)}, "status": map[string]any{"readyReplicas": int64(2)}}}
	notReady := pod("Running", true, false) // on a lost node: its containers still ready
	notReady.Object["status"].(map[string]any)["conditions"] = []any{map[string]any{"type": "Ready", "status": "False"}}
	for name, o := range map[string]*unstructured.Unstructured{
		"pending": pod("Pending", false, false), "not ready": pod("Running", false, false), "waiting": pod("Running", true, true),
		"condition not ready": notReady,
		"deleting":            deleting, "unavailable": unavailable, "short of a replica": short,
	} {
		tr = stuck(50 * s)
		last := &tr.States[len(tr.States)-1]
		last.Objects = append(last.Objects, o)
		require.False(t, p.Check(tr).Done, name)
		tr.End = at(62 * s)
		require.True(t, p.Check(tr).Done, name)
	}
	// Ended and ready pods are at rest, and so is a workload with its
	// replicas ready, or a resource of the user's short of them (its
	// controller's bug, maybe).
	full := short.DeepCopy()
	full.Object["status"] = map[string]any{"readyReplicas": int64(3)}
	custom := short.DeepCopy()
	custom.SetAPIVersion("example.com/v1")
	for _, o := range []*unstructured.Unstructured{pod("Succeeded", false, false), pod("Running", true, false), full, custom} {
		tr = stuck(21 * s)
		last := &tr.States[len(tr.States)-1]
		last.Objects = append(last.Objects, o)
		require.True(t, p.Check(tr).Done)
	}

	// Rest < 0 waits out the deadline.
	p = Converges("app-ready", allReady, ConvergeOptions{Within: 60 * s, Rest: -1})
	require.False(t, p.Check(stuck(50*s)).Done)
}

// MatchesReference fails a case that differs and is at rest before its
// deadline.
func TestMatchesReferenceAtRest(t *testing.T) {
	p := MatchesReference(ReferenceOptions{})
	scaled := func(int, []*unstructured.Unstructured) []*unstructured.Unstructured {
		objects := runObjects("kp-7", 7)
		set(objects[0], int64(3), "spec", "replicas")
		return objects
	}
	// Healed at 1 s, the last change at 2 s; rest is 10 s.
	tr := referenceTrace(11*s, scaled, 0, 2)
	require.False(t, p.Check(tr).Done, "at rest 9 s of 10")
	tr.End = at(12 * s)
	v := p.Check(tr)
	require.True(t, v.Done)
	require.ErrorContains(t, v.Err, "matches-reference: the end state differs from the reference run's: App web")
	require.Contains(t, v.Detail, "at rest since 1s after the heal, for 10s")
}
