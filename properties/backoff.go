package properties

import (
	"fmt"
	"math"
	"strings"
	"time"
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
	// may make, for jitter and coincident events. Zero means 3.
	Slack int
	// RecoverWithin is how soon after the faults heal an object whose
	// retries were failing must be tried again. Zero means 30 s, or Cap
	// if that is shorter.
	RecoverWithin time.Duration
}

// BoundedBackoff holds when the controller backs off while it fails: in a
// streak of failed attempts at one object (reconciles that return an error
// or ask for a requeue, or API requests refused), it makes no more attempts
// than an exponential back-off from Base allows, it never waits longer
// than Cap, and once the faults heal an object that was failing is tried
// again within RecoverWithin.
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
	return boundedBackoff{opts: opts}
}

type boundedBackoff struct{ opts BackoffOptions }

func (boundedBackoff) Name() string             { return "bounded-backoff" }
func (p boundedBackoff) Horizon() time.Duration { return p.opts.RecoverWithin }

// attempt is one try at one target; what names the target in messages.
type attempt struct {
	at     time.Time
	failed bool
}

func (p boundedBackoff) Check(tr *Trace) Verdict {
	open := 0
	for _, target := range attemptsByTarget(tr) {
		if v, bad := p.checkTarget(tr, target.what, target.attempts); bad {
			return v
		}
		if n := len(target.attempts); n > 0 && target.attempts[n-1].failed {
			open++
		}
	}
	// Healed, with every target's last attempt a success: nothing is
	// left to back off from.
	if tr.Final || (!tr.Healed.IsZero() && (open == 0 || tr.End.Sub(tr.Healed) > p.opts.RecoverWithin)) {
		return pass("every failing streak backed off")
	}
	return pending("%d targets still failing", open)
}

func (p boundedBackoff) checkTarget(tr *Trace, what string, attempts []attempt) (Verdict, bool) {
	var streak []attempt
	judge := func() (Verdict, bool) {
		if len(streak) < 2 {
			return Verdict{}, false
		}
		span := streak[len(streak)-1].at.Sub(streak[0].at)
		if budget := p.budget(span); len(streak) > budget {
			return fail(fmt.Errorf("bounded-backoff: %s retried without backing off", what),
				"%d failed attempts in %v; an exponential back-off from %v allows %d", len(streak), span, p.opts.Base, budget), true
		}
		for i := 1; i < len(streak); i++ {
			if gap := streak[i].at.Sub(streak[i-1].at); gap > p.opts.Cap+p.opts.Cap/10 {
				return fail(fmt.Errorf("bounded-backoff: %s waited longer than the %v cap between retries", what, p.opts.Cap),
					"waited %v", gap), true
			}
		}
		return Verdict{}, false
	}
	for _, a := range attempts {
		if !a.failed {
			if v, bad := judge(); bad {
				return v, true
			}
			streak = streak[:0]
			continue
		}
		streak = append(streak, a)
	}
	if v, bad := judge(); bad {
		return v, true
	}
	// A streak still failing at the heal must be retried soon after.
	if len(streak) > 0 && !tr.Healed.IsZero() && !streak[len(streak)-1].at.After(tr.Healed) {
		if tr.End.Sub(tr.Healed) > p.opts.RecoverWithin || tr.Final {
			return fail(fmt.Errorf("bounded-backoff: %s was not tried again within %v after the faults healed", what, p.opts.RecoverWithin),
				"last failed attempt %v before the heal", tr.Healed.Sub(streak[len(streak)-1].at)), true
		}
	}
	return Verdict{}, false
}

// budget is how many attempts an exponential back-off from Base, doubling,
// makes in span, plus the slack: attempts at 0, b, 3b, 7b, ... (2^n - 1)b.
func (p boundedBackoff) budget(span time.Duration) int {
	return int(math.Floor(math.Log2(float64(span)/float64(p.opts.Base)+1))) + 1 + p.opts.Slack
}

type target struct {
	what     string
	attempts []attempt
}

// attemptsByTarget gathers the controller's attempts: its reconciles by
// key, and its API requests by verb and object. Targets are named without
// namespace, which differs from case to case.
func attemptsByTarget(tr *Trace) []target {
	index := map[string]int{}
	var out []target
	add := func(what string, a attempt) {
		i, ok := index[what]
		if !ok {
			i = len(out)
			index[what] = i
			out = append(out, target{what: what})
		}
		out[i].attempts = append(out[i].attempts, a)
	}
	for _, r := range tr.Reconciles {
		add("reconcile of "+nameOf(r.Key), attempt{at: r.At, failed: r.Err != "" || (r.Requeue && r.RequeueAfter == 0)})
	}
	for _, r := range tr.Requests {
		if r.User != tr.Controller || tr.Controller == "" {
			continue
		}
		obj := r.Resource
		if r.Subresource != "" {
			obj += "/" + r.Subresource
		}
		if r.Name != "" {
			obj += " " + r.Name
		}
		add(r.Verb+" "+obj, attempt{at: r.At, failed: r.Code >= 400})
	}
	return out
}

// nameOf drops the namespace from a namespace/name key.
func nameOf(key string) string {
	if _, name, ok := strings.Cut(key, "/"); ok {
		return name
	}
	return key
}
