package properties

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The per-item back-off of client-go's and controller-runtime's default
// work queue rate limiter: each failed reconcile of an item since its last
// success (or the queue's start) doubles the delay before the next.
const (
	queueBase = 5 * time.Millisecond
	queueCap  = 1000 * time.Second
)

// queueRetry is a retry that a correct controller's work queue may still
// owe an item after the heal. While the faults lasted, the cluster kept
// sending the controller news and every reconcile of it failed; each
// failure counts in the item's back-off, the reconciles that answered
// news too, so 23 refused status writes in 3.6 s put the next retry
// 1000 s on. With no news since, the controller rightly waits that long,
// and a deadline property cannot tell it from one that never acts.
type queueRetry struct {
	what      string // "reconcile of db", "rayclusters/status raycluster-mini"
	failures  int    // since the item's last success
	last, due time.Time
	// limited: due is the controller's own rate limiter's (in process),
	// not the default's.
	limited bool
}

// describe tells the retry owed, for a verdict's detail.
func (q queueRetry) describe(healed time.Time) string {
	if q.limited {
		return fmt.Sprintf("%s failed %d times in a row, the last %v before the heal: its work queue's rate limiter put its retry %v after the heal",
			q.what, q.failures, Round(healed.Sub(q.last)), Round(q.due.Sub(healed)))
	}
	return fmt.Sprintf("%s failed %d times in a row, the last %v before the heal: the work queue's back-off (%v·2^%d, at most %v: client-go's and controller-runtime's default) may hold its retry until %v after the heal",
		q.what, q.failures, Round(healed.Sub(q.last)), queueBase, q.failures-1, queueCap, Round(q.due.Sub(healed)))
}

// queueRetries are the retries the work queue may owe, one per item whose
// last attempt failed before the heal with nothing new to act on since.
// In process, the items are the reconciles' keys, a reconcile that
// returned an error or asked for a requeue failed, and the delay is the
// one its rate limiter gave, when the trace has it. Otherwise the item is
// the controller's one resource, and each refused write of it is a
// failed reconcile. That counts a bounded retry helper's burst of
// conflicts as several where the queue counts one; but the wire does not
// tell its tries (10 ms apart) from the queue's first retries (5, 10, 20
// ms), and counting too few fails a correct controller, while counting
// too many only matters to a controller that never tries again: one that
// does ends the streak. News since the last failure (see newsOf) would
// have had the controller act at once: no retry is owed then. A restart
// of the controller starts a fresh queue.
func (tr *Trace) queueRetries() []queueRetry {
	if tr.Healed.IsZero() {
		return nil
	}
	var starts []time.Time
	for _, e := range tr.Events {
		if e.Kind == StartEvent {
			starts = append(starts, e.At)
		}
	}
	var out []queueRetry
	owe := func(what string, attempts []attempt, backoff time.Duration) {
		n := len(attempts)
		if n == 0 || !attempts[n-1].failed || attempts[n-1].at.After(tr.Healed) || anyIn(starts, attempts[n-1].at, tr.End) {
			return
		}
		first := n - 1
		for first > 0 && attempts[first-1].failed && !anyIn(starts, attempts[first-1].at, attempts[first].at) {
			first--
		}
		failures := n - first
		last := attempts[n-1].at
		delay := defaultDelay(failures)
		if backoff > 0 {
			delay = backoff
		}
		out = append(out, queueRetry{what: what, failures: failures, last: last, due: last.Add(delay), limited: backoff > 0})
	}
	if len(tr.Reconciles) > 0 {
		byKey := map[string][]attempt{}
		backoff := map[string]time.Duration{} // of the key's last reconcile
		var keys []string
		for _, r := range reconcileStartsOf(tr.Reconciles) {
			key := r.Controller + "\x00" + r.Key
			if _, ok := byKey[key]; !ok {
				keys = append(keys, key)
			}
			byKey[key] = append(byKey[key], attempt{at: r.At, failed: r.failed()})
			backoff[key] = r.Backoff
		}
		for _, key := range keys {
			_, k, _ := strings.Cut(key, "\x00")
			owe(reconcileTarget(k), byKey[key], backoff[key])
		}
		return out
	}
	if tr.Controller == "" {
		return nil
	}
	// A binary: its writes are one item's (an operator's reconcile of its
	// resource writes the children and the status), and a reconcile ends
	// at its first refused write. A write that succeeded since the last
	// failure and is refused now is a step the reconcile had passed: the
	// queue had forgotten the item, and the count begins again.
	//
	// The kinds of write that succeeded since the last failure: a few,
	// searched in a slice (a trace holds thousands of requests, and a
	// map's hashing was most of a check's time).
	type writeKind struct{ verb, resource, subresource string }
	var failures int
	var last *Request
	var succeeded []writeKind
	for i := range tr.Requests {
		r := &tr.Requests[i]
		if r.User != tr.Controller || !r.ChangesState() {
			continue
		}
		kind := writeKind{r.Verb, r.Resource, r.Subresource}
		if !r.refused() {
			if !slices.Contains(succeeded, kind) {
				succeeded = append(succeeded, kind)
			}
			if last != nil && r.At.Sub(last.At) > retryBurstSpan {
				last = nil // the queue came back, and the write went through
			}
			continue
		}
		if slices.Contains(succeeded, kind) || last == nil || anyIn(starts, last.At, r.At) {
			failures = 0
		}
		succeeded = succeeded[:0]
		failures++
		last = r
	}
	if last == nil || last.At.After(tr.Healed) || anyIn(starts, last.At, tr.End) || newsOf(tr).between(last.At, tr.End) {
		return out
	}
	what := last.Verb + " " + last.ResourcePath()
	if last.Name != "" {
		what += " " + last.Name
	}
	return append(out, queueRetry{what: "the controller's reconcile (its last refused write: " + what + ")", failures: failures, last: last.At, due: last.At.Add(defaultDelay(failures))})
}

// defaultDelay is the default rate limiter's delay after failures in a
// row: queueBase·2^(failures-1), at most queueCap.
func defaultDelay(failures int) time.Duration {
	if failures-1 >= 40 { // 5 ms·2^40 is far past the cap
		return queueCap
	}
	return min(queueCap, queueBase<<(failures-1))
}

// notJudged is the verdict of a deadline property whose state is wrong
// when the controller's work queue owes a retry too late to judge what it
// does (see queueRetries): past the deadline less the rest the property
// takes to see an outcome. Nothing the case shows tells a controller that
// waits it out from one that never acts. It passes, saying so, once the
// case is at rest but for that retry, or at its deadline or end; it is
// pending before. ok is false when no such retry is owed: the property
// judges.
func (tr *Trace) notJudged(deadline time.Time, rest time.Duration, wrong string) (v Verdict, ok bool) {
	retries := tr.queueRetries()
	i := slices.IndexFunc(retries, func(q queueRetry) bool { return q.due.After(tr.End) && q.due.After(deadline.Add(-rest)) })
	if i < 0 {
		return Verdict{}, false
	}
	q := retries[i]
	if _, rest := tr.atRestOwing(rest, false); rest || tr.Final || tr.End.After(deadline) {
		v := pass("not judged: %s, too late for the deadline %v after the heal; %s", q.describe(tr.Healed), Round(deadline.Sub(tr.Healed)), wrong)
		v.NotJudged = true
		return v, true
	}
	return pending("%s; %s", wrong, q.describe(tr.Healed)), true
}
