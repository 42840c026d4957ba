package properties

import (
	"fmt"
	"time"
)

// ConvergeOptions configures Converge. Zero values take the defaults.
type ConvergeOptions struct {
	// Within is the deadline after the faults heal. Zero means 30 s.
	Within time.Duration
	// Stable is how long the predicate must then keep holding. Zero
	// means 2 s.
	Stable time.Duration
}

// Converges is Converge with the default stability window: after the
// faults heal, pred becomes true within the deadline and stays true
// (eventually stable reconciliation).
func Converges(name string, pred Predicate, within time.Duration) Property {
	return Converge(name, pred, ConvergeOptions{Within: within})
}

// Converge holds when, after the faults heal, pred becomes true within
// opts.Within and stays true for opts.Stable.
func Converge(name string, pred Predicate, opts ConvergeOptions) Property {
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

func (p converges) Check(tr *Trace) Verdict {
	if tr.Healed.IsZero() {
		return pending("faults not healed yet")
	}
	first := max(tr.stateAt(tr.Healed), 0)
	if first >= len(tr.States) {
		return p.late(tr, fmt.Errorf("no state observed"))
	}
	// The predicate must hold on a suffix of the states: find where it
	// starts, scanning back from the newest.
	since := tr.Healed
	for i := len(tr.States) - 1; i >= first; i-- {
		if err := p.pred(tr.States[i]); err != nil {
			if i == len(tr.States)-1 {
				return p.late(tr, err)
			}
			since = tr.States[i+1].At
			break
		}
	}
	took := since.Sub(tr.Healed)
	if took > p.opts.Within {
		return fail(fmt.Errorf("%s: did not converge within %v after the faults healed", p.name, p.opts.Within),
			"converged %v after the heal", took)
	}
	if held := tr.End.Sub(since); held >= p.opts.Stable {
		return pass("true %v after the heal and since", took)
	} else if tr.Final {
		return fail(fmt.Errorf("%s: did not stay true for %v after converging", p.name, p.opts.Stable),
			"true since %v after the heal, for %v", took, held)
	}
	return pending("true since %v after the heal", took)
}

// late judges a trace whose newest state violates the predicate.
func (p converges) late(tr *Trace, why error) Verdict {
	if tr.Final || tr.End.Sub(tr.Healed) > p.opts.Within {
		return fail(fmt.Errorf("%s: did not converge within %v after the faults healed: %w", p.name, p.opts.Within, why),
			"still false %v after the heal", tr.End.Sub(tr.Healed))
	}
	return pending("false %v after the heal: %v", tr.End.Sub(tr.Healed), why)
}
