package properties

import (
	"fmt"
	"slices"
	"time"
)

// FightOptions configures NoFightLoop. Zero values take the defaults.
type FightOptions struct {
	// Alternations is how many undriven changes of hands a field may see
	// within Window. Zero means 3.
	Alternations int
	// Window is the span the alternations are counted over. Zero means
	// 60 s.
	Window time.Duration
	// IgnoreManagers are field managers whose writes do not count.
	IgnoreManagers []string
}

// NoFightLoop holds when no field changes hands between field managers
// more than opts.Alternations times within opts.Window, counting only the
// changes that nothing drove and that the controller under test took part
// in: a change of hands is driven when a fault step or a user change
// happened since the field's previous write. So the node lifecycle
// controller and the kubelet taking turns on a node's Ready condition
// across NodeLoss and NodeRecover is the machinery at work, and cluster
// components taking turns among themselves are not the controller's
// fight, while a controller undoing a co-owner's every write is a fight.
// Fields are known by their object's identity: an object deleted and
// created again under its name (a StatefulSet re-created to change an
// immutable field, pods re-created after their owner) starts a history of
// its own.
func NoFightLoop(opts FightOptions) Property {
	if opts.Alternations == 0 {
		opts.Alternations = 3
	}
	if opts.Window == 0 {
		opts.Window = 60 * time.Second
	}
	return noFightLoop{opts: opts}
}

type noFightLoop struct{ opts FightOptions }

func (noFightLoop) Name() string           { return "no-fight-loop" }
func (noFightLoop) Horizon() time.Duration { return 0 }

func (p noFightLoop) Check(tr *Trace) Verdict {
	type field struct{ id, path string }
	controller := controllerManagers(tr)
	last := map[field]Write{}
	switches := map[field][]Write{} // the writes that took the field over, undriven
	var order []field
	for _, w := range tr.Writes {
		if slices.Contains(p.opts.IgnoreManagers, w.Manager) {
			continue
		}
		f := field{w.objectID(), w.Field}
		prev, seen := last[f]
		last[f] = w
		if !seen {
			order = append(order, f)
			continue
		}
		if prev.Manager == w.Manager || driven(tr.Events, prev.At, w.At) || !controller(prev.Manager) && !controller(w.Manager) {
			continue
		}
		s := append(switches[f], w)
		// Keep the switches within the window ending at this one.
		for len(s) > 0 && w.At.Sub(s[0].At) > p.opts.Window {
			s = s[1:]
		}
		switches[f] = s
		if len(s) > p.opts.Alternations {
			var managers []string
			for _, x := range s {
				if !slices.Contains(managers, x.Manager) {
					managers = append(managers, x.Manager)
				}
			}
			if !slices.Contains(managers, prev.Manager) {
				managers = append(managers, prev.Manager)
			}
			slices.Sort(managers)
			e := Evidence{Spans: []Span{{From: s[0].At, To: w.At, Label: fmt.Sprintf("%d changes of hands of %s with nothing driving them", len(s), f.path)}}}
			for _, x := range s {
				e.Marks = append(e.Marks, Mark{At: x.At, Label: fmt.Sprintf("%s takes %s", x.Manager, f.path)})
			}
			return fail(fmt.Errorf("no-fight-loop: %s %s field %s alternated between %v", w.Kind, w.Object(), f.path, managers),
				"%d undriven changes of hands within %v, the last %v after the start", len(s), p.opts.Window, w.At.Sub(tr.Start)).with(e)
		}
	}
	if tr.Final {
		return pass("no fight over %d fields", len(order))
	}
	return pending("no fight so far")
}

// controllerManagers tells the field managers the controller under test
// wrote as: those of its successful write requests in the audit log.
// Without a controller named (a trace built by hand), every manager may be
// it.
func controllerManagers(tr *Trace) func(manager string) bool {
	if tr.Controller == "" {
		return func(string) bool { return true }
	}
	managers := map[string]bool{}
	for _, r := range tr.Requests {
		if r.User == tr.Controller && r.FieldManager != "" && isWrite(r.Verb) && r.Code < 300 {
			managers[r.FieldManager] = true
		}
	}
	return func(m string) bool { return managers[m] }
}

// driven reports whether a fault or user change happened in (from, to].
func driven(events []Event, from, to time.Time) bool {
	for _, e := range events {
		if e.At.After(from) && !e.At.After(to) {
			return true
		}
	}
	return false
}
