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

// AimedPlans are a plan generator per aim of the faults in fs that are
// Aimers: the aimed step, then one of the user changes of fs (drawn as
// they draw them, at the edges of their values one time in two), and one
// time in two a user change before it too (a stale view or a restart that
// lands in what a change left: a re-created object's old children still
// going). A plan of an aim with no user change among fs is the step
// alone. Within maxSteps. None when no fault of fs aims anywhere.
func AimedPlans(fs []Fault, c Config, maxSteps int) []*rapid.Generator[[]Step] {
	var changes []*rapid.Generator[Step]
	for _, f := range fs {
		if g := f.Steps(c); IsUserChange(g.Example(0)) {
			changes = append(changes, g)
		}
	}
	var out []*rapid.Generator[[]Step]
	for _, f := range fs {
		a, ok := f.(Aimer)
		if !ok {
			continue
		}
		for _, aim := range a.Aims(c) {
			out = append(out, aimedPlan(aim, changes, maxSteps))
		}
	}
	return out
}

func aimedPlan(aim *rapid.Generator[Step], changes []*rapid.Generator[Step], maxSteps int) *rapid.Generator[[]Step] {
	return rapid.Custom(func(t *rapid.T) []Step {
		var plan []Step
		if len(changes) > 0 && maxSteps >= 3 && rapid.Bool().Draw(t, "change before") {
			plan = append(plan, rapid.OneOf(changes...).Draw(t, "before"))
		}
		plan = append(plan, aim.Draw(t, "aimed"))
		if len(changes) > 0 && maxSteps >= 2 {
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
