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
	for _, s := range tr.States[tr.Memo.heldPrefix(p.name, tr.States):] {
		if err := p.pred(s); err != nil {
			return fail(fmt.Errorf("%s: violated: %w", p.name, err), "at %v after the start", s.At.Sub(tr.Start))
		}
	}
	tr.Memo.remember(p.name, tr.States)
	if tr.Final {
		return pass("held on %d states", len(tr.States))
	}
	return pending("held on %d states so far", len(tr.States))
}
