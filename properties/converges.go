package properties

import (
	"fmt"
	"time"
)

// ConvergeOptions configures Converges. Zero values take the defaults.
type ConvergeOptions struct {
	// Within is the deadline after the faults heal. Zero means 30 s.
	Within time.Duration
	// Stable is how long the predicate must then keep holding. Zero
	// means 2 s.
	Stable time.Duration
	// Rest: a case whose predicate is false and that has been at rest
	// this long after the heal fails then, before Within: no write or
	// request since, no requeue or retry of the controller's due, no pod
	// starting, restarting or being deleted; nobody is left to act. Zero
	// means a third of Within, at least 10 s; negative waits out Within.
	Rest time.Duration
}

// Converges holds when, after the faults heal, pred becomes true within
// opts.Within and stays true for opts.Stable (eventually stable
// reconciliation). A case whose predicate is false once it has come to
// rest (opts.Rest) fails then.
func Converges(name string, pred Predicate, opts ConvergeOptions) Property {
	if opts.Within == 0 {
		opts.Within = 30 * time.Second
	}
	if opts.Stable == 0 {
		opts.Stable = 2 * time.Second
	}
	return converges{name: name, pred: pred, opts: opts}
}

type converges struct {
	name string
	pred Predicate
	opts ConvergeOptions
}

func (p converges) Name() string           { return p.name }
func (p converges) Horizon() time.Duration { return p.opts.Within + p.opts.Stable }
func (p converges) Goal() Predicate        { return p.pred }

func (p converges) Check(tr *Trace) Verdict {
	if tr.Healed.IsZero() {
		return pending("faults not healed yet")
	}
	first := max(tr.stateAt(tr.Healed), 0)
	if first >= len(tr.States) {
		return p.late(tr, fmt.Errorf("no state observed"), func() Evidence { return Evidence{} })
	}
	// The predicate must hold on a suffix of the states: find where it
	// starts, scanning back from the newest.
	since, lastFalse := tr.Healed, -1
	var why error
	for i := len(tr.States) - 1; i >= first; i-- {
		if err := p.pred(tr.States[i]); err != nil {
			if i == len(tr.States)-1 {
				return p.late(tr, err, func() Evidence { return p.falseRun(tr, first, i, err) })
			}
			since, lastFalse, why = tr.States[i+1].At, i, err
			break
		}
	}
	took := since.Sub(tr.Healed)
	if took > p.opts.Within {
		return fail(fmt.Errorf("%s: did not converge within %v after the faults healed", p.name, p.opts.Within),
			"converged %v after the heal", took).with(p.falseRun(tr, first, lastFalse, why))
	}
	if held := tr.End.Sub(since); held >= p.opts.Stable {
		return pass("true %v after the heal and since", took)
	} else if tr.Final {
		return fail(fmt.Errorf("%s: did not stay true for %v after converging", p.name, p.opts.Stable),
			"true since %v after the heal, for %v", took, held).with(Evidence{
			Marks: []Mark{{At: since, Label: "true from here"}},
			Spans: []Span{{From: since, To: tr.End, Label: fmt.Sprintf("true for %v only, when the case ended", Round(held))}},
		})
	}
	return pending("true since %v after the heal", took)
}

// falseRun is the evidence of the predicate false on the last-th state,
// from the first state of that run of false ones (not before the first
// state after the heal) to the state it holds on.
func (p converges) falseRun(tr *Trace, first, last int, why error) Evidence {
	start := last
	for start > first && p.pred(tr.States[start-1]) != nil {
		start--
	}
	e := falseFrom(tr, p.pred, start, why)
	if start == first && tr.States[start].At.Before(tr.Healed) {
		e.Marks[0].Label = "false at the heal: " + why.Error()
	}
	return e
}

// late judges a trace whose newest state violates the predicate.
// evidence is called only on a failure: the false run is found by
// judging states again.
func (p converges) late(tr *Trace, why error, evidence func() Evidence) Verdict {
	if v, owed := tr.notJudged(tr.Healed.Add(p.opts.Within), restFor(p.opts.Rest, p.opts.Within), "false: "+why.Error()); owed {
		return v
	}
	// One message whichever ends the wait: the same plan is reported
	// alike, run after run.
	if since, ok := tr.atRest(restFor(p.opts.Rest, p.opts.Within)); ok && !tr.Final {
		return fail(fmt.Errorf("%s: did not converge after the faults healed: %w", p.name, why),
			"still false, and at rest since %v after the heal, for %v: nobody was left to act", since.Sub(tr.Healed), tr.End.Sub(since)).with(evidence())
	}
	if tr.Final || tr.End.Sub(tr.Healed) > p.opts.Within {
		return fail(fmt.Errorf("%s: did not converge after the faults healed: %w", p.name, why),
			"still false %v after the heal, past the deadline of %v", tr.End.Sub(tr.Healed), p.opts.Within).with(evidence())
	}
	return pending("false %v after the heal: %v", tr.End.Sub(tr.Healed), why)
}
