package faults

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestAimedPlans: a plan per aim, each its aimed step right before a user
// change: a crash after each of the controller's writes; errors over each
// write, conflicts over its updates and patches, as hard as APIErrors
// goes; stale views (cut; late, of every watch and of each resource
// watched); a restart with a stale view, and one looking into
// each user change, that change right before it; a conflicting writer of
// as many rounds as it goes; when it creates, a node lost and a child
// deleted. With its writes known to be none, only the aims that need
// none; not known, every write aimed at; with no Aimer, none.
func TestAimedPlans(t *testing.T) {
	web := &unstructured.Unstructured{}
	web.SetUnstructuredContent(map[string]any{"apiVersion": "v1", "kind": "Widget",
		"metadata": map[string]any{"name": "web"}, "spec": map[string]any{"replicas": int64(3)}})
	writes := SortWrites([]WriteMatch{{Verb: "update", Resource: "podsets/status"}, {Verb: "create", Resource: "pods"}, {Verb: "create", Resource: "pods"}})
	require.Equal(t, []WriteMatch{{Verb: "create", Resource: "pods"}, {Verb: "update", Resource: "podsets/status"}}, writes)
	cfg := Config{Nodes: 3, Fixtures: 1, Objects: []client.Object{web}, Writes: writes, WritesKnown: true}
	fs := append(Default(), ConflictingWriter(ConflictOptions{}))

	gens := AimedPlans(fs, cfg, 5)
	// CrashLoop 1 (it makes pods), NodeLoss 1 and ChildDelete 1 (it
	// creates), ControllerRestart 1 + 3 (into each of ScaleChange, Burst,
	// Recreate), APIErrors 1+2, CrashAfterWrite 2, StaleWatch 2 (cut,
	// late), ConflictingWriter 1, Burst 1 (of ScaleChange).
	require.Len(t, gens, 16)
	aimed := map[string]int{}
	gaps := map[int]bool{}          // the aimed bursts' gaps drawn
	changeAfter := map[string]int{} // by fault
	for i, gen := range gens {
		for seed := range 50 {
			plan := gen.Example(seed)
			// A burst aimed ends its plan, a change before it one time in two.
			if b, ok := plan[len(plan)-1].(BurstStep); ok && len(plan) <= 2 && IsUserChange(plan[0]) {
				require.Len(t, b.Steps, 2, "aim %d: %s", i, FormatPlan(plan))
				require.Contains(t, aimedGapsMs, b.GapMs, "a burst's worth apart: %s", FormatPlan(plan))
				gaps[b.GapMs] = true
				require.IsType(t, ScaleChangeStep{}, b.Steps[0])
				aimed["Burst"]++
				continue
			}
			require.LessOrEqual(t, len(plan), 3, "aim %d: %s", i, FormatPlan(plan))
			step := plan[len(plan)-1]
			if IsUserChange(step) {
				step = plan[len(plan)-2]
				changeAfter[step.Fault()]++
			} else {
				_, armed := step.(Armed)
				require.False(t, armed, "aim %d: an armed step needs a change after it: %s", i, FormatPlan(plan))
			}
			require.False(t, IsUserChange(step), "aim %d: %s", i, FormatPlan(plan))
			if _, ok := step.(AimedAtWrite); ok {
				require.Len(t, plan, 2, "aimed at a write, no change before: %s", FormatPlan(plan))
			}
			switch s := step.(type) {
			case APIErrorsStep:
				require.Contains(t, writes, WriteMatch{Verb: s.Verb, Resource: s.Resource})
				require.True(t, s.ForMs == 500*maxHalfSeconds || s.Requests == maxRequests, "as hard as it goes: %s", Format(s))
				if s.Error == Conflict {
					require.Equal(t, "update", s.Verb, "a conflict answers updates and patches only")
				}
				aimed[s.Fault()+" "+s.Verb+" "+s.Resource+" conflict="+map[bool]string{true: "yes", false: "no"}[s.Error == Conflict]]++
			case CrashAfterWriteStep:
				require.Contains(t, writes, WriteMatch{Verb: s.Verb, Resource: s.Resource})
				require.True(t, s.Writes >= 1 && s.Writes <= 3, Format(s))
				aimed[s.Fault()+" "+s.Verb+" "+s.Resource]++
			case ConflictingWriterStep:
				require.Equal(t, 5, s.Rounds, "as many rounds as the fault goes: a fight shows past NoFightLoop's alternations")
				aimed[s.Fault()]++
			case CrashLoopStep:
				require.Equal(t, maxStarts, s.Starts, "as long as a crash loop goes")
				aimed[s.Fault()]++
			case StaleWatchStep:
				if !s.Drop {
					require.True(t, s.DelayMs >= 1000 && s.ForMs >= 3000, "late as long as the fault goes: %s", Format(s))
				}
				aimed[fmt.Sprintf("%s drop=%v %s", s.Fault(), s.Drop, s.Resource)]++
			case ControllerRestartStep:
				require.Positive(t, s.StaleMs+s.Into, "the restart aimed is the stale one")
				if s.Into == 0 {
					aimed[s.Fault()+" stale"]++
					break
				}
				require.Len(t, plan, 3, "into: %s", FormatPlan(plan))
				require.True(t, IsUserChange(plan[0]), "into a user change: %s", FormatPlan(plan))
				require.Contains(t, []int{25, 50}, s.Into, "into the change's first half")
				aimed[s.Fault()+" into "+plan[0].Fault()]++
			default:
				aimed[s.Fault()]++
			}
		}
	}
	require.Len(t, aimed, 16, "every aim: %v", aimed)
	require.Greater(t, len(gaps), len(aimedGapsMs)/2, "an aimed burst's gaps, over 50 draws: %v", gaps)
	for aim, n := range aimed {
		require.Equal(t, 50, n, aim)
	}
	// A step that acts by itself is followed by a change one time in two
	// (a Recreate after a node loss replaces what the loss left).
	for _, fault := range []string{"NodeLoss", "ChildDelete", "CrashLoop", "ConflictingWriter"} {
		require.True(t, changeAfter[fault] > 10 && changeAfter[fault] < 40, "%s followed by a change %d times in 50", fault, changeAfter[fault])
	}
	for _, fault := range []string{"APIErrors", "CrashAfterWrite", "StaleWatch"} {
		require.Positive(t, changeAfter[fault], fault)
		require.Zero(t, changeAfter[fault]%50, "%s: always followed by a change", fault)
	}

	// The status write followed a Recreate only: a plan aimed at it ends
	// in a Recreate; one aimed at the pods' creation, in any change.
	cfg.Provoked = map[WriteMatch][]string{{Verb: "update", Resource: "podsets/status"}: {"Recreate"}}
	after := map[string]map[string]bool{}
	for _, gen := range AimedPlans(fs, cfg, 5) {
		for seed := range 30 {
			plan := gen.Example(seed)
			if len(plan) < 2 {
				continue // the burst
			}
			if a, ok := plan[len(plan)-2].(AimedAtWrite); ok {
				w := a.AimedWrite().Resource
				if after[w] == nil {
					after[w] = map[string]bool{}
				}
				after[w][plan[len(plan)-1].Fault()] = true
			}
		}
	}
	require.Equal(t, map[string]bool{"Recreate": true}, after["podsets/status"])
	require.Greater(t, len(after["pods"]), 1, "no change known: any")

	// The change after a step aimed at a write is the one that provoked
	// it in the probe, as the probe made it, whatever the seed: a fresh
	// draw may provoke no such write (a scale to the fixture's size).
	cfg.Provoked = map[WriteMatch][]string{{Verb: "update", Resource: "podsets/status"}: {"ScaleChange"}}
	var probed Step
	for _, st := range ProbeChanges(fs, cfg) {
		if st.Fault() == "ScaleChange" {
			probed = st
		}
	}
	require.NotNil(t, probed)
	made := map[string]bool{}
	for _, gen := range AimedPlans(fs, cfg, 5) {
		for seed := range 30 {
			plan := gen.Example(seed)
			if a, ok := plan[0].(AimedAtWrite); ok && a.AimedWrite().Resource == "podsets/status" {
				require.Len(t, plan, 2, FormatPlan(plan))
				made[Format(plan[1])] = true
			}
		}
	}
	require.Equal(t, map[string]bool{Format(probed): true}, made)

	require.Len(t, AimedPlans(fs, Config{Nodes: 3, Fixtures: 1, WritesKnown: true}, 5), 8, "it writes nothing: the stale views, the restarts, the fight, the burst")
	require.Empty(t, AimedPlans([]Fault{ContainerKill(ContainerKillOptions{}), ScaleChange(ScaleOptions{})}, cfg, 5))
	require.Empty(t, AimedPlans([]Fault{NodeLoss(), ChildDelete(), ScaleChange(ScaleOptions{})}, Config{Nodes: 3, Fixtures: 1,
		Writes: []WriteMatch{{Verb: "update", Resource: "podsets/status"}}, WritesKnown: true}, 5), "it creates nothing: nothing to lose or delete")

	// Not known: errors answered to every write (a conflict, and one of
	// the others), a crash after the first write before each user change,
	// and the aims at what it may make, each aimed step first.
	unknown := AimedPlans(fs, Config{Nodes: 3, Fixtures: 1, Objects: []client.Object{web}}, 5)
	require.Len(t, unknown, 17, "the 8 that need no write, APIErrors 2, CrashAfterWrite 3 (before ScaleChange, Burst, Recreate), CrashLoop, NodeLoss, ChildDelete, the pods' watch late")
	atWrites := map[string]bool{}
	var crashedBefore []string
	for _, gen := range unknown {
		for seed := range 20 {
			plan := gen.Example(seed)
			// The first wave's aims come first: no change before them, but
			// the one a restart looks into (part of the aim: AimedSteps).
			require.Len(t, AimedSteps(plan), len(plan), "not known: no change before the aim: %s", FormatPlan(plan))
			if a, ok := plan[0].(AimedAtWrite); ok {
				require.Equal(t, WriteMatch{}, a.AimedWrite(), "every write: %s", FormatPlan(plan))
				require.Len(t, plan, 2, "then a user change: %s", FormatPlan(plan))
				switch s := plan[0].(type) {
				case APIErrorsStep:
					atWrites[s.Fault()+map[bool]string{true: " conflict", false: ""}[s.Error == Conflict]] = true
				case CrashAfterWriteStep:
					atWrites[fmt.Sprintf("%s after %d", s.Fault(), s.Writes)] = true
					if seed == 0 {
						crashedBefore = append(crashedBefore, plan[1].Fault())
					}
					require.Equal(t, crashedBefore[len(crashedBefore)-1], plan[1].Fault(), "an aim's change is the same in every draw")
				}
			}
		}
	}
	require.Equal(t, map[string]bool{"APIErrors": true, "APIErrors conflict": true, "CrashAfterWrite after 1": true}, atWrites)
	require.Equal(t, []string{"ScaleChange", "Burst", "Recreate"}, crashedBefore, "the first write after each change")
	// Of the resources it watched, each late while the others come on
	// time; one alone is every watch.
	lateOf := func(c Config) (out []string) {
		for _, gen := range AimedPlans([]Fault{StaleWatch()}, c, 5) {
			if s := gen.Example(0)[0].(StaleWatchStep); !s.Drop {
				out = append(out, s.Resource)
			}
		}
		return out
	}
	require.Equal(t, []string{"", "pods", "podsets"}, lateOf(Config{WritesKnown: true, Watched: []string{"pods", "podsets"}}))
	require.Equal(t, []string{""}, lateOf(Config{WritesKnown: true, Watched: []string{"podsets"}}))
	require.Equal(t, []string{"", "pods"}, lateOf(Config{}), "not known: the pods taken as watched")
	for seed := range 20 {
		plan := AimedPlans([]Fault{CrashAfterWrite()}, cfg, 5)[0].Example(seed)
		require.Len(t, plan, 1, "no user change: the aimed step alone")
	}
}

// TestLastingSteps: a node loss lasts until its eviction; a conflicting
// writer (as long as the controller fights back), an armed step and a user
// change do not.
func TestLastingSteps(t *testing.T) {
	for _, c := range []struct {
		step  Step
		lasts bool
	}{
		{NodeLossStep{Node: 1}, true},
		{ConflictingWriterStep{Field: "spec.replicas", Rounds: 5}, false},
		{ConflictingWriterStep{Field: "spec.replicas", Rounds: 1}, false},
		{APIErrorsStep{Error: Conflict, Requests: 30}, false},
		{ScaleChangeStep{Field: "spec.replicas", Value: 2}, false},
	} {
		require.Equal(t, c.lasts, Lasts(c.step), "%s", FormatPlan([]Step{c.step}))
	}
}

// TestAimedSteps: an aim is named by its steps but a change drawn before
// it; a change a restart looks into is part of the aim. An aim drawn
// before the writes are known (no change before) is named as the same
// aim drawn once they are.
func TestAimedSteps(t *testing.T) {
	scale := ScaleChangeStep{Field: "spec.replicas", Value: 2}
	late := StaleWatchStep{DelayMs: 1000, ForMs: 3000, Resource: "pods"}
	burst := BurstStep{Steps: []Step{scale, scale}, GapMs: 20}
	into := ControllerRestartStep{Into: 25}
	for _, c := range []struct{ plan, aim []Step }{
		{[]Step{scale, late, scale}, []Step{late, scale}},
		{[]Step{late, scale}, []Step{late, scale}},
		{[]Step{scale, burst}, []Step{burst}},
		{[]Step{burst}, []Step{burst}},
		{[]Step{scale, into, scale}, []Step{scale, into, scale}},
		{[]Step{CrashAfterWriteStep{Writes: 1}, scale}, []Step{CrashAfterWriteStep{Writes: 1}, scale}},
	} {
		require.Equal(t, FormatPlan(c.aim), FormatPlan(AimedSteps(c.plan)), FormatPlan(c.plan))
	}

	web := &unstructured.Unstructured{}
	web.SetUnstructuredContent(map[string]any{"apiVersion": "v1", "kind": "Widget",
		"metadata": map[string]any{"name": "web"}, "spec": map[string]any{"replicas": int64(3)}})
	fs := append(Default(), ConflictingWriter(ConflictOptions{}))
	names := func(c Config) map[string]bool {
		out := map[string]bool{}
		for _, gen := range AimedPlans(fs, c, 5) {
			for seed := range 10 {
				out[FormatPlan(AimedSteps(gen.Example(seed)))] = true
			}
		}
		return out
	}
	known := names(Config{Nodes: 3, Fixtures: 1, Objects: []client.Object{web}, WritesKnown: true, Watched: []string{"pods"}})
	unknown := names(Config{Nodes: 3, Fixtures: 1, Objects: []client.Object{web}})
	// Its writes known to be none: the aims that need no write, each draw
	// named as when the writes are not known (the restarts into a change
	// drawn alike, the others with their change before left out).
	require.Greater(t, len(known), 40)
	for name := range known {
		require.True(t, unknown[name], "named alike before and after the writes are known: %s", name)
	}
}
