package properties

import (
	"iter"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A case at rest: nothing happened to it for a while and nothing is known
// to be about to. A deadline property (Converges, MatchesReference) whose
// state is still wrong at rest fails then, instead of waiting out its
// deadline: nobody is left to act on it. Most of a failing case's time,
// and so of a shrink, was that wait.

// restFor is the rest a deadline property takes as final, for its
// deadline within: a third of it, and at least minRest; rest, when set.
func restFor(rest, within time.Duration) time.Duration {
	if rest != 0 {
		return rest
	}
	return min(within, max(minRest, within/3))
}

// minRest is the least default rest: longer than the timers a correct
// controller commonly waits on silently (a requeue a few seconds on, a
// work queue's back-off after a short error window).
const minRest = 10 * time.Second

// atRest reports whether the case has been at rest for rest by the end of
// the trace, after the heal, and if so since when.
func (tr *Trace) atRest(rest time.Duration) (time.Time, bool) {
	return tr.atRestOwing(rest, true)
}

// atRestOwing is atRest, with or without the retries the work queue owes
// (queueRetries) among what is due.
func (tr *Trace) atRestOwing(rest time.Duration, owed bool) (time.Time, bool) {
	if rest < 0 || tr.Healed.IsZero() {
		return time.Time{}, false
	}
	since, ok := tr.restingSince(owed)
	return since, ok && tr.End.Sub(since) >= rest
}

// restingSince is when the case came to rest: the later of the heal, the
// last change to the objects, the controller's last request or reconcile,
// the last exec and event (a fault, a user change, watch events held back
// and delivered), and when a timer known to be pending comes due (a
// reconcile's RequeueAfter; a retry after a failure, at twice the gap
// between the last two attempts, as a work queue's exponential back-off
// would; with owed, the retries the work queue owes, queueRetries). ok is
// false while something is known to be under way: an object being
// deleted, a pod not running and ready (a probe, a restart's back-off,
// the scheduler or a volume to wait for).
func (tr *Trace) restingSince(owed bool) (time.Time, bool) {
	since := tr.Healed
	later := func(t time.Time) {
		if t.After(since) {
			since = t
		}
	}
	if n := len(tr.States); n > 0 {
		last := tr.States[n-1]
		later(last.At)
		for _, o := range last.Objects {
			if inMotion(o) {
				return time.Time{}, false
			}
		}
	}
	for _, e := range tr.Execs {
		later(e.At)
	}
	// A fault or user change, or watch events held back and now
	// delivered: news the controller may yet act on.
	for _, e := range tr.Events {
		later(e.At)
	}
	// The controller's requests; and when its last write failed, the
	// retry due at twice the gap since the failed write before it.
	var lastWrite, prevFailed *Request
	for i := range tr.Requests {
		r := &tr.Requests[i]
		if tr.Controller == "" || r.User != tr.Controller || r.Verb == "watch" || r.bookkeeping() {
			continue
		}
		later(r.At)
		if isWrite(r.Verb) {
			if lastWrite != nil && retried(lastWrite.Code) {
				prevFailed = lastWrite
			}
			lastWrite = r
		}
	}
	if lastWrite != nil && retried(lastWrite.Code) && prevFailed != nil {
		later(lastWrite.At.Add(2 * lastWrite.At.Sub(prevFailed.At)))
	}
	// In-process reconciles: each key's last, and its requeue.
	lastOf := map[string]int{}
	prevOf := map[string]int{}
	for i, r := range tr.Reconciles {
		if j, ok := lastOf[r.Key]; ok {
			prevOf[r.Key] = j
		}
		lastOf[r.Key] = i
		later(r.At)
	}
	for key, i := range lastOf {
		r := tr.Reconciles[i]
		switch {
		case r.RequeueAfter > 0:
			later(r.At.Add(r.RequeueAfter))
		case r.Err != "" || r.Requeue:
			gap := time.Second // a first failure's retry comes well within it
			if j, ok := prevOf[key]; ok {
				gap = max(gap, 2*r.At.Sub(tr.Reconciles[j].At))
			}
			later(r.At.Add(gap))
		}
	}
	// A retry the work queue owes after a storm of failures (it may be
	// far off: a deadline property then judges nothing, see notJudged).
	if owed {
		for _, q := range tr.queueRetries() {
			later(q.due)
		}
	}
	return since, true
}

// retried is whether a request that answered code is one a client retries:
// a conflict, throttling, or a server error (what APIErrors answers).
func retried(code int) bool {
	return code == 409 || code == 429 || code >= 500
}

// InMotion names an object of the state known to be about to change
// without anyone's request (a pod not running and ready, a workload short
// of its replicas: see inMotion), or is empty when none is: a run that
// ends before such an object is done ends half-way. What a deletion holds
// is left out, the objects being deleted and their owners up the chain:
// a pod on a node that stays lost holds its deletion, and its StatefulSet
// short of it, for ever (and MatchesReference leaves them out too).
func (s State) InMotion() string {
	byName := s.byName()
	held := map[*unstructured.Unstructured]bool{}
	for _, o := range s.Objects {
		if o.GetDeletionTimestamp() != nil {
			held[o] = true
			for owner := range ownerChain(o, byName) {
				held[owner] = true
			}
		}
	}
	for _, o := range s.Objects {
		if !held[o] && inMotion(o) {
			return o.GetKind() + " " + o.GetName()
		}
	}
	return ""
}

// byName are the state's objects by kind and name ("Pod web-0"), as owner
// references name them.
func (s State) byName() map[string]*unstructured.Unstructured {
	out := make(map[string]*unstructured.Unstructured, len(s.Objects))
	for _, o := range s.Objects {
		out[o.GetKind()+" "+o.GetName()] = o
	}
	return out
}

// ownerChain yields o's owners found in byName, up the chain, each once.
func ownerChain(o *unstructured.Unstructured, byName map[string]*unstructured.Unstructured) iter.Seq[*unstructured.Unstructured] {
	return func(yield func(*unstructured.Unstructured) bool) {
		seen := map[*unstructured.Unstructured]bool{o: true}
		for next := []*unstructured.Unstructured{o}; len(next) > 0; next = next[1:] {
			for _, ref := range next[0].GetOwnerReferences() {
				owner := byName[ref.Kind+" "+ref.Name]
				if owner == nil || seen[owner] {
					continue
				}
				seen[owner] = true
				if !yield(owner) {
					return
				}
				next = append(next, owner)
			}
		}
	}
}

// inMotion is whether o is known to be about to change without anyone's
// request: it is being deleted, a workload's ready replicas are not yet
// available, a built-in workload has fewer ready replicas than it asks
// for (its controller makes the pods: a pod just deleted is made again
// after a while in a busy controller manager's queue), or it is a pod
// that is not both running and ready, or ended.
func inMotion(o *unstructured.Unstructured) bool {
	if o.GetDeletionTimestamp() != nil {
		return true
	}
	if o.GetAPIVersion() == "apps/v1" && slices.Contains([]string{"Deployment", "ReplicaSet", "StatefulSet"}, o.GetKind()) {
		want, found, _ := unstructured.NestedInt64(o.Object, "spec", "replicas")
		if !found {
			want = 1
		}
		if ready, _, _ := unstructured.NestedInt64(o.Object, "status", "readyReplicas"); ready < want {
			return true
		}
	}
	// Ready replicas not yet available: a minReadySeconds timer runs
	// (Deployment, ReplicaSet, StatefulSet, DaemonSet's numberAvailable
	// aside).
	ready, hasReady, _ := unstructured.NestedInt64(o.Object, "status", "readyReplicas")
	available, hasAvailable, _ := unstructured.NestedInt64(o.Object, "status", "availableReplicas")
	if hasReady && hasAvailable && available < ready {
		return true
	}
	if o.GetKind() != "Pod" || o.GetAPIVersion() != "v1" {
		return false
	}
	phase, _, _ := unstructured.NestedString(o.Object, "status", "phase")
	switch phase {
	case "Succeeded", "Failed":
		return false
	case "Running":
	default:
		return true
	}
	// Not Ready: a probe, or a lost node's eviction, is yet to act.
	conditions, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conditions {
		if c, _ := c.(map[string]any); c["type"] == "Ready" && c["status"] != "True" {
			return true
		}
	}
	statuses, _, _ := unstructured.NestedSlice(o.Object, "status", "containerStatuses")
	if len(statuses) == 0 {
		return true
	}
	for _, s := range statuses {
		s, _ := s.(map[string]any)
		if ready, _ := s["ready"].(bool); !ready {
			return true
		}
		if state, _ := s["state"].(map[string]any); state["waiting"] != nil {
			return true
		}
	}
	return false
}
