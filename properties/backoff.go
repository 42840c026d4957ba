package properties

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// BackoffOptions configures BoundedBackoff. Zero values take the defaults,
// which are client-go's and controller-runtime's per-item rate limiter.
type BackoffOptions struct {
	// Base is the first retry interval of an exponential back-off that
	// doubles. Zero means 5 ms.
	Base time.Duration
	// Cap is the longest interval a retry may wait. Zero means 1000 s.
	Cap time.Duration
	// Slack is how many attempts beyond the exponential budget a streak
	// may make, for jitter. Zero means 3.
	Slack int
	// RecoverWithin is how soon after the faults heal an object whose
	// retries were failing must be tried again. Zero means 30 s, or Cap
	// if that is shorter.
	RecoverWithin time.Duration
	// ReplaceBase is the first interval, in cluster time, of the back-off
	// between replacements of an owner's failing pods. Zero means 10 s,
	// the kubelet's own first crash-loop back-off.
	ReplaceBase time.Duration
}

// BoundedBackoff holds when the controller backs off while it fails: in a
// streak of failed attempts at one object (reconciles that return an error
// or ask for a requeue, or API requests refused; a bounded retry helper's
// burst of conflicts is one attempt, see retryBursts), it makes no more
// attempts than an exponential back-off from Base allows in the time it
// waited between them (the gaps less the shortest: what the attempts take
// themselves grows with the machine's load, see waitedIn), it never waits
// longer than Cap, and once the faults heal an object whose reconcile was failing
// is reconciled again within RecoverWithin, unless the work queue's
// default back-off owes its retry later (queueRetries). A write by another API user
// to a resource the controller writes too ends a streak: every
// informer-driven controller reacts to such news at once, and a reconcile
// that then succeeds without the failing request (nothing left to write)
// rightly starts its back-off anew; and a work queue's delay that runs
// out while such a reconcile runs is spent (see absorbed). Replacing a
// failing pod (deleting a pod it controls whose containers crashed, or
// that failed) is a retry too: the replacements of one owner's pods may
// come no faster than an exponential back-off from ReplaceBase allows.
func BoundedBackoff(opts BackoffOptions) Property {
	if opts.Base == 0 {
		opts.Base = 5 * time.Millisecond
	}
	if opts.Cap == 0 {
		opts.Cap = 1000 * time.Second
	}
	if opts.Slack == 0 {
		opts.Slack = 3
	}
	if opts.RecoverWithin == 0 {
		opts.RecoverWithin = min(30*time.Second, opts.Cap)
	}
	if opts.ReplaceBase == 0 {
		opts.ReplaceBase = 10 * time.Second
	}
	return boundedBackoff{opts: opts}
}

type boundedBackoff struct{ opts BackoffOptions }

// news are the times, sorted, of the writes by other API users to the
// resources the controller writes itself: the objects it manages, which
// its informers watch (the audit log has no reads to tell what else it
// watches), the deliveries of watch events the harness held back, and
// the controller's restarts.
// Events and leases are not among them: the controller posts Events and
// renews its leader lease, but no informer of it acts on other
// components' Events or leases.
type news []time.Time

func newsOf(tr *Trace) news {
	managed := map[string]bool{}
	for _, r := range tr.Requests {
		if r.User == tr.Controller && r.ChangesState() {
			managed[r.Resource] = true
		}
	}
	var out news
	for _, r := range tr.Requests {
		if r.User != tr.Controller && isWrite(r.Verb) && managed[r.Resource] && r.Code < 300 {
			out = append(out, r.At)
		}
	}
	for _, e := range tr.Events {
		// A fresh instance of the controller rightly tries again at once.
		if e.Kind == DeliveryEvent || e.Kind == StartEvent {
			out = append(out, e.At)
		}
	}
	slices.SortFunc(out, time.Time.Compare)
	return out
}

func isWrite(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// between reports whether another writer wrote in (from, to].
func (n news) between(from, to time.Time) bool { return anyIn(n, from, to) }

func (boundedBackoff) Name() string             { return "bounded-backoff" }
func (p boundedBackoff) Horizon() time.Duration { return p.opts.RecoverWithin }

// attempt is one try at one target; what names the target in messages.
type attempt struct {
	at     time.Time
	failed bool
	// conflict: a request refused with 409, what a retry helper retries.
	conflict bool
	// news: made by a reconcile that answered news (Reconcile.News): no
	// retry, whether it failed or not.
	news bool
}

func (p boundedBackoff) Check(tr *Trace) Verdict {
	var open []string
	news := newsOf(tr)
	reconciles := reconcileStartsOf(tr.Reconciles)
	owed := map[string]time.Time{}
	for _, q := range tr.queueRetries() {
		owed[q.what] = q.due
	}
	for _, target := range attemptsByTarget(tr) {
		if due, ok := owed[target.what]; ok && due.After(tr.Healed.Add(p.opts.RecoverWithin)) {
			target.recoversLate = true
		}
		if v, bad := p.checkTarget(tr, target, news, reconciles); bad {
			return v
		}
		if n := len(target.attempts); target.mustRecover && !target.recoversLate && n > 0 && target.attempts[n-1].failed {
			open = append(open, target.what)
		}
	}
	// Healed, with every target's last attempt a success: nothing is
	// left to back off from.
	if tr.Final || (!tr.Healed.IsZero() && (len(open) == 0 || tr.End.Sub(tr.Healed) > p.opts.RecoverWithin)) {
		return pass("every failing streak backed off")
	}
	return pending("still failing: %s", strings.Join(open, ", "))
}

func (p boundedBackoff) checkTarget(tr *Trace, t target, news news, reconciles reconcileStarts) (Verdict, bool) {
	what, attempts := t.what, t.attempts
	var streak []attempt
	// afterNews: the streak's first attempt answered news right after a
	// failure, so the work queue's delay from that failure may run out
	// while it runs (see absorbed).
	afterNews := false
	judge := func() (Verdict, bool) {
		if len(streak) < 2 {
			return Verdict{}, false
		}
		span := streak[len(streak)-1].at.Sub(streak[0].at)
		base, waited, waits, tries := p.opts.Base, span, "", len(streak)
		var starts []time.Time // of the attempts, for their own time
		switch {
		case t.replacements:
			base = time.Duration(float64(p.opts.ReplaceBase) / tr.timeScale())
		case t.mustRecover:
			waited = waitedIn(streak)
			waits = fmt.Sprintf(", %v of them waiting beyond the attempts' own time", waited)
			for _, a := range streak {
				starts = append(starts, a.at)
			}
		default:
			// A request's retries: a bounded retry helper's burst is
			// one attempt, and the back-off is judged between bursts.
			bursts := retryBursts(streak, reconciles)
			tries, waited = len(bursts), waitedBetween(bursts)
			waits = fmt.Sprintf(" (%d bursts: a retry helper's conflicts, at most %d within %v, are one), %v of them waiting between bursts beyond the attempts' own time",
				tries, retryBurstTries, retryBurstSpan, waited)
			for _, b := range bursts {
				starts = append(starts, b.first)
			}
		}
		budget := budget(base, p.opts.Slack, waited)
		if afterNews && !t.replacements {
			budget += absorbed(base, ownTime(starts))
		}
		if tries > budget {
			unit := ""
			if tries != len(streak) {
				unit = " bursts"
			}
			return fail(fmt.Errorf("bounded-backoff: %s retried without backing off", what),
				"%d failed attempts in %v%s; an exponential back-off from %v allows %d%s", len(streak), span, waits, base, budget, unit).
				with(streakEvidence(what, streak)), true
		}
		for i := 1; i < len(streak) && !t.replacements; i++ {
			if gap := streak[i].at.Sub(streak[i-1].at); gap > p.opts.Cap+p.opts.Cap/10 {
				return fail(fmt.Errorf("bounded-backoff: %s waited longer than the %v cap between retries", what, p.opts.Cap),
					"waited %v", gap).with(streakEvidence(what, streak[i-1:i+1])), true
			}
		}
		return Verdict{}, false
	}
	var prev attempt // the attempt before a
	for _, a := range attempts {
		answersNews := a.news || !prev.at.IsZero() && news.between(prev.at, a.at)
		prevFailed := prev.failed
		prev = a
		// News ends a streak; not one of replacements, which always
		// follow news (the pod's crash).
		if !a.failed || len(streak) > 0 && !t.replacements && answersNews {
			if v, bad := judge(); bad {
				return v, true
			}
			streak = streak[:0]
		}
		if a.failed {
			if len(streak) == 0 {
				afterNews = answersNews && prevFailed
			}
			streak = append(streak, a)
		}
	}
	if v, bad := judge(); bad {
		return v, true
	}
	// A streak still failing at the heal must be retried soon after.
	if t.mustRecover && !t.recoversLate && len(streak) > 0 && !tr.Healed.IsZero() && !streak[len(streak)-1].at.After(tr.Healed) {
		if tr.End.Sub(tr.Healed) > p.opts.RecoverWithin || tr.Final {
			last := streak[len(streak)-1].at
			return fail(fmt.Errorf("bounded-backoff: %s was not tried again within %v after the faults healed", what, p.opts.RecoverWithin),
				"last failed attempt %v before the heal", tr.Healed.Sub(last)).with(Evidence{
				Marks: []Mark{{At: last, Label: "the last failed attempt at " + what}},
				Spans: []Span{{From: last, To: tr.End, Label: fmt.Sprintf("not tried again for %v", Round(tr.End.Sub(last)))}},
			}), true
		}
	}
	return Verdict{}, false
}

// streakEvidence marks a streak's attempts and spans the waits between
// them.
func streakEvidence(what string, streak []attempt) Evidence {
	var e Evidence
	for i, a := range streak {
		e.Marks = append(e.Marks, Mark{At: a.at, Label: fmt.Sprintf("failed attempt %d of %d at %s", i+1, len(streak), what)})
		if i > 0 {
			e.Spans = append(e.Spans, Span{From: streak[i-1].at, To: a.at, Label: "waited " + Round(a.at.Sub(streak[i-1].at)).String()})
		}
	}
	return e
}

// waitedIn is how long a streak of retries waited beyond what its attempts
// took themselves: the sum of the gaps between attempts, less the
// shortest gap (at most attemptTimeMax) from each. An attempt's own time
// (the controller's work, its request's round trip) grows with the
// machine's load, and a retry loop with no back-off on a loaded machine
// spans as much time as a short back-off; what a back-off adds is waits
// that grow, which this keeps. Not the median gap: an attempt's own time
// varies as much as a short back-off's first waits (a reconcile that
// lists pods before its write took 20-90 ms beside 12 other cases, while
// its waits were 5, 10, 20, 40 and 80 ms), and the median would take
// those waits for the attempts' own time.
func waitedIn(streak []attempt) time.Duration {
	gaps := make([]time.Duration, 0, len(streak)-1)
	for i := 1; i < len(streak); i++ {
		gaps = append(gaps, streak[i].at.Sub(streak[i-1].at))
	}
	return waitedOver(gaps)
}

// waitedOver is the sum of gaps less the shortest (at most attemptTimeMax)
// from each: see waitedIn.
func waitedOver(gaps []time.Duration) time.Duration {
	own := min(slices.Min(gaps), attemptTimeMax)
	var waited time.Duration
	for _, g := range gaps {
		waited += g - own
	}
	return waited
}

// A bounded retry helper makes a few tries in quick succession before it
// gives the error back to its work queue: client-go's
// retry.RetryOnConflict(retry.DefaultRetry, ...) 5 tries 10 ms apart,
// retry.DefaultBackoff 4 tries 10, 50 and 250 ms apart. Such a burst is
// correct behaviour (client-go recommends it), and the work queue's
// back-off comes between bursts.
const (
	retryBurstTries = 5
	retryBurstSpan  = time.Second
)

// burst is a bounded retry helper's tries: the first and the last.
type burst struct{ first, last time.Time }

// retryBursts groups a streak of failed requests into bursts: from each
// conflict (409, what RetryOnConflict retries) that starts one, the
// conflicts after it, up to retryBurstTries in all, within retryBurstSpan
// of it, and, where the trace has the controller's reconciles (in
// process), within the reconcile that was running at its first: the
// helper's tries are one reconcile's, and that reconcile starting again is
// the work queue's retry. Another failure is a burst of its own. A retry
// loop with no bound makes bursts one after another with no wait between
// them, which the back-off budget between bursts catches.
func retryBursts(streak []attempt, reconciles reconcileStarts) []burst {
	var out []burst
	n, key := 0, ""
	for _, a := range streak {
		if k := len(out) - 1; k >= 0 && a.conflict && n > 0 && n < retryBurstTries && a.at.Sub(out[k].first) <= retryBurstSpan &&
			!reconciles.startedIn(key, out[k].last, a.at) {
			out[k].last = a.at
			n++
			continue
		}
		out = append(out, burst{first: a.at, last: a.at})
		n, key = 0, ""
		if a.conflict {
			n, key = 1, reconciles.runningAt(a.at)
		}
	}
	return out
}

// reconcileStarts are the trace's reconciles by start.
type reconcileStarts []Reconcile

func reconcileStartsOf(rs []Reconcile) reconcileStarts {
	out := slices.Clone(rs)
	slices.SortStableFunc(out, func(a, b Reconcile) int { return a.At.Compare(b.At) })
	return out
}

// latestAt is the reconcile that started last at or before t: with one
// worker, the one running then.
func (rs reconcileStarts) latestAt(t time.Time) (Reconcile, bool) {
	i, _ := slices.BinarySearchFunc(rs, t, func(r Reconcile, t time.Time) int {
		if r.At.After(t) {
			return 1
		}
		return -1
	})
	if i == 0 {
		return Reconcile{}, false
	}
	return rs[i-1], true
}

// runningAt names the reconcile running at t (its controller and key), ""
// when none is known.
func (rs reconcileStarts) runningAt(t time.Time) string {
	if r, ok := rs.latestAt(t); ok {
		return r.Controller + "\x00" + r.Key
	}
	return ""
}

// startedIn reports whether the reconcile named key started again in
// (from, to].
func (rs reconcileStarts) startedIn(key string, from, to time.Time) bool {
	if key == "" {
		return false
	}
	i, _ := slices.BinarySearchFunc(rs, from, func(r Reconcile, from time.Time) int {
		if r.At.After(from) {
			return 1
		}
		return -1
	})
	for ; i < len(rs) && !rs[i].At.After(to); i++ {
		if rs[i].Controller+"\x00"+rs[i].Key == key {
			return true
		}
	}
	return false
}

// anyIn reports whether one of times, sorted, is in (from, to].
func anyIn(times []time.Time, from, to time.Time) bool {
	i, _ := slices.BinarySearchFunc(times, from, func(t, from time.Time) int {
		if t.After(from) {
			return 1
		}
		return -1
	})
	return i < len(times) && !times[i].After(to)
}

// waitedBetween is waitedIn over the gaps between bursts: from the last
// try of one to the first of the next.
func waitedBetween(bursts []burst) time.Duration {
	if len(bursts) < 2 {
		return 0
	}
	gaps := make([]time.Duration, 0, len(bursts)-1)
	for i := 1; i < len(bursts); i++ {
		gaps = append(gaps, bursts[i].first.Sub(bursts[i-1].last))
	}
	return waitedOver(gaps)
}

// attemptTimeMax is the most an attempt's own time is taken to be: a
// retry took 30-60 ms under the whole make test with -race on 2 cores. A
// longer gap is a wait, even when every gap is as long: a controller that
// honours the server's Retry-After of 1 s retries once a second, and the
// exponential budget holds that to a dozen attempts, as before.
const attemptTimeMax = 100 * time.Millisecond

// absorbed is how many delays of an exponential back-off from base fit in
// an attempt's own time, own: a work queue's delay that elapses while the
// next attempt runs (one that news started) is spent, and the attempt
// after it comes at once, with no wait. A correct controller-runtime
// controller whose reconcile takes 45 ms (a RetryOnConflict burst) made
// five attempts back to back with a status write refused while a scale
// down sent news: its delays of 5, 10, 20 and 40 ms each ran out during
// the attempt after.
func absorbed(base, own time.Duration) int {
	if own < base {
		return 0
	}
	return int(math.Floor(math.Log2(float64(own)/float64(base)))) + 1
}

// ownTime is an attempt's own time (a burst's, for a request's retries):
// the shortest gap between the starts of two attempts, at most
// attemptTimeMax.
func ownTime(starts []time.Time) time.Duration {
	own := attemptTimeMax
	for i := 1; i < len(starts); i++ {
		own = min(own, starts[i].Sub(starts[i-1]))
	}
	return own
}

// budget is how many attempts an exponential back-off from base, doubling,
// makes in span, plus the slack: attempts at 0, b, 3b, 7b, ... (2^n - 1)b.
func budget(base time.Duration, slack int, span time.Duration) int {
	return int(math.Floor(math.Log2(float64(span)/float64(base)+1))) + 1 + slack
}

type target struct {
	what     string
	attempts []attempt
	// mustRecover is set for reconciles: a request that failed may rightly
	// never be made again once the desired state moved on (the pod to
	// delete is wanted again, the one to create is not), but the
	// reconcile of an object must come back.
	mustRecover bool
	// recoversLate: the work queue owes the retry later than RecoverWithin
	// (queueRetries): the recovery is owed no sooner.
	recoversLate bool
	// replacements: the attempts are replacements of failing pods, which
	// have no cap (a pod may fail again any time later).
	replacements bool
}

// attemptsByTarget gathers the controller's attempts: its reconciles by
// key, and its API requests by verb and object. Targets are named without
// namespace, which differs from case to case.
func attemptsByTarget(tr *Trace) []target {
	index := map[string]int{}
	var out []target
	// Messages name a generated object without its random suffix.
	generated := map[string]string{}
	for _, w := range tr.Writes {
		if w.GenerateName != "" {
			generated[w.Name] = w.Object()
		}
	}
	var pods map[string]*unstructured.Unstructured // each pod's last observed version
	lastPods := func() map[string]*unstructured.Unstructured {
		if pods == nil {
			pods = map[string]*unstructured.Unstructured{}
			for _, st := range tr.States {
				for _, o := range st.Objects {
					if o.GetKind() == "Pod" {
						pods[o.GetName()] = o
					}
				}
			}
		}
		return pods
	}
	add := func(key, what string, a attempt, mustRecover bool) int {
		i, ok := index[key]
		if !ok {
			i = len(out)
			index[key] = i
			out = append(out, target{what: what, mustRecover: mustRecover})
		}
		out[i].attempts = append(out[i].attempts, a)
		return i
	}
	for _, r := range tr.Reconciles {
		add(reconcileTarget(r.Key), reconcileTarget(r.Key), attempt{at: r.At, failed: r.failed(), news: r.News}, true)
	}
	reconciles := reconcileStartsOf(tr.Reconciles)
	// The reconcile each request target was last tried in: a reconcile
	// that answered news ends a streak at its first try of the target,
	// not at each of a retry helper's tries in it.
	triedIn := map[string]time.Time{}
	for _, r := range tr.Requests {
		if r.User != tr.Controller || tr.Controller == "" {
			continue
		}
		obj := r.ResourcePath()
		shown := obj
		if r.Name != "" {
			obj += " " + r.Name
			shown += " " + cmp.Or(generated[r.Name], r.Name)
		}
		failed := r.refused()
		news := false
		if rec, ok := reconciles.latestAt(r.At); ok {
			last, tried := triedIn[r.Verb+" "+obj]
			news = rec.News && !(tried && last.Equal(rec.At))
			triedIn[r.Verb+" "+obj] = rec.At
		}
		add(r.Verb+" "+obj, r.Verb+" "+shown, attempt{at: r.At, failed: failed, conflict: r.Code == 409, news: news}, false)
		if owner := replacedFailingPod(tr, r, lastPods); owner != "" {
			out[add("replacement of the failing pods of "+owner, "replacement of the failing pods of "+owner, attempt{at: r.At, failed: true}, false)].replacements = true
		}
	}
	return out
}

// replacedFailingPod names the owner of the pod a request deleted, when
// the pod was failing: a container of it had crashed, or it had failed.
// The pod's last observed version says so: the recorder may see the crash
// after the controller did, but before the pod is gone.
func replacedFailingPod(tr *Trace, r Request, lastPods func() map[string]*unstructured.Unstructured) string {
	if r.Verb != "delete" || r.Resource != "pods" || r.Subresource != "" || r.Code >= 300 {
		return ""
	}
	u := lastPods()[r.Name]
	if u == nil {
		return ""
	}
	pod, err := As[corev1.Pod](u)
	if err != nil {
		return ""
	}
	owner := metav1.GetControllerOf(pod)
	if owner == nil {
		return ""
	}
	failing := pod.Status.Phase == corev1.PodFailed
	for _, c := range pod.Status.ContainerStatuses {
		failing = failing || c.RestartCount > 0 || c.LastTerminationState.Terminated != nil && c.LastTerminationState.Terminated.ExitCode != 0
	}
	if !failing {
		return ""
	}
	return owner.Kind + " " + owner.Name
}

// reconcileTarget names the reconciles of a key as a target: bounded-
// backoff's and the work queue's owed retries (queueRetries) by the same
// name, which is how the first finds the second's.
func reconcileTarget(key string) string { return "reconcile of " + nameOf(key) }

// nameOf drops the namespace from a namespace/name key.
func nameOf(key string) string {
	if _, name, ok := strings.Cut(key, "/"); ok {
		return name
	}
	return key
}
