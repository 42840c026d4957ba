package properties

import (
	"fmt"
	"strings"
	"time"
)

// NoPanics holds when the controller under test never panicked.
func NoPanics() Property { return noPanics{} }

type noPanics struct{}

func (noPanics) Name() string           { return "no-panics" }
func (noPanics) Horizon() time.Duration { return 0 }

func (noPanics) Check(tr *Trace) Verdict {
	if len(tr.Panics) > 0 {
		p := tr.Panics[0]
		first, _, _ := strings.Cut(p.Value, "\n")
		return fail(fmt.Errorf("no-panics: the controller panicked: %s", first), "%d panics; the first:\n%s", len(tr.Panics), p.Stack).with(panicsEvidence(tr.Panics))
	}
	if tr.Final {
		return pass("no panic")
	}
	return pending("no panic so far")
}

func panicsEvidence(panics []Panic) Evidence {
	var e Evidence
	for _, p := range panics {
		first, _, _ := strings.Cut(p.Value, "\n")
		e.Marks = append(e.Marks, Mark{At: p.At, Label: "panic: " + first})
	}
	return e
}
