package properties

import (
	"slices"
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

// A storm of failed reconciles while the faults lasted, most of them
// answering news, puts a correct work queue's next retry up to 1000 s
// on; with no news since, a deadline property cannot judge the case and
// says so, at rest, instead of failing it. Failures after the heal, news
// the controller leaves unanswered and a short back-off are judged.
func TestWorkQueueOwesARetry(t *testing.T) {
	const failures = 23
	storm := func(tr *Trace, from time.Duration) {
		for i := range failures {
			at := at(from + time.Duration(i)*160*time.Millisecond)
			tr.Reconciles = append(tr.Reconciles, Reconcile{At: at, Controller: "app", Key: "ns/web", Err: "conflict", News: i > 0})
		}
	}
	// Ready 2 of 3 from 1 s on; the storm from 1 s to 4.5 s, the heal at
	// 5 s; rest is 20 s.
	stuck := func(end time.Duration) *Trace {
		tr := &Trace{Start: t0, Healed: at(5 * s), States: replicaStates(1, 2), End: at(end), Controller: "operator"}
		storm(tr, 1*s)
		return tr
	}
	p := Converges("app-ready", allReady, ConvergeOptions{Within: 60 * s})
	require.False(t, p.Check(stuck(24*s)).Done, "at rest 19 s of 20")
	v := p.Check(stuck(26 * s))
	require.True(t, v.Done)
	require.NoError(t, v.Err)
	require.Contains(t, v.Detail, "not judged: reconcile of web failed 23 times in a row, the last 480ms before the heal: the work queue's back-off (5ms·2^22, at most 16m40s: client-go's and controller-runtime's default) may hold its retry until 16m39.5s after the heal, too late for the deadline 1m0s after the heal")
	require.Contains(t, v.Detail, "false: App web has 2 of 3 replicas ready")

	t.Run("a failure after the heal is the controller's own", func(t *testing.T) {
		tr := stuck(28 * s)
		tr.Reconciles = append(tr.Reconciles, Reconcile{At: at(5500 * time.Millisecond), Controller: "app", Key: "ns/web", Err: "conflict"})
		v := p.Check(tr)
		require.ErrorContains(t, v.Err, "did not converge after the faults healed")
	})
	t.Run("a short storm's retry is waited for, then judged", func(t *testing.T) {
		tr := &Trace{Start: t0, Healed: at(5 * s), States: replicaStates(1, 2), End: at(24 * s), Controller: "operator"}
		for i := range 13 { // the 13th failure's retry is due 5ms·2^12 = 20.5 s on
			tr.Reconciles = append(tr.Reconciles, Reconcile{At: at(4*s + time.Duration(i)*50*time.Millisecond), Controller: "app", Key: "ns/web", Err: "conflict", News: true})
		}
		require.False(t, p.Check(tr).Done, "the retry is due at 25.1 s")
		tr.End = at(45 * s)
		require.False(t, p.Check(tr).Done, "at rest from the retry's due time, for 19.9 s of 20")
		tr.End = at(46 * s)
		require.ErrorContains(t, p.Check(tr).Err, "did not converge after the faults healed")
	})
	t.Run("a retry due within the deadline's last rest is too late to judge", func(t *testing.T) {
		tr := &Trace{Start: t0, Healed: at(5 * s), States: replicaStates(1, 2), End: at(26 * s), Controller: "operator"}
		for i := range 14 { // due 5ms·2^13 = 41 s on: at 45.7 s, past 65 s less 20 s
			tr.Reconciles = append(tr.Reconciles, Reconcile{At: at(4*s + time.Duration(i)*50*time.Millisecond), Controller: "app", Key: "ns/web", Err: "conflict", News: true})
		}
		v := p.Check(tr)
		require.NoError(t, v.Err)
		require.Contains(t, v.Detail, "not judged: reconcile of web failed 14 times in a row")
	})
	t.Run("the controller's own rate limiter's delay, when recorded", func(t *testing.T) {
		tr := stuck(26 * s)
		tr.Reconciles[failures-1].Backoff = 10 * s // a limiter capped at 10 s: due at 14.5 s
		require.False(t, p.Check(tr).Done, "at rest from 14.5 s")
		tr.End = at(35 * s)
		require.ErrorContains(t, p.Check(tr).Err, "did not converge after the faults healed")
		tr.Reconciles[failures-1].Backoff = 1000 * s
		v := p.Check(tr)
		require.NoError(t, v.Err)
		require.Contains(t, v.Detail, "not judged: reconcile of web failed 23 times in a row, the last 480ms before the heal: its work queue's rate limiter put its retry 16m39.5s after the heal")
	})
	t.Run("a success resets the count, as the queue forgets the item", func(t *testing.T) {
		tr := stuck(26 * s)
		tr.Reconciles[20].Err = ""
		require.ErrorContains(t, p.Check(tr).Err, "did not converge after the faults healed", "2 failures since: due in 10 ms")
	})
	t.Run("a restart starts a fresh queue", func(t *testing.T) {
		tr := stuck(26 * s)
		tr.Events = []Event{{At: at(4400 * time.Millisecond), Kind: StartEvent}}
		require.ErrorContains(t, p.Check(tr).Err, "did not converge after the faults healed")
		tr.Events = []Event{{At: at(4800 * time.Millisecond), Kind: StartEvent}}
		require.ErrorContains(t, p.Check(tr).Err, "did not converge after the faults healed", "after the last failure")
	})

	// Out of process: the controller's refused writes of one object are
	// the attempts; news after the last leaves no retry owed.
	requests := func() *Trace {
		tr := &Trace{Start: t0, Healed: at(5 * s), States: replicaStates(1, 2), End: at(26 * s), Controller: "operator"}
		for i := range failures {
			at := at(1*s + time.Duration(i)*160*time.Millisecond)
			tr.Requests = append(tr.Requests, Request{At: at, User: "operator", Verb: "update", Resource: "apps", Subresource: "status", Name: "web", Code: 409},
				Request{At: at.Add(80 * time.Millisecond), User: "kubelet", Verb: "update", Resource: "apps", Name: "web", Code: 200})
		}
		tr.Requests = tr.Requests[:len(tr.Requests)-1] // no news after the last
		return tr
	}
	v = p.Check(requests())
	require.NoError(t, v.Err)
	require.Contains(t, v.Detail, "not judged: the controller's reconcile (its last refused write: update apps/status web) failed 23 times in a row")
	// The queue's own retries, with no news between them, count too.
	tr := requests()
	tr.Requests = slices.DeleteFunc(tr.Requests, func(r Request) bool { return r.User == "kubelet" })
	require.NoError(t, p.Check(tr).Err)
	// A successful status write ends the streak: 2 failures since.
	tr.Requests[20].Code = 200
	require.ErrorContains(t, p.Check(tr).Err, "did not converge after the faults healed")
	// Refused writes of other kinds count as the same reconcile's, and
	// successes of another kind between them (a status written by a
	// reconcile that then fails to delete a pod) do not end the streak.
	tr = requests()
	for i := range tr.Requests {
		if i%4 == 0 && tr.Requests[i].User == "operator" {
			tr.Requests[i].Verb, tr.Requests[i].Resource, tr.Requests[i].Subresource, tr.Requests[i].Code = "delete", "pods", "", 504
			tr.Requests = append(tr.Requests, Request{At: tr.Requests[i].At.Add(-time.Millisecond), User: "operator", Verb: "update", Resource: "apps", Subresource: "status", Name: "web", Code: 200})
		}
	}
	slices.SortStableFunc(tr.Requests, func(a, b Request) int { return a.At.Compare(b.At) })
	v = p.Check(tr)
	require.NoError(t, v.Err)
	require.Contains(t, v.Detail, "failed 23 times in a row")
	// A write that goes through a while after the last failure: the
	// queue came back.
	tr = requests()
	tr.Requests = append(tr.Requests, Request{At: at(5600 * time.Millisecond), User: "operator", Verb: "create", Resource: "pods", Name: "web-3", Code: 201})
	require.ErrorContains(t, p.Check(tr).Err, "did not converge after the faults healed")
	tr = requests()
	tr.Requests = append(tr.Requests, Request{At: at(4600 * time.Millisecond), User: "kubelet", Verb: "update", Resource: "apps", Name: "web", Code: 200})
	require.ErrorContains(t, p.Check(tr).Err, "did not converge after the faults healed", "news at 4.6 s unanswered")

	t.Run("matches-reference", func(t *testing.T) {
		p := MatchesReference(ReferenceOptions{})
		tr := referenceTrace(26*s, func(_ int, objects []*unstructured.Unstructured) []*unstructured.Unstructured {
			set(objects[0], int64(3), "spec", "replicas")
			return objects
		}, 0, 2)
		tr.Start, tr.Healed = t0, at(5*s)
		storm(tr, 1*s)
		v := p.Check(tr)
		require.NoError(t, v.Err)
		require.Contains(t, v.Detail, "not judged: reconcile of web failed 23 times in a row")
		require.Contains(t, v.Detail, "differs from the reference: App web")
	})
	t.Run("bounded-backoff's recovery is owed no sooner", func(t *testing.T) {
		p := BoundedBackoff(BackoffOptions{})
		tr := stuck(40 * s)
		require.NoError(t, p.Check(tr).Err)
		tr.Reconciles = tr.Reconciles[:3] // due 20 ms after the last
		require.ErrorContains(t, p.Check(tr).Err, "was not tried again within 30s after the faults healed")
	})
}
