package properties

import (
	"fmt"
	"time"
)

// Property is an invariant over a trace.
type Property interface {
	// Name identifies the property in messages and reports.
	Name() string
	// Check judges the trace as recorded so far.
	Check(tr *Trace) Verdict
	// Horizon is how long after the faults heal the property may need the
	// trace to run before its verdict is final.
	Horizon() time.Duration
}

// Verdict is a property's judgement of a trace.
type Verdict struct {
	// Done is set when more trace cannot change the verdict.
	Done bool
	// Err is the failure, with a deterministic message; nil when the
	// property holds (or, when not Done, holds so far).
	Err error
	// Detail explains the verdict with times and counts, for the log.
	Detail string
}

func pass(detail string, args ...any) Verdict {
	return Verdict{Done: true, Detail: fmt.Sprintf(detail, args...)}
}

func pending(detail string, args ...any) Verdict {
	return Verdict{Detail: fmt.Sprintf(detail, args...)}
}

func fail(err error, detail string, args ...any) Verdict {
	return Verdict{Done: true, Err: err, Detail: fmt.Sprintf(detail, args...)}
}

// Predicate judges one observed state: nil when it holds, else an error
// that says why not, deterministically (no UIDs, versions or times).
type Predicate func(State) error

// Func makes a property of the user's own from a check of the whole trace,
// made once when the case ends.
func Func(name string, check func(*Trace) error) Property {
	return funcProperty{name: name, check: check}
}

type funcProperty struct {
	name  string
	check func(*Trace) error
}

func (p funcProperty) Name() string           { return p.name }
func (p funcProperty) Horizon() time.Duration { return 0 }
func (p funcProperty) Check(tr *Trace) Verdict {
	if !tr.Final {
		return pending("checked when the case ends")
	}
	if err := p.check(tr); err != nil {
		return fail(fmt.Errorf("%s: %w", p.name, err), "")
	}
	return pass("")
}
