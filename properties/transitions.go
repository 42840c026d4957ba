package properties

import (
	"fmt"
	"time"
)

// Transitions holds when check holds on every two states observed one
// after the other: a property of changes rather than of states, such as
// "a StatefulSet's replicas never drop while its owner asks for more" or
// "a child made for the current owner is never deleted while that owner
// lives". prev is the earlier state; check returns an error that says
// what changed wrongly, deterministically (no UIDs, versions or times).
func Transitions(name string, check func(prev, next State) error) Property {
	return transitions{name: name, check: check}
}

type transitions struct {
	name  string
	check func(prev, next State) error
}

func (p transitions) Name() string           { return p.name }
func (p transitions) Horizon() time.Duration { return 0 }

func (p transitions) Check(tr *Trace) Verdict {
	// The memo's held states are the ones whose change into them held.
	for i := max(tr.Memo.heldPrefix(p.name, tr.States), 1); i < len(tr.States); i++ {
		prev, next := tr.States[i-1], tr.States[i]
		if err := p.check(prev, next); err != nil {
			return fail(fmt.Errorf("%s: violated: %w", p.name, err), "from the state at %v to the one at %v after the start",
				prev.At.Sub(tr.Start), next.At.Sub(tr.Start)).with(Evidence{
				Marks: []Mark{{At: next.At, Label: "violated: " + err.Error()}},
				Spans: []Span{{From: prev.At, To: next.At, Label: "the change judged"}},
			})
		}
	}
	tr.Memo.remember(p.name, tr.States)
	if tr.Final {
		return pass("held on %d changes", max(len(tr.States)-1, 0))
	}
	return pending("held on %d changes so far", max(len(tr.States)-1, 0))
}
