package properties

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

// What a correct real operator does and the properties must not call a
// bug: objects deleted and created again under their names, cluster
// components taking turns on a field, client-go's bounded retry helpers.

// TestNoFightLoopKnowsObjectsByIdentity: an operator re-creates its
// StatefulSet to change an immutable field; the controller manager then
// writes the new object's status. Each incarnation is another object.
func TestNoFightLoopKnowsObjectsByIdentity(t *testing.T) {
	var ws []Write
	for i := range 6 {
		d := time.Duration(i) * 2 * s
		uid := types.UID(fmt.Sprintf("uid-%d", i))
		ws = append(ws,
			// The create leaves out the old incarnation's status: the
			// creator "wrote" the field away.
			Write{At: at(d), Manager: "db-operator", Kind: "StatefulSet", Name: "db", UID: uid, Field: "status.availableReplicas"},
			Write{At: at(d + s), Manager: "kube-controller-manager", Kind: "StatefulSet", Name: "db", UID: uid, Field: "status.availableReplicas", Value: "3"})
	}
	requests := []Request{{At: t0, User: "op", Verb: "create", Resource: "statefulsets", Name: "db", Code: 201, FieldManager: "db-operator"}}
	tr := &Trace{Start: t0, Controller: "op", Requests: requests, Writes: ws, End: at(12 * s), Final: true}
	v := NoFightLoop(FightOptions{}).Check(tr)
	require.NoError(t, v.Err, v.Detail)

	// The same writes of one object are a fight.
	for i := range ws {
		ws[i].UID = "uid-0"
	}
	require.EqualError(t, NoFightLoop(FightOptions{}).Check(tr).Err,
		"no-fight-loop: StatefulSet db field status.availableReplicas alternated between [db-operator kube-controller-manager]")
}

// TestNoFightLoopIsTheControllersFight: the scheduler and the kubelet
// taking turns on a pod's condition are not the controller's fight; the
// controller taking the field from either of them is.
func TestNoFightLoopIsTheControllersFight(t *testing.T) {
	trace := func(a, b string) *Trace {
		var ws []Write
		for i := range 8 {
			ws = append(ws, Write{At: at(time.Duration(i) * s), Manager: []string{a, b}[i%2], Kind: "Pod", Name: "db-0", UID: "pod-uid",
				Field: "status.conditions[type=PodScheduled].observedGeneration"})
		}
		requests := []Request{{At: t0, User: "op", Verb: "patch", Resource: "pods", Name: "db-0", Code: 200, FieldManager: "db-operator"}}
		return &Trace{Start: t0, Controller: "op", Requests: requests, Writes: ws, End: at(8 * s), Final: true}
	}
	v := NoFightLoop(FightOptions{}).Check(trace("kube-scheduler", "kubelet"))
	require.NoError(t, v.Err, v.Detail)
	require.EqualError(t, NoFightLoop(FightOptions{}).Check(trace("db-operator", "kubelet")).Err,
		"no-fight-loop: Pod db-0 field status.conditions[type=PodScheduled].observedGeneration alternated between [db-operator kubelet]")
}

// TestBoundedBackoffRetryHelpers: client-go's retry.RetryOnConflict with
// retry.DefaultRetry (5 tries, 10 ms apart) or retry.DefaultBackoff (4
// tries, 10, 50 and 250 ms apart) inside each reconcile, the work queue's
// back-off (5 ms doubling) between reconciles: correct, at any cost of a
// request, in process (reconciles recorded) or not.
func TestBoundedBackoffRetryHelpers(t *testing.T) {
	helpers := map[string][]time.Duration{
		"DefaultRetry":   {10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond},
		"DefaultBackoff": {10 * time.Millisecond, 50 * time.Millisecond, 250 * time.Millisecond},
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for name, steps := range helpers {
		for _, cost := range []time.Duration{0, time.Millisecond, 30 * time.Millisecond, 60 * time.Millisecond} {
			for _, inProcess := range []bool{false, true} {
				jitter := func() time.Duration { return cost + time.Duration(rng.Int64N(int64(cost)+1)) }
				var reqs []Request
				var reconciles []Reconcile
				d := time.Duration(0)
				for burst := range 10 {
					reconciles = append(reconciles, Reconcile{At: at(d), Key: "ns/db", Err: "conflict"})
					d += jitter() // the reconcile's reads
					for try := range len(steps) + 1 {
						reqs = append(reqs, Request{At: at(d), User: "op", Verb: "update", Resource: "databases", Subresource: "status", Name: "db", Code: 409})
						if try < len(steps) {
							d += steps[try] + jitter()
						}
					}
					d += 5 * time.Millisecond << burst // the work queue
				}
				tr := &Trace{Start: t0, Controller: "op", Requests: reqs, End: at(d), Final: true}
				if inProcess {
					tr.Reconciles = reconciles
				}
				v := BoundedBackoff(BackoffOptions{}).Check(tr)
				require.NoError(t, v.Err, "%s, requests costing %v-%v, in process %v: %s", name, cost, 2*cost, inProcess, v.Detail)
			}
		}
	}

	// Another object's reconciles between the tries (a controller of two
	// objects): the burst is still one reconcile's.
	var reqs []Request
	var reconciles []Reconcile
	d := time.Duration(0)
	for b := range 8 {
		reconciles = append(reconciles, Reconcile{At: at(d), Controller: "database", Key: "ns/db", Err: "conflict"})
		for i := range 5 {
			reqs = append(reqs, Request{At: at(d + time.Duration(i)*12*time.Millisecond), User: "op", Verb: "update", Resource: "databases", Subresource: "status", Name: "db", Code: 409})
			reconciles = append(reconciles, Reconcile{At: at(d + time.Duration(i)*12*time.Millisecond + time.Millisecond), Controller: "database", Key: "ns/other"})
		}
		d += 60*time.Millisecond + 5*time.Millisecond<<b
	}
	v := BoundedBackoff(BackoffOptions{}).Check(&Trace{Start: t0, Controller: "op", Requests: reqs, Reconciles: reconciles, End: at(d), Final: true})
	require.NoError(t, v.Err, v.Detail)
	// Refusals other than conflicts are no retry helper's: ten 500s with
	// no wait between them are ten attempts.
	reqs = nil
	for i := range 10 {
		reqs = append(reqs, Request{At: at(time.Duration(i) * 10 * time.Millisecond), User: "op", Verb: "update", Resource: "databases", Name: "db", Code: 500})
	}
	v = BoundedBackoff(BackoffOptions{}).Check(&Trace{Start: t0, Controller: "op", Requests: reqs, End: at(s), Final: true})
	require.EqualError(t, v.Err, "bounded-backoff: update databases db retried without backing off")

	// The report that started this: one burst of five, 68 ms.
	reqs = nil
	for i := range 5 {
		reqs = append(reqs, Request{At: at(time.Duration(i) * 17 * time.Millisecond), User: "op", Verb: "update", Resource: "databases", Subresource: "status", Name: "db", Code: 409})
	}
	v = BoundedBackoff(BackoffOptions{}).Check(&Trace{Start: t0, Controller: "op", Requests: reqs, End: at(s), Final: true})
	require.NoError(t, v.Err, v.Detail)

	// A helper with no bound between its bursts: a burst every 50 ms.
	reqs = nil
	for b := range 10 {
		for i := range 5 {
			reqs = append(reqs, Request{At: at(time.Duration(b)*50*time.Millisecond + time.Duration(i)*10*time.Millisecond), User: "op", Verb: "update", Resource: "databases", Name: "db", Code: 409})
		}
	}
	v = BoundedBackoff(BackoffOptions{}).Check(&Trace{Start: t0, Controller: "op", Requests: reqs, End: at(s), Final: true})
	require.EqualError(t, v.Err, "bounded-backoff: update databases db retried without backing off")
	require.Contains(t, v.Detail, "50 failed attempts in 490ms (10 bursts")
}

// TestEventsAreNoNews: a controller that posts Events and renews a lease
// does not act on other components' Events or leases: the kubelet's
// Events between its retries do not end a streak.
func TestEventsAreNoNews(t *testing.T) {
	reqs := []Request{
		{At: t0, User: "op", Verb: "create", Resource: "events", Code: 201},
		{At: t0, User: "op", Verb: "update", Resource: "leases", Name: "leader", Code: 200},
	}
	for i := range 20 {
		d := time.Duration(i) * 10 * time.Millisecond
		reqs = append(reqs,
			Request{At: at(d + time.Millisecond), User: "op", Verb: "update", Resource: "databases", Name: "db", Code: 500},
			Request{At: at(d + 2*time.Millisecond), User: "kubelet", Verb: "create", Resource: "events", Code: 201},
			Request{At: at(d + 3*time.Millisecond), User: "other-operator", Verb: "update", Resource: "leases", Name: "its-own", Code: 200})
	}
	v := BoundedBackoff(BackoffOptions{}).Check(&Trace{Start: t0, Controller: "op", Requests: reqs, End: at(s), Final: true})
	require.EqualError(t, v.Err, "bounded-backoff: update databases db retried without backing off")
}

// TestReconcilesForNewsAreNoRetries: a flood of events (watch events the
// harness held back, delivered at once) makes a reconcile per event, and
// each fails while the API refuses writes: the controller answers news,
// it does not retry. The same reconciles as the work queue's retries,
// with no back-off, fail.
func TestReconcilesForNewsAreNoRetries(t *testing.T) {
	trace := func(news bool) *Trace {
		var rs []Reconcile
		var reqs []Request
		for i := range 18 {
			d := time.Duration(i) * 250 * time.Microsecond
			rs = append(rs, Reconcile{At: at(d), Controller: "database", Key: "ns/db", Err: "429", News: news})
			reqs = append(reqs, Request{At: at(d + 100*time.Microsecond), User: "op", Verb: "update", Resource: "databases", Subresource: "status", Name: "db", Code: 429})
		}
		return &Trace{Start: t0, Controller: "op", Reconciles: rs, Requests: reqs, End: at(s), Final: true}
	}
	v := BoundedBackoff(BackoffOptions{}).Check(trace(true))
	require.NoError(t, v.Err, v.Detail)
	require.EqualError(t, BoundedBackoff(BackoffOptions{}).Check(trace(false)).Err, "bounded-backoff: reconcile of db retried without backing off")
}
