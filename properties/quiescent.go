package properties

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// QuiesceOptions configures Quiescent. Zero values take the defaults.
type QuiesceOptions struct {
	// Window is how long the objects must see no writes. Zero means 5 s.
	Window time.Duration
	// Within is how long after the faults heal the writes may go on
	// before the quiet window starts. Zero means 30 s.
	Within time.Duration
	// IgnoreManagers are field managers whose writes do not count.
	IgnoreManagers []string
}

// Quiescent holds when, after the faults heal, the writes to the observed
// objects stop: a quiet window comes within the deadline. It catches status
// churn (a timestamp written on every reconcile) and fights with API
// defaulting (a field rewritten forever).
func Quiescent(opts QuiesceOptions) Property {
	if opts.Window == 0 {
		opts.Window = 5 * time.Second
	}
	if opts.Within == 0 {
		opts.Within = 30 * time.Second
	}
	return quiescent{opts: opts}
}

type quiescent struct{ opts QuiesceOptions }

func (quiescent) Name() string             { return "quiescent" }
func (p quiescent) Horizon() time.Duration { return p.opts.Within + p.opts.Window }

func (p quiescent) Check(tr *Trace) Verdict {
	if tr.Healed.IsZero() {
		return pending("faults not healed yet")
	}
	var after []Write
	quietSince := tr.Healed
	for _, w := range tr.Writes {
		if w.At.After(tr.Healed) && !slices.Contains(p.opts.IgnoreManagers, w.Manager) {
			after = append(after, w)
			if w.At.After(quietSince) {
				quietSince = w.At
			}
		}
	}
	if quiet := tr.End.Sub(quietSince); quiet >= p.opts.Window {
		return pass("quiet for %v, from %v after the heal, after %d writes", quiet, quietSince.Sub(tr.Healed), len(after))
	}
	if tr.Final || tr.End.Sub(tr.Healed) > p.opts.Within+p.opts.Window {
		f := mostWritten(after)
		return fail(fmt.Errorf("quiescent: writes went on after the faults healed: %s %s field %s by %v", f.kind, f.name, f.field, f.managers),
			"%d writes after the heal; %s written %d times", len(after), f.field, f.count).with(writesAfter(tr.Healed, quietSince, after))
	}
	return pending("%d writes after the heal so far", len(after))
}

// writesAfter marks the writes after the heal and spans the time they
// went on.
func writesAfter(healed, last time.Time, writes []Write) Evidence {
	e := Evidence{Spans: []Span{{From: healed, To: last, Label: fmt.Sprintf("%d writes over %v after the heal", len(writes), Round(last.Sub(healed)))}}}
	for _, w := range writes {
		e.Marks = append(e.Marks, Mark{At: w.At, Label: fmt.Sprintf("%s writes %s %s %s", w.Manager, w.Kind, w.Object(), w.Field)})
	}
	return e
}

type fieldWrites struct {
	kind, name, field string
	managers          []string
	count             int
}

// mostWritten returns the field written most often, ties broken by name,
// with its managers sorted.
func mostWritten(writes []Write) fieldWrites {
	by := map[string]*fieldWrites{}
	var fields []*fieldWrites
	for _, w := range writes {
		key := w.Kind + "/" + w.Object() + "/" + w.Field
		f := by[key]
		if f == nil {
			f = &fieldWrites{kind: w.Kind, name: w.Object(), field: w.Field}
			by[key] = f
			fields = append(fields, f)
		}
		f.count++
		if !slices.Contains(f.managers, w.Manager) {
			f.managers = append(f.managers, w.Manager)
		}
	}
	if len(fields) == 0 {
		return fieldWrites{}
	}
	slices.SortFunc(fields, func(a, b *fieldWrites) int {
		if a.count != b.count {
			return b.count - a.count
		}
		return strings.Compare(a.kind+"/"+a.name+"/"+a.field, b.kind+"/"+b.name+"/"+b.field)
	})
	slices.Sort(fields[0].managers)
	return *fields[0]
}
