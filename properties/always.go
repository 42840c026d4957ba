package properties

import (
	"fmt"
	"time"
)

// Always holds when pred holds on every observed state: a safety property,
// such as never more pods than replicas plus surge.
func Always(name string, pred Predicate) Property {
	return always{name: name, pred: pred}
}

type always struct {
	name string
	pred Predicate
}

func (p always) Name() string           { return p.name }
func (p always) Horizon() time.Duration { return 0 }

func (p always) Check(tr *Trace) Verdict {
	for i := tr.Memo.heldPrefix(p.name, tr.States); i < len(tr.States); i++ {
		if err := p.pred(tr.States[i]); err != nil {
			return fail(fmt.Errorf("%s: violated: %w", p.name, err), "at %v after the start", tr.States[i].At.Sub(tr.Start)).
				with(falseFrom(tr, p.pred, i, err))
		}
	}
	tr.Memo.remember(p.name, tr.States)
	if tr.Final {
		return pass("held on %d states", len(tr.States))
	}
	return pending("held on %d states so far", len(tr.States))
}

// falseFrom is the evidence of a predicate false on the i-th state: that
// state, and how long the predicate stayed false from it (to the next
// state it holds on, or to the end of the trace).
func falseFrom(tr *Trace, pred Predicate, i int, why error) Evidence {
	from, to, still := tr.States[i].At, tr.End, " (still false at the end)"
	for j := i + 1; j < len(tr.States); j++ {
		if pred(tr.States[j]) == nil {
			to, still = tr.States[j].At, ""
			break
		}
	}
	if to.Before(from) {
		to = from
	}
	return Evidence{
		Marks: []Mark{{At: from, Label: "false: " + why.Error()}},
		Spans: []Span{{From: from, To: to, Label: fmt.Sprintf("false for %v%s", Round(to.Sub(from)), still)}},
	}
}
