package properties

import (
	"errors"
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

// Goal is a property that names the state the controller is to bring
// the system to (Converges's predicate). Before a case's first step the
// harness waits, within Spec.Setup, until every goal holds: the steps
// start from a system at rest, not in the tail of the controller's
// first reconciles, where a crash "after the k-th write" or a stale watch
// would land on a write that only load put there.
type Goal interface {
	Property
	Goal() Predicate
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
	// NotJudged marks a pass for want of a judgement: what the property
	// needed to see lies past its deadline (a retry the controller's work
	// queue owes, 1000 s on). Detail says why.
	NotJudged bool
	// Evidence is what a failure rests on, for the timeline page.
	Evidence Evidence
}

// Evidence is what a failure rests on, in the trace's times: the timeline
// page draws it over the case.
type Evidence struct {
	// Marks are the moments the failure counts: a streak's attempts, a
	// fight's changes of hands, the writes after the heal, the state where
	// a predicate went false.
	Marks []Mark
	// Spans are the stretches it judges: the waits between a streak's
	// attempts, how long a predicate stayed false, the writes going on
	// after the heal.
	Spans []Span
}

// Mark is one moment of evidence; Label says what happened then.
type Mark struct {
	At    time.Time
	Label string
}

// Span is one stretch of evidence; Label says what it was.
type Span struct {
	From, To time.Time
	Label    string
}

func (v Verdict) with(e Evidence) Verdict {
	v.Evidence = e
	return v
}

func pass(detail string, args ...any) Verdict {
	return Verdict{Done: true, Detail: fmt.Sprintf(detail, rounded(args)...)}
}

func pending(detail string, args ...any) Verdict {
	return Verdict{Detail: fmt.Sprintf(detail, rounded(args)...)}
}

func fail(err error, detail string, args ...any) Verdict {
	return Verdict{Done: true, Err: err, Detail: fmt.Sprintf(detail, rounded(args)...)}
}

// rounded rounds the durations among a detail's arguments (see Round):
// 2.7s reads better than 2.711663s, and the digits dropped are noise.
func rounded(args []any) []any {
	for i, a := range args {
		if d, ok := a.(time.Duration); ok {
			args[i] = Round(d)
		}
	}
	return args
}

// Round rounds a duration for people to read: to the millisecond below a
// second, to the tenth of a second above.
func Round(d time.Duration) time.Duration {
	if d < time.Second && d > -time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
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
		v := fail(fmt.Errorf("%s: %w", p.name, err), "")
		if e := (evidenced{}); errors.As(err, &e) {
			v.Evidence = e.evidence
		}
		return v
	}
	return pass("")
}

// WithEvidence is err with what it rests on: a Func property's check
// returns it so that the timeline page shows where in the trace the
// failure is. The error's message is err's.
func WithEvidence(err error, e Evidence) error {
	return evidenced{err: err, evidence: e}
}

type evidenced struct {
	err      error
	evidence Evidence
}

func (e evidenced) Error() string { return e.err.Error() }
func (e evidenced) Unwrap() error { return e.err }
