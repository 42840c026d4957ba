package faults

import (
	"cmp"
	"slices"
	"strings"

	"pgregory.net/rapid"
)

// Aimer is a Fault that can aim its steps at what the controller does: at
// each of its writes (Config.Writes), at its view of the cluster, at a
// field it holds. Each aim is a place where the fault matters; a plan
// aimed at it puts the step right before a user change that makes the
// controller act there. Uniform draws over fault kinds and values reach
// such places rarely: a crash aimed at "the k-th write of anything", or a
// conflict window that misses the status write it must refuse.
type Aimer interface {
	Fault
	// Aims are a generator per aim, the step drawn at it; none when the
	// fault has nothing to aim at in c (no writes known).
	Aims(c Config) []*rapid.Generator[Step]
}

// LooksBack is a step whose effect is on the step before it: a restart
// whose view is into that step (ControllerRestartStep's Into).
type LooksBack interface {
	Step
	LooksBack() bool
}

// Lasting is a step that holds its place in a plan for long, whatever the
// controller does: a node loss until its pods' eviction (about 20 s on
// the hollow cluster). What comes after it in the plan comes that much
// later. A conflicting writer is not one: its rounds last as long as the
// controller fights back (7 s against one that does, under a second
// against one that does not), which is what it tests.
type Lasting interface {
	Step
	Lasts() bool
}

// Lasts reports whether s is a Lasting step that lasts.
func Lasts(s Step) bool {
	l, ok := s.(Lasting)
	return ok && l.Lasts()
}

// Refusing is a step that refuses the controller's writes until it has
// refused so many (an APIErrors step with Requests): against a controller
// that backs off, 30 refused requests last to the heal, and whatever comes
// after it in a plan meets refused writes (a fight the controller cannot
// answer, a crash after a write that never goes through). A window of time
// is not one: it ends within seconds.
type Refusing interface {
	Step
	RefusesToTheEnd() bool
}

// RefusesToTheEnd reports whether s is a Refusing step that refuses to
// the end.
func RefusesToTheEnd(s Step) bool {
	r, ok := s.(Refusing)
	return ok && r.RefusesToTheEnd()
}

// ActsOnNext is a step whose effect is on the user change right after
// it: a crash after the first write of any kind falls in the reconcile
// that change provokes, right after its first write.
type ActsOnNext interface {
	Step
	ActsOnNext() bool
}

// AimedPlans are a plan generator per aim of the faults in fs that are
// Aimers: the aimed step, then one of the user changes of fs (drawn as they
// draw them, at the edges of their values one time in two; for a step aimed
// at a write, one of those that provoked it in the probe, Config.Provoked,
// when known, as the probe made it: see ProbeChanges), and, but for a step
// aimed at a write or writes not known, one time in two a user change
// before it too (a stale view or a restart that lands in what a change
// left: a re-created object's old children still going). A step that is not
// Armed acts by itself, and a change after it may undo what it left (a
// Recreate after a node loss replaces the pods the loss left terminating):
// its change after is drawn one time in two. An aim whose steps look back
// (LooksBack) has a plan per user change instead, that change right before
// it; an aim whose step acts on the next change (ActsOnNext), a plan per
// user change right after it. An aim that is a user change itself (a burst)
// ends its plan: a change after it would make the controller look again,
// and undo what the burst left. A plan of an aim with no user change among
// fs is the step alone. Within maxSteps. None when no fault of fs aims
// anywhere.
func AimedPlans(fs []Fault, c Config, maxSteps int) []*rapid.Generator[[]Step] {
	var changes []*rapid.Generator[Step]
	for _, f := range fs {
		if g := f.Steps(c); IsUserChange(g.Example(0)) {
			changes = append(changes, g)
		}
	}
	// The probe's changes, each as it made it: the write it provoked
	// there is the one such a change makes (a fresh draw may not: a
	// storage size no larger than the fixture's grows no claim).
	probeChanges := map[string]*rapid.Generator[Step]{}
	for _, st := range ProbeChanges(fs, c) {
		probeChanges[st.Fault()] = rapid.Just(st)
	}
	var out []*rapid.Generator[[]Step]
	for _, f := range fs {
		a, ok := f.(Aimer)
		if !ok {
			continue
		}
		for _, aim := range a.Aims(c) {
			example := aim.Example(0)
			if lb, ok := example.(LooksBack); ok && lb.LooksBack() && len(changes) > 0 && maxSteps >= 2 {
				for _, before := range changes {
					out = append(out, intoPlan(before, aim, changes, maxSteps))
				}
				continue
			}
			if on, ok := example.(ActsOnNext); ok && on.ActsOnNext() && len(changes) > 0 && maxSteps >= 2 {
				for _, after := range changes {
					out = append(out, aimedPlan(aim, nil, []*rapid.Generator[Step]{after}, false, false, maxSteps))
				}
				continue
			}
			before := changes
			if _, ok := example.(AimedAtWrite); ok {
				// The write as the probe saw it provoked: a change before
				// moves the start elsewhere (a scale to zero leaves no
				// member to grow), and its step is better spent on a
				// second aim in the same plan.
				before = nil
			}
			after := provoking(aim, c, probeChanges, changes)
			if IsUserChange(example) {
				after = nil
			}
			_, armed := example.(Armed)
			// A search's first plans, drawn before its probe (writes not
			// known), set how soon a first failure comes: a change before
			// the aim holds it back a settle (the suite's stale-cache bug
			// fails 1.4 s in with its pods' watch late right after the
			// setup, 5.1 s in with a Recreate before). The aims drawn once
			// the writes are known keep it.
			out = append(out, aimedPlan(aim, before, after, !armed, !c.WritesKnown, maxSteps))
		}
	}
	return out
}

// aimedPlan is the aimed step, a user change of after (one time in two
// when mayEnd), and one time in two a user change of before ahead of
// them, but when noBefore. The change before is drawn then too, and left
// out: the aim's steps are drawn as when it is there, so that the same aim
// drawn before and after a probe is the same but for it (AimedSteps).
func aimedPlan(aim *rapid.Generator[Step], before, after []*rapid.Generator[Step], mayEnd, noBefore bool, maxSteps int) *rapid.Generator[[]Step] {
	return rapid.Custom(func(t *rapid.T) []Step {
		var plan []Step
		if len(before) > 0 && maxSteps >= 3 && rapid.Bool().Draw(t, "change before") {
			if change := rapid.OneOf(before...).Draw(t, "before"); !noBefore {
				plan = append(plan, change)
			}
		}
		plan = append(plan, aim.Draw(t, "aimed"))
		if len(after) > 0 && maxSteps >= 2 && (!mayEnd || rapid.Bool().Draw(t, "change after")) {
			plan = append(plan, rapid.OneOf(after...).Draw(t, "change"))
		}
		return plan
	})
}

// AimedSteps is an aimed plan's steps but a user change drawn before its
// aimed step (AimedPlans draws none while the writes are not known): what
// names the aim, whichever way it was drawn. A change that a step looks
// back into (LooksBack) is part of the aim.
func AimedSteps(plan []Step) []Step {
	if len(plan) < 2 || !IsUserChange(plan[0]) {
		return plan
	}
	if lb, ok := plan[1].(LooksBack); ok && lb.LooksBack() {
		return plan
	}
	return plan[1:]
}

// AimedAtWrite is a step aimed at one write of the controller's.
type AimedAtWrite interface {
	Step
	AimedWrite() WriteMatch
}

// provoking are the user changes that made the controller make the write
// an aim's steps are aimed at in the probe (Config.Provoked), as the probe
// made them (probeChanges, by fault name), or all of changes when none is
// known.
func provoking(aim *rapid.Generator[Step], c Config, probeChanges map[string]*rapid.Generator[Step], changes []*rapid.Generator[Step]) []*rapid.Generator[Step] {
	a, ok := aim.Example(0).(AimedAtWrite)
	if !ok {
		return changes
	}
	var out []*rapid.Generator[Step]
	for _, name := range c.Provoked[a.AimedWrite()] {
		if g := probeChanges[name]; g != nil {
			out = append(out, g)
		}
	}
	if len(out) == 0 {
		return changes
	}
	return out
}

// ProbeChanges are the user changes a search's probe makes, in order: of
// each fault of fs that draws user changes (but bursts), its first
// example, so that every probe makes the same ones. Only the shape of the
// case counts (c's nodes, fixtures and objects), not what a probe saw.
func ProbeChanges(fs []Fault, c Config) []Step {
	c = Config{Nodes: c.Nodes, Fixtures: c.Fixtures, Objects: c.Objects}
	var out []Step
	for _, f := range fs {
		st := f.Steps(c).Example(1)
		if _, burst := st.(BurstStep); IsUserChange(st) && !burst {
			out = append(out, st)
		}
	}
	return out
}

// intoPlan is a user change, the aimed step that looks back into it, and
// a user change after.
func intoPlan(before, aim *rapid.Generator[Step], changes []*rapid.Generator[Step], maxSteps int) *rapid.Generator[[]Step] {
	return rapid.Custom(func(t *rapid.T) []Step {
		plan := []Step{before.Draw(t, "before"), aim.Draw(t, "aimed")}
		if maxSteps >= 3 {
			plan = append(plan, rapid.OneOf(changes...).Draw(t, "change"))
		}
		return plan
	})
}

// SortWrites sorts writes and drops repeats: a Config's writes in a fixed
// order, whatever order a run made them in.
func SortWrites(writes []WriteMatch) []WriteMatch {
	out := slices.Clone(writes)
	slices.SortFunc(out, func(a, b WriteMatch) int {
		return cmp.Or(strings.Compare(a.Resource, b.Resource), strings.Compare(a.Verb, b.Verb))
	})
	return slices.Compact(out)
}

// createsAnything is whether the controller creates anything: its writes
// hold a create, or they are not known.
func (c Config) createsAnything() bool {
	return !c.WritesKnown || slices.ContainsFunc(c.Writes, func(w WriteMatch) bool { return w.Verb == "create" })
}

// makesPods is whether the controller creates pods, or its writes are
// not known.
func (c Config) makesPods() bool {
	return !c.WritesKnown || slices.Contains(c.Writes, WriteMatch{Verb: "create", Resource: "pods"})
}

// aimedWrites are the writes aims at writes land on: each of the
// controller's, or, not known, one match of every write.
func (c Config) aimedWrites() []WriteMatch {
	if !c.WritesKnown {
		return []WriteMatch{{}}
	}
	return c.Writes
}
