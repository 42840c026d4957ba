package search

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"pgregory.net/rapid"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness/internal/lifecycle"
)

// TestAimsBeforeTheProbe: the first half of the aimed plans are drawn
// before the probe ends, aimed at every write and at what the controller
// may make; the rest, once it ended, at the writes it saw and at what the
// first half did not take. The same seed draws the same plans whatever
// Parallel is.
func TestAimsBeforeTheProbe(t *testing.T) {
	spec := lifecycle.WithDefaults(Spec{
		Fixtures: threeReplicas("Widget", "web"),
		Faults: []faults.Fault{faults.ScaleChange(faults.ScaleOptions{}), faults.Recreate(), faults.APIErrors(), faults.CrashAfterWrite(),
			faults.StaleWatch(), faults.ControllerRestart(), faults.CrashLoop(), faults.NodeLoss()},
	})
	writes := []faults.WriteMatch{{Verb: "create", Resource: "pods"}, {Verb: "update", Resource: "widgets/status"}}
	const checks = 20
	search := func(parallel int) [][]faults.Step {
		release := make(chan struct{})
		s := &searcher{spec: spec, opts: SearchOptions{Checks: checks, Seed: 7, Parallel: parallel}, runs: map[string]int{},
			probe: func(context.Context, *Env, Spec, []faults.Step) (probed, func(), error) {
				<-release
				return probed{known: true, writes: writes}, func() {}, nil
			}}
		ps := s.plans(context.Background())
		random := spec.Plans()
		for i, seed := range seeds(7, checks) {
			switch {
			case i%2 == 0:
				require.Equal(t, faults.FormatPlan(random.Example(seed)), faults.FormatPlan(ps.at(i)), "plan %d: rapid's draw", i)
			case i < checks/2:
				require.NotNil(t, ps.at(i), "plan %d: drawn before the probe ends", i)
			default:
				require.Nil(t, ps.at(i), "plan %d: drawn once the probe ended", i)
			}
		}
		close(release)
		<-ps.drawn
		s.wait()
		return ps.plans
	}
	plans := search(4)
	atWrites := func(plan []faults.Step) (out []faults.WriteMatch) {
		for _, st := range plan {
			if a, ok := st.(faults.AimedAtWrite); ok {
				out = append(out, a.AimedWrite())
			}
		}
		return out
	}
	var before, after []faults.WriteMatch
	for i := 1; i < checks; i += 2 {
		if i < checks/2 {
			before = append(before, atWrites(plans[i])...)
			continue
		}
		after = append(after, atWrites(plans[i])...)
		require.False(t, slices.ContainsFunc(plans[i], func(s faults.Step) bool { return s.Fault() == "NodeLoss" }),
			"plan %d: the node loss was taken before: %s", i, faults.FormatPlan(plans[i]))
	}
	// APIErrors: a conflict and another error; a crash after any write
	// (and one of them again: 9 aims for 10 places).
	require.GreaterOrEqual(t, len(before), 3)
	for _, w := range before {
		require.Equal(t, faults.WriteMatch{}, w, "aimed at every write before the probe")
	}
	require.NotEmpty(t, after)
	for _, w := range after {
		require.Contains(t, writes, w, "aimed at the writes the probe saw")
	}
	require.Equal(t, plans, search(1), "the same plans at Parallel 1")
}

// TestProbeACasePerChange: the probe is a case per user change of the
// spec, each from the fixtures, all at once when Parallel allows (one
// after another at Parallel 1); the aims see what they saw together, each
// write with the changes it followed. One probe that did not run to its
// end leaves nothing known.
func TestProbeACasePerChange(t *testing.T) {
	spec := lifecycle.WithDefaults(Spec{
		Fixtures: threeReplicas("Widget", "web"),
		Faults:   []faults.Fault{faults.ScaleChange(faults.ScaleOptions{}), faults.Recreate(), faults.APIErrors()},
	})
	pods := faults.WriteMatch{Verb: "create", Resource: "pods"}
	status := faults.WriteMatch{Verb: "update", Resource: "widgets/status"}
	for _, parallel := range []int{1, 4} {
		var mu sync.Mutex
		var made []string
		running, most := 0, 0
		bothStarted := make(chan struct{})
		s := &searcher{spec: spec, opts: SearchOptions{Parallel: parallel}, runs: map[string]int{},
			probe: func(_ context.Context, _ *Env, _ Spec, plan []faults.Step) (probed, func(), error) {
				mu.Lock()
				made = append(made, faults.FormatPlan(plan))
				running++
				most = max(most, running)
				if running == 2 {
					close(bothStarted)
				}
				mu.Unlock()
				if parallel > 1 {
					select { // the other starts beside it
					case <-bothStarted:
					case <-time.After(5 * time.Second):
					}
				}
				mu.Lock()
				running--
				mu.Unlock()
				w := pods
				if plan[0].Fault() == "Recreate" {
					w = status
				}
				return probed{known: true, writes: []faults.WriteMatch{w}, provoked: map[faults.WriteMatch][]string{w: {plan[0].Fault()}},
					watched: []string{"widgets"}}, func() {}, nil
			}}
		seen := make(chan probed, 1)
		s.runProbe(context.Background(), func(p probed) { seen <- p })
		var p probed
		select {
		case p = <-seen:
		case <-time.After(10 * time.Second):
			t.Fatalf("parallel %d: the probe never ended", parallel)
		}
		s.wait()
		changes := faults.ProbeChanges(spec.Faults, faults.Config{Nodes: spec.Nodes, Fixtures: 1, Objects: lifecycle.FixtureObjects(spec)})
		require.Len(t, changes, 2)
		require.ElementsMatch(t, []string{faults.FormatPlan(changes[:1]), faults.FormatPlan(changes[1:])}, made, "a case per change")
		require.Equal(t, map[faults.WriteMatch][]string{pods: {"ScaleChange"}, status: {"Recreate"}}, p.provoked)
		require.Equal(t, faults.SortWrites([]faults.WriteMatch{pods, status}), p.writes)
		require.Equal(t, []string{"widgets"}, p.watched)
		require.Equal(t, min(parallel, 2), most, "parallel %d: cases at once", parallel)
	}
	require.False(t, together([]probed{{known: true}, {}}).known)
}

// TestProbeFailureAnswered: a probe that fails leaves the search the
// aims that need no probe; a search whose plans then all pass answers the
// probe's failure, not a pass. A probe ended by the search is no failure.
func TestProbeFailureAnswered(t *testing.T) {
	spec := lifecycle.WithDefaults(Spec{
		Fixtures: threeReplicas("Widget", "web"),
		Faults:   []faults.Fault{faults.ScaleChange(faults.ScaleOptions{}), faults.APIErrors()},
	})
	searcherWith := func(probeErr func(ctx context.Context) error) *searcher {
		return &searcher{spec: spec, opts: SearchOptions{Parallel: 2, Checks: 6, Seed: 1, ShrinkTime: time.Minute, Dir: t.TempDir()}, runs: map[string]int{},
			probe: func(ctx context.Context, _ *Env, _ Spec, _ []faults.Step) (probed, func(), error) {
				return probed{}, func() {}, probeErr(ctx)
			}}
	}
	s := searcherWith(func(context.Context) error {
		return errors.New("setup: the controller never took charge of the fixtures")
	})
	cases := standIn(s, func(plan []faults.Step, _ int) *Report { return &Report{Plan: plan} })
	f, err := s.find("probe")
	require.Nil(t, f)
	require.ErrorContains(t, err, "the search's probe")
	require.ErrorContains(t, err, "never took charge")
	require.Len(t, cases.order, 6, "every plan ran: the aims that need no probe in place of the others")

	// Ended by the search (a failure found): its error is the context's.
	s = searcherWith(context.Cause)
	ended, end := context.WithCancel(context.Background())
	end()
	s.runProbe(ended, func(probed) {})
	s.wait()
	require.NoError(t, s.probeErr)
}

// TestRarestFirst: once the probe ended, the aims at the write the fewest
// user changes provoked (the setup counted as one) come first, taking
// turns with the aims that need no write; a write made after nothing the
// probe made comes last.
func TestRarestFirst(t *testing.T) {
	spec := lifecycle.WithDefaults(Spec{
		Fixtures: threeReplicas("Database", "db"),
		Faults: []faults.Fault{faults.ScaleChange(faults.ScaleOptions{}), faults.Recreate(), faults.CrashAfterWrite(),
			faults.ControllerRestart()},
	})
	status := faults.WriteMatch{Verb: "update", Resource: "databases/status"}
	resize := faults.WriteMatch{Verb: "patch", Resource: "persistentvolumeclaims"}
	config := faults.WriteMatch{Verb: "create", Resource: "configmaps"}
	unknown := faults.WriteMatch{Verb: "delete", Resource: "pods"}
	p := probed{known: true, writes: faults.SortWrites([]faults.WriteMatch{status, resize, config, unknown}),
		provoked: map[faults.WriteMatch][]string{status: {"Recreate", "ScaleChange"}, resize: {"ScaleChange"}, config: {"Recreate"}},
		setup:    map[faults.WriteMatch]bool{status: true, config: true}}
	gens := aimedPlans(spec, p)
	for _, place := range []uint64{0, 1, 2, 5} {
		ordered := rarestFirst(gens, p, nil, place)
		require.Len(t, ordered, len(gens), "every aim once")
		var writes []faults.WriteMatch
		for i, g := range ordered {
			w, ok := writeAimedAt(g.Example(0))
			if i < 6 {
				require.Equal(t, i%2 == 0, ok, "place %d, aim %d: the kinds take turns: %s", place, i, aimKey(g))
			}
			if ok {
				writes = append(writes, w)
			}
		}
		require.Equal(t, []faults.WriteMatch{resize, config, status, unknown}, slices.Compact(writes),
			"place %d: the rarest write first (1 change), then the setup's that a re-create makes again (2), the status (3), the one made after nothing", place)
	}
}

// threeReplicas are fixtures of one object of kind (example.com/v1)
// asking for three replicas.
func threeReplicas(kind, name string) func(ns string) []client.Object {
	return func(ns string) []client.Object {
		o := &unstructured.Unstructured{}
		o.SetUnstructuredContent(map[string]any{"apiVersion": "example.com/v1", "kind": kind,
			"metadata": map[string]any{"name": name, "namespace": ns}, "spec": map[string]any{"replicas": int64(3)}})
		return []client.Object{o}
	}
}

// TestArmedAimsTakeTurns: before the probe, the armed aims' faults take
// turns (a search's first wave reaches the first aims of each), each
// fault's aims in the order it gives them.
func TestArmedAimsTakeTurns(t *testing.T) {
	spec := lifecycle.WithDefaults(Spec{
		Fixtures: threeReplicas("Widget", "web"),
		Faults: []faults.Fault{faults.ScaleChange(faults.ScaleOptions{}), faults.Recreate(), faults.APIErrors(), faults.CrashAfterWrite(),
			faults.StaleWatch()},
	})
	var order, crashedBefore []string
	for _, g := range aimsFirst(aimedPlans(spec, probed{}), nil, 0) {
		plan := g.Example(0)
		armed := slices.IndexFunc(plan, faults.IsArmed)
		order = append(order, plan[armed].Fault())
		if plan[armed].Fault() == "CrashAfterWrite" {
			crashedBefore = append(crashedBefore, plan[armed+1].Fault())
		}
	}
	require.Equal(t, []string{"APIErrors", "CrashAfterWrite", "StaleWatch", "APIErrors", "CrashAfterWrite", "StaleWatch",
		"StaleWatch"}, order)
	require.Equal(t, []string{"ScaleChange", "Recreate"}, crashedBefore, "a crash after the first write of each change")
}

// TestViewsIntoTheBusiestChangeFirst: once the probe ended, of the aims
// that need no write, the faults not tried yet take the first turns, and
// a restart's view is into the change that provoked the most distinct
// writes first.
func TestViewsIntoTheBusiestChangeFirst(t *testing.T) {
	spec := lifecycle.WithDefaults(Spec{
		Fixtures: threeReplicas("Database", "db"),
		Faults: []faults.Fault{faults.ScaleChange(faults.ScaleOptions{}), faults.Recreate(), faults.Burst(),
			faults.ControllerRestart()},
	})
	status := faults.WriteMatch{Verb: "update", Resource: "databases/status"}
	config := faults.WriteMatch{Verb: "create", Resource: "configmaps"}
	claims := faults.WriteMatch{Verb: "delete", Resource: "persistentvolumeclaims"}
	p := probed{known: true, writes: faults.SortWrites([]faults.WriteMatch{status, config, claims}),
		provoked: map[faults.WriteMatch][]string{status: {"Recreate", "ScaleChange"}, config: {"Recreate"}, claims: {"Recreate"}}}
	gens := aimedPlans(spec, p)
	for _, place := range []uint64{0, 1, 2, 3, 4, 5} {
		var restarts []string
		for _, g := range rarestFirst(gens, p, map[string]int{"Burst": 1}, place) {
			plan := g.Example(0)
			if len(restarts) == 0 {
				require.Equal(t, "ControllerRestart", aimedFault(plan), "place %d: the burst was tried before: %s", place, aimKey(g))
			}
			if aimedFault(plan) == "ControllerRestart" {
				restarts = append(restarts, lookedBackAt(plan))
			}
		}
		require.Equal(t, "Recreate", restarts[0], "place %d: into the change of 3 writes first: %v", place, restarts)
		require.Contains(t, restarts, "ScaleChange", "place %d", place)
		first := aimedFault(rarestFirst(gens, p, map[string]int{"ControllerRestart": 1}, place)[0].Example(0))
		require.NotEqual(t, "ControllerRestart", first, "place %d: the restart was tried before", place)
	}
}

// TestJoinedAimsEndWithTheFirstAim: of the two aims a plan joins, the one
// ranked higher ends the plan, so that no change of the other's comes
// after it (a refused status write that a later change would retry);
// but a burst ends the plan whichever aim it is.
func TestJoinedAimsEndWithTheFirstAim(t *testing.T) {
	refused := faults.APIErrorsStep{Error: faults.Conflict, ForMs: 4000, Verb: "patch", Resource: "widgets/status"}
	crash := faults.CrashAfterWriteStep{Verb: "create", Resource: "pods", Writes: 1}
	burst := faults.BurstStep{Steps: []faults.Step{scaleToTwo, scaleToTwo}}
	gens := []*rapid.Generator[[]faults.Step]{
		aimOf(refused, scaleToTwo), aimOf(crash, scaleToTwo), aimOf(burst), aimOf(scaleToTwo, crash, scaleToTwo, scaleToTwo), aimOf(refused),
	}
	draw := joinedAims(gens, 2, furtherOn, 5, nil) // aim j joins aim j+2
	plan, aims := draw(4, 1)
	require.Equal(t, faults.FormatPlan([]faults.Step{crash, scaleToTwo, refused}), faults.FormatPlan(plan), "the higher-ranked aim last")
	require.Equal(t, []*rapid.Generator[[]faults.Step]{gens[4], gens[1]}, aims)
	plan, _ = draw(2, 2)
	require.Equal(t, faults.FormatPlan([]faults.Step{refused, burst}), faults.FormatPlan(plan))
	plan, _ = draw(0, 3)
	require.Equal(t, faults.FormatPlan([]faults.Step{refused, scaleToTwo, burst}), faults.FormatPlan(plan), "the other aim's burst last")
	plan, aims = draw(1, 4)
	require.Equal(t, faults.FormatPlan([]faults.Step{crash, scaleToTwo}), faults.FormatPlan(plan), "two aims over maxSteps: the first alone")
	require.Len(t, aims, 1)
}

// TestRefusedWritesGoLast: of two aims, one that refuses the controller's
// writes until it has refused so many ends the plan, whatever their ranks:
// ahead, its window would refuse the writes the other aim needs (the fight
// the controller answers, the create a crash follows), and the other would
// pass. A window of time ends within seconds: the ranks order it.
func TestRefusedWritesGoLast(t *testing.T) {
	refusedStep := faults.APIErrorsStep{Error: faults.TooManyRequests, Requests: 30, Verb: "patch", Resource: "widgets"}
	timedStep := faults.APIErrorsStep{Error: faults.Timeout, ForMs: 4000}
	fightStep := faults.ConflictingWriterStep{Field: "spec.replicas", Value: 5, Rounds: 5}
	crashStep := faults.CrashAfterWriteStep{Writes: 1}
	refused, timed, fight, crash := aimOf(refusedStep, scaleToTwo), aimOf(timedStep, scaleToTwo), aimOf(fightStep), aimOf(crashStep, scaleToTwo)
	draw := joinedAims([]*rapid.Generator[[]faults.Step]{fight, refused, crash, timed}, 2, adjacent, 5, nil)
	plan, _ := draw(0, 0)
	require.Equal(t, faults.FormatPlan([]faults.Step{fightStep, refusedStep, scaleToTwo}), faults.FormatPlan(plan),
		"the fight first, though ranked higher")
	plan, _ = draw(1, 1)
	require.Equal(t, faults.FormatPlan([]faults.Step{timedStep, scaleToTwo, crashStep, scaleToTwo}), faults.FormatPlan(plan),
		"a window of time: the crash, ranked higher, last")
	plan, _ = joinedAims([]*rapid.Generator[[]faults.Step]{crash, refused, timed}, 1, adjacent, 5, nil)(0, 0)
	require.Equal(t, faults.FormatPlan([]faults.Step{crashStep, scaleToTwo, refusedStep, scaleToTwo}), faults.FormatPlan(plan),
		"the crash first, though ranked higher")
	otherStep := faults.APIErrorsStep{Error: faults.InternalError, Requests: 30}
	plan, _ = joinedAims([]*rapid.Generator[[]faults.Step]{refused, aimOf(otherStep, scaleToTwo), crash}, 1, adjacent, 5, nil)(0, 0)
	require.Equal(t, faults.FormatPlan([]faults.Step{otherStep, scaleToTwo, refusedStep, scaleToTwo}), faults.FormatPlan(plan),
		"both refuse: the one ranked higher last")
}

// TestLastingAimsJoinNoArmedOne: a plan does not join an aim that lasts
// (a node loss waits out its eviction) with an armed one, whose change it
// would hold back; it moves to the plan of an unarmed aim, the armed aim
// keeps its plan, and the n plans still reach the first 2n aims, each
// once.
func TestLastingAimsJoinNoArmedOne(t *testing.T) {
	refused := aimOf(faults.APIErrorsStep{Error: faults.InternalError, Requests: 30}, scaleToTwo)
	timeouts := aimOf(faults.APIErrorsStep{Error: faults.Timeout, Requests: 30}, scaleToTwo)
	crash := aimOf(faults.CrashAfterWriteStep{Writes: 1}, scaleToTwo)
	secondCrash := aimOf(faults.CrashAfterWriteStep{Writes: 2}, scaleToTwo)
	lost := aimOf(scaleToTwo, faults.NodeLossStep{Node: 1})
	looping := aimOf(scaleToTwo, crashLooping)
	// As the armed aims come first: aim j joins aim j+3, the node loss
	// the first crash.
	gens := []*rapid.Generator[[]faults.Step]{refused, crash, timeouts, secondCrash, lost, looping}
	draw := joinedAims(gens, 3, furtherOn, 5, nil)
	reached := map[*rapid.Generator[[]faults.Step]]int{}
	for j := range 3 {
		plan, aims := draw(j, j)
		require.Len(t, aims, 2, "plan %d", j)
		for _, g := range aims {
			reached[g]++
		}
		armed := slices.ContainsFunc(plan, faults.IsArmed)
		lasting := slices.ContainsFunc(plan, faults.Lasts)
		require.False(t, armed && lasting, "plan %d joins a lasting aim with an armed one: %s", j, faults.FormatPlan(plan))
	}
	require.Len(t, reached, 6, "the first 2n aims")
	for g, n := range reached {
		require.Equal(t, 1, n, "aim %s reached %d times", aimKey(g), n)
	}
	_, aims := draw(1, 1)
	require.Equal(t, []*rapid.Generator[[]faults.Step]{crash, timeouts}, aims, "the armed aim keeps its plan")
	plan, _ := draw(2, 2)
	require.Equal(t, faults.FormatPlan([]faults.Step{scaleToTwo, crashLooping, scaleToTwo, faults.NodeLossStep{Node: 1}}),
		faults.FormatPlan(plan), "the node loss joins the crash loop, and ranked higher, ends the plan")
}

// TestLastingAimGoesLastAndJoinsNoBurst: an aim that lasts is not joined
// with a burst, whose changes after it would replace what it left; and
// joined with another aim, it goes last, whatever their ranks.
func TestLastingAimGoesLastAndJoinsNoBurst(t *testing.T) {
	burstStep := faults.BurstStep{Steps: []faults.Step{scaleToTwo, scaleToTwo}}
	burst := aimOf(burstStep)
	looping := aimOf(scaleToTwo, crashLooping)
	lost := aimOf(scaleToTwo, faults.NodeLossStep{Node: 1})
	fightStep := faults.ConflictingWriterStep{Field: "spec.replicas", Value: 5, Rounds: 5}
	fight := aimOf(fightStep)
	// Aim j joins aim j+2: the burst the node loss, moved to the crash
	// loop's plan; the fight takes its place.
	draw := joinedAims([]*rapid.Generator[[]faults.Step]{burst, looping, lost, fight}, 2, furtherOn, 5, nil)
	plan, aims := draw(0, 0)
	require.Equal(t, []*rapid.Generator[[]faults.Step]{burst, fight}, aims)
	require.Equal(t, faults.FormatPlan([]faults.Step{fightStep, burstStep}), faults.FormatPlan(plan))
	plan, aims = draw(1, 1)
	require.Equal(t, []*rapid.Generator[[]faults.Step]{looping, lost}, aims)
	require.Equal(t, faults.FormatPlan([]faults.Step{scaleToTwo, crashLooping, scaleToTwo, faults.NodeLossStep{Node: 1}}),
		faults.FormatPlan(plan), "the node loss last, though ranked lower")
}

// TestFirstPlansJoinAdjacentAims: the plans drawn before the probe join
// adjacent aims, 2j and 2j+1, so that the armed aims, ranked first, join
// each other, and the first plans hold the aims ranked highest; the plans
// drawn after it join aim j with the aim n further on.
func TestFirstPlansJoinAdjacentAims(t *testing.T) {
	refused := aimOf(faults.APIErrorsStep{Error: faults.InternalError, Requests: 30}, scaleToTwo)
	crash := aimOf(faults.CrashAfterWriteStep{Writes: 1}, scaleToTwo)
	late := aimOf(faults.StaleWatchStep{DelayMs: 1000, ForMs: 3000, Resource: "pods"}, scaleToTwo)
	secondCrash := aimOf(faults.CrashAfterWriteStep{Writes: 2}, scaleToTwo)
	looping := aimOf(crashLooping)
	fight := aimOf(faults.ConflictingWriterStep{Field: "spec.replicas", Value: 5, Rounds: 5})
	gens := []*rapid.Generator[[]faults.Step]{refused, crash, late, secondCrash, looping, fight}
	draw := joinedAims(gens, 3, adjacent, 5, nil)
	for j, want := range [][]*rapid.Generator[[]faults.Step]{{refused, crash}, {late, secondCrash}, {looping, fight}} {
		plan, aims := draw(j, j)
		require.ElementsMatch(t, want, aims, "plan %d", j)
		if j < 2 {
			require.Equal(t, 2, armedSteps(plan), "plan %d: armed aims join armed ones: %s", j, faults.FormatPlan(plan))
		}
	}
	_, aims := joinedAims(gens, 3, furtherOn, 5, nil)(0, 0)
	require.ElementsMatch(t, []*rapid.Generator[[]faults.Step]{refused, secondCrash}, aims, "aim j and the aim n further on")

	// A search of 60 plans draws 15 before its probe; those that start
	// first hold the armed aims, two in a plan.
	spec := lifecycle.WithDefaults(Spec{
		Fixtures: threeReplicas("Widget", "web"),
		Faults: []faults.Fault{faults.ScaleChange(faults.ScaleOptions{}), faults.Recreate(), faults.APIErrors(), faults.CrashAfterWrite(),
			faults.StaleWatch(), faults.ControllerRestart(), faults.CrashLoop(), faults.NodeLoss(), faults.ConflictingWriter(faults.ConflictOptions{})},
	})
	s := &searcher{spec: spec, opts: SearchOptions{Checks: 60, Seed: 3, Parallel: 16}, runs: map[string]int{},
		probe: func(context.Context, *Env, Spec, []faults.Step) (probed, func(), error) {
			return probed{}, func() {}, errors.New("no probe in this test")
		}}
	ps := s.plans(context.Background())
	<-ps.drawn
	s.wait()
	// APIErrors 2, CrashAfterWrite 2 (after ScaleChange, after Recreate),
	// StaleWatch 3 (every watch late, the pods', cut): 7 armed aims.
	for i := 1; i <= 5; i += 2 {
		require.Equal(t, 2, armedSteps(ps.plans[i]), "plan %d: %s", i, faults.FormatPlan(ps.plans[i]))
	}
}

// armedSteps counts plan's armed steps (faults.IsArmed).
func armedSteps(plan []faults.Step) int {
	n := 0
	for _, st := range plan {
		if faults.IsArmed(st) {
			n++
		}
	}
	return n
}

// aimOf is an aim that always draws plan.
func aimOf(plan ...faults.Step) *rapid.Generator[[]faults.Step] { return rapid.Just(plan) }

// scaleToTwo is the user change of the joining tests' aims.
var scaleToTwo = faults.UserChangeStep{Name: "ScaleChange", Patch: `{"spec":{"replicas":2}}`}

// crashLooping is the crash loop of the joining tests' aims.
var crashLooping = faults.CrashLoopStep{Pod: 7, Starts: 5, ExitCode: 1}
