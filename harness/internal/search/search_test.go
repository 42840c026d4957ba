package search

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"pgregory.net/rapid"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness/internal/lifecycle"
	"github.com/kubeprop/kubeprop/properties"
)

// TestSearchDrawsRapidsPlans: plan i of a search with seed S (an unaimed
// one: i even) is the plan rapid.Check draws in its i-th check with
// -rapid.seed=S, so a seed means
// the same plans in Check, Find, the CLI and a rapid user's own loop,
// whatever Parallel is.
func TestSearchDrawsRapidsPlans(t *testing.T) {
	for name, value := range map[string]string{"rapid.seed": "42", "rapid.checks": "12", "rapid.nofailfile": "true"} {
		f := flag.Lookup(name)
		old := f.Value.String()
		require.NoError(t, f.Value.Set(value))
		defer func() { _ = f.Value.Set(old) }()
	}
	gen := faults.Plan(faults.Catalog(), faults.Config{Nodes: 3, Fixtures: 2}, 5)
	var drawn []string
	rapid.Check(t, func(rt *rapid.T) { drawn = append(drawn, faults.FormatPlan(gen.Draw(rt, "plan"))) })
	require.Len(t, drawn, 12)
	got := searchPlans(gen, 42, 12)
	for i := range drawn {
		require.Equal(t, drawn[i], faults.FormatPlan(got[i]), "plan %d", i)
	}
}

// TestShrinkRunsPassingCandidatesTwice: a bug that shows by timing fails
// in some runs of its plan only. A candidate that passes is run once more
// before the shrinker stops, so it still reaches the one step that needs
// two runs to fail (and fails from then on: its confirming run fails); no
// candidate runs more than twice before it fails, and a failing one once
// more. So with the slots for the second runs beside the first (Parallel
// 16), where the failing second run is the candidate's.
func TestShrinkRunsPassingCandidatesTwice(t *testing.T) {
	for _, parallel := range []int{3, 16} {
		t.Run(fmt.Sprint("parallel ", parallel), func(t *testing.T) { shrinkRunsPassingCandidatesTwice(t, parallel) })
	}
}

func shrinkRunsPassingCandidatesTwice(t *testing.T, parallel int) {
	bug := scaleTo(0)
	s := &searcher{opts: SearchOptions{Parallel: parallel}, runs: map[string]int{}}
	cases := standIn(s, func(plan []faults.Step, run int) *Report {
		rep := &Report{Plan: plan}
		// A plan with the bug's step fails; the step alone, from its
		// second run on.
		if slices.ContainsFunc(plan, func(st faults.Step) bool { return st == bug }) && (len(plan) > 1 || run >= 2) {
			rep.Failures = []Failure{{Property: "converges", Message: "status stuck"}}
		}
		return rep
	})
	first, err := runPlan(s, []faults.Step{scaleTo(3), bug, scaleTo(4), scaleTo(5)})
	require.NoError(t, err)
	require.NotNil(t, first)
	s.shrinking = "converges"
	got, at := shrinkSearch(s, first, time.Now().Add(time.Minute))
	s.wait() // the candidates cut short
	require.Equal(t, []faults.Step{bug}, got.Plan, "runs: %v", cases.runs)
	// Every candidate is counted, the first plan's run (the search's) not.
	require.Equal(t, len(cases.order)-1, s.shrinkStats.Candidates, "%s", s.shrinkStats)
	require.Positive(t, s.shrinkStats.Failed)
	require.Less(t, s.shrinkStats.Failed+s.shrinkStats.CutShort, s.shrinkStats.Candidates, "some passed: %s", s.shrinkStats)
	require.False(t, at.IsZero())
	for plan, n := range cases.runs {
		require.LessOrEqual(t, n, shrinkAttempts+1, "plan %s", plan)
	}
	require.Equal(t, 3, cases.runs[faults.FormatPlan([]faults.Step{bug})], "two runs to fail, and the confirming one")
}

// TestShrinkKeepsConfirmedCandidates: a candidate that fails once and
// passes its confirming run is not kept; the shrink goes on without it
// and ends at a candidate whose failure a second run confirms.
func TestShrinkKeepsConfirmedCandidates(t *testing.T) {
	s := &searcher{opts: SearchOptions{Parallel: 4}, runs: map[string]int{}}
	cases := standIn(s, func(plan []faults.Step, run int) *Report {
		rep := &Report{Plan: plan}
		// A scale to 0 with another change fails every time; alone, in
		// its first run only (the timing fell right once).
		if slices.Contains(plan, scaleTo(0)) && (len(plan) > 1 || run == 1) {
			rep.Failures = []Failure{{Property: "converges"}}
		}
		return rep
	})
	first, err := runPlan(s, []faults.Step{scaleTo(3), scaleTo(0), scaleTo(4)})
	require.NoError(t, err)
	s.shrinking = "converges"
	got, _ := shrinkSearch(s, first, time.Now().Add(time.Minute))
	s.wait()
	require.Len(t, got.Plan, 2, "runs: %v", cases.runs)
	require.Contains(t, got.Plan, scaleTo(0))
	require.Equal(t, 2, cases.runs[faults.FormatPlan(scalePlan(0))], "its failing run and the confirming one that passed")
	require.Equal(t, 1, s.shrinkStats.Unconfirmed, "%s", s.shrinkStats)
	require.Equal(t, 2, cases.runs[faults.FormatPlan(got.Plan)], "the plan kept failed twice")
}

// TestShrinkConfirmsBesideTheNextPass: a failing candidate's confirming
// run goes beside the next pass, which starts from the candidate, rather
// than before it; the plan answered is confirmed all the same.
func TestShrinkConfirmsBesideTheNextPass(t *testing.T) {
	s := &searcher{opts: SearchOptions{Parallel: 4}, runs: map[string]int{}}
	// secondRun is closed when a one-step candidate's second run starts:
	// the next pass's (its candidates ran once already in the first).
	secondRun, started := make(chan struct{}), sync.Once{}
	var beside atomic.Int32 // confirming runs that saw one start beside them
	cases := standIn(s, func(plan []faults.Step, run int) *Report {
		rep := &Report{Plan: plan}
		if len(plan) == 1 && run == 2 {
			started.Do(func() { close(secondRun) })
		}
		// A scale to 0 after another change fails, every time.
		if !slices.Contains(plan, scaleTo(0)) || len(plan) < 2 {
			return rep
		}
		rep.Failures = []Failure{{Property: "converges"}}
		if run == 2 {
			// A confirming run: it waits (up to 2 s) for the next
			// pass to start beside it.
			select {
			case <-secondRun:
				beside.Add(1)
			case <-time.After(2 * time.Second):
			}
		}
		return rep
	})
	first, err := runPlan(s, []faults.Step{scaleTo(3), scaleTo(4), scaleTo(0)})
	require.NoError(t, err)
	s.shrinking = "converges"
	got, _ := s.shrink(first, time.Now().Add(time.Minute))
	s.wait()
	require.Len(t, got.Plan, 2, "runs: %v", cases.order)
	require.Contains(t, got.Plan, scaleTo(0))
	require.GreaterOrEqual(t, cases.runs[faults.FormatPlan(got.Plan)], 2, "the plan answered is confirmed: %v", cases.order)
	require.Positive(t, beside.Load(), "no candidate ran beside a confirming run: %v", cases.order)
	require.Zero(t, s.shrinkStats.Unconfirmed)
}

// TestShrinkCandidatesRunWithoutTheReference: the shrink of a failure of
// a property before matches-reference in the Spec's order runs its
// candidates without it (and so without their reference runs); the plan
// shrunk is replayed with the whole spec, and the report answered is a
// replay's. A failure of matches-reference itself, or of a property after
// it, keeps it in every candidate.
func TestShrinkCandidatesRunWithoutTheReference(t *testing.T) {
	reference := properties.MatchesReference(properties.ReferenceOptions{})
	converges := properties.Func("converges", func(*properties.Trace) error { return nil })
	for _, c := range []struct {
		name       string
		properties []properties.Property
		shrunk     string
		// trimmed: the candidates run without the reference.
		trimmed bool
	}{
		{"a property before it", []properties.Property{converges, reference}, "converges", true},
		{"matches-reference itself", []properties.Property{converges, reference}, properties.MatchesReferenceName, false},
		{"a property after it", []properties.Property{reference, converges}, "converges", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &searcher{spec: Spec{Properties: c.properties}, opts: SearchOptions{Parallel: 4}, runs: map[string]int{}}
			cases := standIn(s, func(plan []faults.Step, _ int) *Report {
				rep := &Report{Plan: plan}
				if slices.Contains(plan, scaleTo(0)) {
					rep.Failures = []Failure{{Property: c.shrunk}}
				}
				return rep
			})
			judge := s.runCase
			var mu sync.Mutex
			var whole, trimmed int // the runs of each spec, after the search's
			s.runCase = func(ctx context.Context, env *Env, spec Spec, plan []faults.Step, judged func(*Report)) (*Report, error) {
				rep, err := judge(ctx, env, spec, plan, judged)
				rep.Namespace = "trimmed"
				if len(spec.Properties) == len(c.properties) {
					rep.Namespace = "whole"
				}
				mu.Lock()
				defer mu.Unlock()
				if rep.Namespace == "whole" {
					whole++
				} else {
					trimmed++
				}
				return rep, err
			}
			first, err := runPlan(s, []faults.Step{scaleTo(3), scaleTo(0), scaleTo(4)})
			require.NoError(t, err)
			whole = 0
			s.shrinking = c.shrunk
			got, _ := s.shrink(first, time.Now().Add(time.Minute))
			s.wait()
			require.Equal(t, scalePlan(0), got.Plan, "runs: %v", cases.order)
			require.Equal(t, "whole", got.Namespace, "the report answered is a replay's")
			if c.trimmed {
				require.Equal(t, ReproduceReplays, whole, "only the replays run the whole spec: %v", cases.order)
				require.Positive(t, trimmed)
			} else {
				require.Zero(t, trimmed, "runs: %v", cases.order)
			}
		})
	}
}

// TestFailedReferenceShrunkAsItsProperty: a failure of matches-reference
// because the reference run failed quiescent (the controller fails with
// the user changes alone) is shrunk as quiescent's, from the reference's
// plan run as a case; a failure of matches-reference with a reference
// that passed, or whose reference's plan passes as a case, is kept.
func TestFailedReferenceShrunkAsItsProperty(t *testing.T) {
	reference := properties.MatchesReference(properties.ReferenceOptions{})
	quiescent := properties.Func("quiescent", func(*properties.Trace) error { return nil })
	kill := faults.ContainerKillStep{Pod: 1}
	for _, c := range []struct {
		name string
		// failedProperty: the property the reference run failed ("": it
		// passed); reproduces: the reference's plan fails it as a case;
		// ranInSearch: the search ran that plan first, and it passed.
		failedProperty string
		reproduces     bool
		ranInSearch    bool
		want           []faults.Step
		wantProperty   string
	}{
		{"reference failed", "quiescent", true, false, scalePlan(0), "quiescent"},
		{"reference failed, its plan drawn", "quiescent", true, true, scalePlan(0), "quiescent"},
		{"reference passed", "", true, false, []faults.Step{kill, scaleTo(0)}, properties.MatchesReferenceName},
		{"its plan passes as a case", "quiescent", false, false, []faults.Step{kill, scaleTo(0)}, properties.MatchesReferenceName},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &searcher{spec: Spec{Properties: []properties.Property{quiescent, reference}}, opts: SearchOptions{Parallel: 4}, runs: map[string]int{}}
			cases := standIn(s, func(plan []faults.Step, run int) *Report {
				rep := &Report{Plan: plan, Trace: &properties.Trace{}}
				switch {
				case !slices.Contains(plan, scaleTo(0)):
				case slices.Contains(plan, faults.Step(kill)):
					rep.Failures = []Failure{{Property: properties.MatchesReferenceName}}
					if c.failedProperty != "" {
						rep.Trace.Reference = &properties.ReferenceRun{Failed: errors.New("writes went on"), FailedProperty: c.failedProperty}
					}
				case c.reproduces && !(c.ranInSearch && run == 1):
					rep.Failures = []Failure{{Property: "quiescent"}}
				}
				return rep
			})
			if c.ranInSearch {
				// The search ran the reference's plan, which passed then.
				_, rep, err := s.firstFailing([][]faults.Step{{scaleTo(3), scaleTo(0)}}, "", time.Time{}, 1, false)
				require.NoError(t, err)
				require.Nil(t, rep)
			}
			first, err := runPlan(s, []faults.Step{scaleTo(3), kill, scaleTo(0)})
			require.NoError(t, err)
			deadline := time.Now().Add(time.Minute)
			first = s.withoutFaults(first, deadline)
			s.shrinking = first.Failures[0].Property
			got, _ := s.shrink(first, deadline)
			s.wait()
			require.Equal(t, c.wantProperty, got.Failures[0].Property, "runs: %v", cases.order)
			require.Equal(t, c.want, got.Plan, "runs: %v", cases.order)
		})
	}
}

// shrinkSearch is shrink without its replays (asOften): the last plan
// kept, and when.
func shrinkSearch(s *searcher, rep *Report, deadline time.Time) (*Report, time.Time) {
	kept := s.shrinkChain(rep, deadline)
	return kept[len(kept)-1].rep, kept[len(kept)-1].at
}

// TestShrinkReproducesAsOften: the shrunk plan is replayed beside the
// plan drawn; while it reproduces less often, the shrink gives up its
// last steps for the plans kept before them.
func TestShrinkReproducesAsOften(t *testing.T) {
	for _, c := range []struct {
		name string
		// fails: whether a replay (run 3 on: the search's or the
		// candidate's run and its confirming one came first) fails.
		fails func(plan []faults.Step, run int) bool
		want  []faults.Step
		// drawn: the plan drawn's reproductions (-1: not replayed);
		// back: the steps given up.
		drawn, back int
		stats       string
		// rate: the saved scenario's expect.rate (0: every replay).
		rate float64
	}{
		{"every time", func([]faults.Step, int) bool { return true }, scalePlan(0), -1, 0, "; reproduced in 3 of 3 replays", 0},
		// The step alone (kept: it failed twice) then in 1 replay of 3;
		// the plan drawn, kept before it, in every one.
		{"less often", func(plan []faults.Step, run int) bool { return len(plan) > 1 || run == 3 }, []faults.Step{scaleTo(3), scaleTo(0), scaleTo(4)}, 3, 1,
			"; reproduced in 3 of 3 replays, the plan drawn in 3; 1 shrink steps given up for reproducing less often", 0},
		// The step alone in 2 replays of 3 (runs 3 and 4), the plan
		// drawn in 3: one replay fewer cannot be told apart, kept.
		{"one replay fewer", func(plan []faults.Step, run int) bool { return len(plan) == 1 && run <= 4 || len(plan) > 1 }, scalePlan(0), 3, 0,
			"; reproduced in 2 of 3 replays, the plan drawn in 3; 0 shrink steps given up for reproducing less often", 0.66},
		// The step alone in 2 replays of 3 (runs 3 and 4), the plan
		// drawn in 2 too (its runs 2 and 3): as often, kept.
		{"as often", func(plan []faults.Step, run int) bool { return len(plan) == 1 && run <= 4 || len(plan) > 1 && run == 3 }, scalePlan(0), 2, 0,
			"; reproduced in 2 of 3 replays, the plan drawn in 2; 0 shrink steps given up for reproducing less often", 0.66},
		// Every plan fails in its first two runs only: the step alone
		// (kept: it failed twice) in no replay, the plan drawn in one
		// (its run 2). A plan that reproduced in no replay is given up for
		// one that did in any, and the scenario states 1 of 3.
		{"in no replay", func([]faults.Step, int) bool { return false }, []faults.Step{scaleTo(3), scaleTo(0), scaleTo(4)}, 1, 1,
			"; reproduced in 1 of 3 replays, the plan drawn in 1; 1 shrink steps given up for reproducing less often", 0.33},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &searcher{opts: SearchOptions{Parallel: 8}, runs: map[string]int{}}
			cases := standIn(s, func(plan []faults.Step, run int) *Report {
				rep := &Report{Plan: plan}
				if slices.Contains(plan, scaleTo(0)) && (run <= 2 || c.fails(plan, run)) {
					rep.Failures = []Failure{{Property: "converges"}}
				}
				return rep
			})
			first, err := runPlan(s, []faults.Step{scaleTo(3), scaleTo(0), scaleTo(4)})
			require.NoError(t, err)
			s.shrinking = "converges"
			got, _ := s.shrink(first, time.Now().Add(time.Minute))
			s.wait()
			require.Equal(t, c.want, got.Plan, "runs: %v", cases.runs)
			st := s.shrinkStats
			require.Equal(t, ReproduceReplays, st.Replays, "%s", st)
			require.Equal(t, c.drawn, st.DrawnReproduced, "%s", st)
			require.Equal(t, c.back, st.WalkedBack, "%s", st)
			require.True(t, strings.HasSuffix(st.String(), c.stats), "%s", st)
			require.Equal(t, c.rate, st.rate(), "the scenario's expect.rate: %s", st)
		})
	}
	// When the plan drawn reproduced in no replay either, the plan kept
	// failed once in its run and the three replays: not every replay.
	require.Equal(t, 0.25, ShrinkStats{Replays: ReproduceReplays, Reproduced: 0, DrawnReproduced: 0}.rate())
}

// TestShrinkRunsSecondRunsAtOnce: once every candidate of a plan passed,
// their second runs, of every pass (the drops, the simpler values), go
// all at once rather than pass by pass.
func TestShrinkRunsSecondRunsAtOnce(t *testing.T) {
	plan := []faults.Step{scaleTo(3), scaleTo(4), scaleTo(0)}
	s := &searcher{opts: SearchOptions{Parallel: 16}, runs: map[string]int{}}
	var mu sync.Mutex
	candidates := map[string]bool{} // that ran once
	secondRuns, together := 0, 0    // running now; the most seen at once
	cases := standIn(s, func(p []faults.Step, run int) *Report {
		rep := &Report{Plan: p}
		if slices.Equal(p, plan) {
			rep.Failures = []Failure{{Property: "converges"}}
			return rep
		}
		mu.Lock()
		candidates[faults.FormatPlan(p)] = true
		if run == 2 {
			secondRuns++
			defer func() {
				mu.Lock()
				secondRuns--
				mu.Unlock()
			}()
		}
		mu.Unlock()
		// A second run waits (a while) for every candidate's.
		for range 100 {
			mu.Lock()
			all := run == 1 || secondRuns == len(candidates)
			together = max(together, secondRuns)
			mu.Unlock()
			if all {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		return rep
	})
	first, err := runPlan(s, plan)
	require.NoError(t, err)
	require.NotNil(t, first)
	got, at := s.shrink(first, time.Now().Add(time.Minute))
	s.wait()
	require.Equal(t, plan, got.Plan)
	require.True(t, at.IsZero(), "the plan is the smallest")
	require.GreaterOrEqual(t, len(candidates), 6, "the singles and the drops: %v", cases.runs)
	for key := range candidates {
		require.Equal(t, shrinkAttempts, cases.runs[key], "runs of %s", key)
	}
	require.Equal(t, len(candidates), together, "every second run at once: %v", cases.runs)
}

// TestFirstFailingCutsLaterCases: once a plan fails, the cases of the
// plans after it cannot change the answer; they are cut short (their
// context ends) and their error is no harness failure, while the plans
// before it still run to their end. The answer is in before the cases cut
// short have torn down: those keep their slots until then, so the next
// call's cases wait for them.
func TestFirstFailingCutsLaterCases(t *testing.T) {
	s := &searcher{opts: SearchOptions{Parallel: 3}, runs: map[string]int{}}
	var mu sync.Mutex
	ended := map[int64]string{}
	var inside, most atomic.Int32
	tornDown := make(chan struct{}) // the third case's teardown may end
	s.runCase = func(ctx context.Context, _ *Env, _ Spec, plan []faults.Step, _ func(*Report)) (*Report, error) {
		n := inside.Add(1)
		defer inside.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		v := plan[0].(faults.ScaleChangeStep).Value
		rep := &Report{Plan: plan}
		var err error
		switch v {
		case 0: // passes, after the failure is known
			time.Sleep(200 * time.Millisecond)
		case 1: // fails at once
			rep.Failures = []Failure{{Property: "converges"}}
		case 2: // would take a minute: ends with its context, then tears down
			select {
			case <-ctx.Done():
				err = ctx.Err()
				<-tornDown
			case <-time.After(time.Minute):
			}
		default: // the next call's: side by side while they run
			time.Sleep(50 * time.Millisecond)
		}
		mu.Lock()
		defer mu.Unlock()
		ended[v] = fmt.Sprint(err)
		return rep, err
	}
	type answer struct {
		i   int
		rep *Report
		err error
	}
	answered := make(chan answer)
	go func() {
		i, rep, err := s.firstFailing([][]faults.Step{scalePlan(0), scalePlan(1), scalePlan(2)}, "", time.Time{}, 1, false)
		answered <- answer{i, rep, err}
	}()
	var a answer
	select {
	case a = <-answered:
	case <-time.After(30 * time.Second):
		t.Fatal("no answer before the case cut short tore down")
	}
	require.NoError(t, a.err)
	require.Equal(t, 1, a.i)
	require.Equal(t, scalePlan(1), a.rep.Plan)
	require.Zero(t, s.runs[faults.FormatPlan(scalePlan(2))], "a case cut short does not count as a run")

	// The next call's three cases wait for the slot the third case holds.
	go func() {
		time.Sleep(100 * time.Millisecond)
		close(tornDown)
	}()
	i, _, err := s.firstFailing([][]faults.Step{scalePlan(3), scalePlan(4), scalePlan(5)}, "", time.Time{}, 1, false)
	require.NoError(t, err)
	require.Equal(t, -1, i)
	s.wait()
	require.Equal(t, int32(3), most.Load(), "no more than Parallel cases at once")
	require.Equal(t, map[int64]string{0: "<nil>", 1: "<nil>", 2: "context canceled", 3: "<nil>", 4: "<nil>", 5: "<nil>"}, ended)
}

// TestFirstFailingTakesFirstJudged: in the search's draws the first
// failure judged is the answer; the plan before it, which would take a
// minute (a liveness deadline), is cut short, not waited for, and does not
// count as run.
func TestFirstFailingTakesFirstJudged(t *testing.T) {
	s := &searcher{opts: SearchOptions{Parallel: 2}, runs: map[string]int{}}
	s.runCase = func(ctx context.Context, _ *Env, _ Spec, plan []faults.Step, _ func(*Report)) (*Report, error) {
		rep := &Report{Plan: plan}
		if plan[0].(faults.ScaleChangeStep).Value == 1 {
			rep.Failures = []Failure{{Property: "at-most-replicas"}}
			return rep, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Minute):
			return rep, nil
		}
	}
	start := time.Now()
	i, rep, err := s.firstFailing([][]faults.Step{scalePlan(0), scalePlan(1)}, "", time.Time{}, 1, true)
	require.NoError(t, err)
	require.Equal(t, 1, i)
	require.Equal(t, scalePlan(1), rep.Plan)
	require.Less(t, time.Since(start), 30*time.Second, "the plan before the failure was waited for")
	s.wait()
	require.Zero(t, s.runs[faults.FormatPlan(scalePlan(0))], "a case cut short does not count as a run")

	// In order (the shrinker's), the same plans wait for plan 0: here it
	// fails too, and is the answer.
	s = &searcher{opts: SearchOptions{Parallel: 2}, runs: map[string]int{}}
	standIn(s, func(plan []faults.Step, _ int) *Report {
		if plan[0] == scaleTo(0) {
			time.Sleep(100 * time.Millisecond)
		}
		return &Report{Plan: plan, Failures: []Failure{{Property: "at-most-replicas"}}}
	})
	i, _, err = s.firstFailing([][]faults.Step{scalePlan(0), scalePlan(1)}, "", time.Time{}, 1, false)
	require.NoError(t, err)
	require.Equal(t, 0, i)
	s.wait()
}

// TestOnCaseOneAtATime: with cases side by side, OnCase is never called
// twice at once (a user's OnCase may print to a buffer without a lock).
func TestOnCaseOneAtATime(t *testing.T) {
	var inside, most, calls atomic.Int32
	s := &searcher{runs: map[string]int{}, opts: SearchOptions{Parallel: 4, OnCase: func(*Report) {
		n := inside.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(20 * time.Millisecond)
		inside.Add(-1)
		calls.Add(1)
	}}}
	s.runCase = func(_ context.Context, _ *Env, _ Spec, plan []faults.Step, _ func(*Report)) (*Report, error) {
		return &Report{Plan: plan}, nil
	}
	var plans [][]faults.Step
	for v := range int64(8) {
		plans = append(plans, scalePlan(v))
	}
	i, _, err := s.firstFailing(plans, "", time.Time{}, 1, false)
	require.NoError(t, err)
	require.Equal(t, -1, i)
	require.Equal(t, int32(8), calls.Load())
	require.Equal(t, int32(1), most.Load())
}

// TestShrinkDropsUnrunStepsFirst: the steps a case did not run, because a
// property had failed before them, go in the shrinker's first candidate,
// together with the no-ops: one run takes the plan to what ran.
func TestShrinkDropsUnrunStepsFirst(t *testing.T) {
	s := &searcher{opts: SearchOptions{Parallel: 2}, runs: map[string]int{}}
	cases := standIn(s, func(plan []faults.Step, _ int) *Report {
		rep := &Report{Plan: plan}
		// Step 5 fails the case as it runs; step 7 does nothing.
		for i, st := range plan {
			switch {
			case st == scaleTo(5):
				rep.Failures = []Failure{{Property: "at-most-replicas"}}
				for j := i + 1; j < len(plan); j++ {
					rep.Unrun = append(rep.Unrun, j)
				}
				return rep
			case st == scaleTo(7):
				rep.NoOps = append(rep.NoOps, i)
			}
		}
		return rep
	})
	first, err := runPlan(s, []faults.Step{scaleTo(7), scaleTo(1), scaleTo(5), scaleTo(2), scaleTo(3)})
	require.NoError(t, err)
	require.NotNil(t, first)
	require.Equal(t, []int{3, 4}, first.Unrun)
	got, _ := s.shrink(first, time.Now().Add(time.Minute))
	s.wait() // the candidates cut short
	require.Equal(t, scalePlan(5), got.Plan, "runs: %v", cases.order)
	require.Equal(t, faults.FormatPlan([]faults.Step{scaleTo(1), scaleTo(5)}), cases.order[1], "the first candidate drops the no-op and the unrun steps at once")
}

// TestShrinkMergesScaleChanges: a bug that needs a pod created after a
// crash is armed fails with [ScaleChange{0} CrashAfterWrite ScaleChange{1}]
// from a fixture of 3, and with no plan that only drops its steps (each
// loses the scale-up); merging the ScaleChanges keeps the scale-up, one
// step shorter.
func TestShrinkMergesScaleChanges(t *testing.T) {
	crash := faults.CrashAfterWriteStep{Writes: 1}
	fixture := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicas": int64(3)}}}
	spec := Spec{Fixtures: func(string) []client.Object { return []client.Object{fixture.DeepCopy()} }}
	s := &searcher{spec: spec, opts: SearchOptions{Parallel: 4}, runs: map[string]int{}}
	cases := standIn(s, func(plan []faults.Step, _ int) *Report {
		rep := &Report{Plan: plan}
		replicas, armed := int64(3), false
		for _, st := range plan {
			switch st := st.(type) {
			case faults.CrashAfterWriteStep:
				armed = true
			case faults.ScaleChangeStep:
				if armed && st.Value > replicas {
					rep.Failures = []Failure{{Property: "at-most-replicas"}}
				}
				replicas = st.Value
			}
		}
		return rep
	})
	first, err := runPlan(s, []faults.Step{scaleTo(0), crash, scaleTo(1)})
	require.NoError(t, err)
	require.NotNil(t, first)
	got, _ := s.shrink(first, time.Now().Add(time.Minute))
	s.wait()
	require.Equal(t, []faults.Step{crash, scaleTo(4)}, got.Plan, "runs: %v", cases.order)
}

// TestShrinkNarrowsFaults: errors answered to every write, when only
// those to one write matter (here the status update, the second of the
// two the controller tried, one of them refused), are shrunk to that
// write; the errors at the other one pass.
func TestShrinkNarrowsFaults(t *testing.T) {
	everyWrite := faults.APIErrorsStep{Error: faults.Conflict, ForMs: 4000}
	atStatus := faults.APIErrorsStep{Error: faults.Conflict, ForMs: 4000, Verb: "update", Resource: "podsets/status"}
	s := &searcher{opts: SearchOptions{Parallel: 4}, runs: map[string]int{}}
	cases := standIn(s, func(plan []faults.Step, _ int) *Report {
		rep := &Report{Plan: plan, Namespace: "kp-1", Trace: &properties.Trace{Controller: lifecycle.UserController, Requests: []properties.Request{
			{User: lifecycle.UserController, Namespace: "kp-1", Verb: "create", Resource: "pods", Code: 201},
			{User: lifecycle.UserController, Namespace: "kp-1", Verb: "update", Resource: "podsets", Subresource: "status", Code: 409},
			{User: lifecycle.UserController, Namespace: "kp-1", Verb: "update", Resource: "leases", Code: 200},
			{User: "kubeprop:user", Namespace: "kp-1", Verb: "patch", Resource: "podsets", Code: 200},
		}}}
		if (slices.Contains(plan, faults.Step(everyWrite)) || slices.Contains(plan, faults.Step(atStatus))) && slices.Contains(plan, scaleTo(2)) {
			rep.Failures = []Failure{{Property: "converges"}}
		}
		return rep
	})
	first, err := runPlan(s, []faults.Step{everyWrite, scaleTo(2)})
	require.NoError(t, err)
	require.NotNil(t, first)
	got, _ := s.shrink(first, time.Now().Add(time.Minute))
	s.wait()
	require.Equal(t, []faults.Step{atStatus, scaleTo(2)}, got.Plan, "runs: %v", cases.order)
	require.Contains(t, cases.order, faults.FormatPlan([]faults.Step{faults.APIErrorsStep{Error: faults.Conflict, ForMs: 4000, Verb: "create", Resource: "pods"}, scaleTo(2)}),
		"tried at the other write too")
}

// TestShrinkTakesKnownFailures: a candidate that failed in the search
// before (here a plan placed after the lowest failing one, judged before
// it) fails without running again.
func TestShrinkTakesKnownFailures(t *testing.T) {
	s := &searcher{opts: SearchOptions{Parallel: 4}, runs: map[string]int{}}
	cases := standIn(s, func(plan []faults.Step, _ int) *Report {
		if len(plan) > 1 {
			time.Sleep(100 * time.Millisecond) // the one-step plan ends first
		}
		// Every plan with a scale to 0 fails.
		rep := &Report{Plan: plan}
		if slices.Contains(plan, scaleTo(0)) {
			rep.Failures = []Failure{{Property: "quiescent"}}
		}
		return rep
	})
	i, first, err := s.firstFailing([][]faults.Step{{scaleTo(3), scaleTo(0)}, {scaleTo(0)}, {scaleTo(2)}}, "", time.Time{}, 1, false)
	require.NoError(t, err)
	require.Equal(t, 0, i, "the lowest index")
	got, _ := shrinkSearch(s, first, time.Now().Add(time.Minute))
	s.wait()
	require.Equal(t, scalePlan(0), got.Plan)
	require.Equal(t, 2, cases.runs[faults.FormatPlan(scalePlan(0))], "its run in the first call and the confirming one, not a run in the shrink's pass: %v", cases.runs)
}

// caseLog is what a searcher's stand-in cases ran: plans in the order
// they started, and how often each. Read it once the search waited.
type caseLog struct {
	mu    sync.Mutex
	order []string
	runs  map[string]int
}

// standIn makes s run its cases with judge, a stand-in for a case that
// gets the plan and its run (1 for its first); cases run side by side,
// judge too.
func standIn(s *searcher, judge func(plan []faults.Step, run int) *Report) *caseLog {
	log := &caseLog{runs: map[string]int{}}
	s.runCase = func(_ context.Context, _ *Env, _ Spec, plan []faults.Step, _ func(*Report)) (*Report, error) {
		key := faults.FormatPlan(plan)
		log.mu.Lock()
		log.order = append(log.order, key)
		log.runs[key]++
		run := log.runs[key]
		log.mu.Unlock()
		return judge(plan, run), nil
	}
	return log
}

// runPlan runs plan as a search does and returns what run told.
func runPlan(s *searcher, plan []faults.Step) (*Report, error) {
	var rep *Report
	var err error
	s.run(context.Background(), plan, func(r *Report, e error) { rep, err = r, e })
	return rep, err
}

// TestOutcomeToldBeforeTeardown: the search has a case's outcome as soon
// as the properties judged it, while the case tears down in its slot: a
// failure's report, and a pass (a shrink pass waits for the candidates
// before the one that failed, not for their teardowns); a teardown that
// then gets stuck is still the search's failure.
func TestOutcomeToldBeforeTeardown(t *testing.T) {
	for _, failing := range []bool{true, false} {
		s := &searcher{opts: SearchOptions{Parallel: 2}, runs: map[string]int{}}
		tornDown := make(chan struct{})
		s.runCase = func(_ context.Context, _ *Env, _ Spec, plan []faults.Step, judged func(*Report)) (*Report, error) {
			rep := &Report{Plan: plan}
			if failing {
				rep.Failures = []Failure{{Property: "converges"}}
			}
			judged(rep)
			<-tornDown
			rep.Teardown = lifecycle.StuckTeardown("the controller did not stop")
			return rep, nil
		}
		answered := make(chan int)
		go func() {
			i, _, err := s.firstFailing([][]faults.Step{scalePlan(0)}, "", time.Time{}, 1, false)
			assert.NoError(t, err)
			answered <- i
		}()
		select {
		case i := <-answered:
			require.Equal(t, map[bool]int{true: 0, false: -1}[failing], i)
		case <-time.After(30 * time.Second):
			t.Fatalf("no answer before the case tore down (failing: %v)", failing)
		}
		require.NoError(t, s.takeLateErr())
		close(tornDown)
		s.wait()
		require.ErrorContains(t, s.takeLateErr(), "the controller did not stop")
	}
}

// TestOutcomeToldWhileSlotsAreHeld: a slot held by another case (the
// probe's, a confirming run's) leaves the search's loop a plan it cannot
// start yet; it still takes in the outcome of a case judged, rather than
// waiting for a slot, which that case's teardown holds. A plan not
// started for want of a slot starts once one is given back.
func TestOutcomeToldWhileSlotsAreHeld(t *testing.T) {
	s := &searcher{opts: SearchOptions{Parallel: 2}, runs: map[string]int{}}
	held, tornDown := make(chan struct{}), make(chan struct{})
	s.startCase(func() { <-held }) // the probe's slot
	var mu sync.Mutex
	var ran []string
	s.runCase = func(_ context.Context, _ *Env, _ Spec, plan []faults.Step, judged func(*Report)) (*Report, error) {
		mu.Lock()
		ran = append(ran, faults.FormatPlan(plan))
		mu.Unlock()
		rep := &Report{Plan: plan}
		if plan[0] == scaleTo(0) {
			rep.Failures = []Failure{{Property: "converges"}}
			judged(rep)
			<-tornDown
		}
		return rep, nil
	}
	answered := make(chan int)
	go func() {
		i, _, err := s.firstFailing([][]faults.Step{scalePlan(0), scalePlan(1)}, "", time.Time{}, 1, true)
		assert.NoError(t, err)
		answered <- i
	}()
	select {
	case i := <-answered:
		require.Equal(t, 0, i)
	case <-time.After(30 * time.Second):
		t.Fatal("no answer while the failing case tore down and the probe held the other slot")
	}
	close(tornDown)
	close(held)
	s.wait()
	require.Equal(t, []string{faults.FormatPlan(scalePlan(0))}, ran, "none starts after the answer")

	// Both plans pass: the second starts once the probe gives its slot back.
	s = &searcher{opts: SearchOptions{Parallel: 1}, runs: map[string]int{}}
	held = make(chan struct{})
	s.startCase(func() { <-held })
	standIn(s, func(plan []faults.Step, _ int) *Report { return &Report{Plan: plan} })
	go func() {
		i, _, err := s.firstFailing([][]faults.Step{scalePlan(1), scalePlan(2)}, "", time.Time{}, 1, true)
		assert.NoError(t, err)
		answered <- i
	}()
	time.Sleep(100 * time.Millisecond)
	close(held)
	select {
	case i := <-answered:
		require.Equal(t, -1, i)
	case <-time.After(30 * time.Second):
		t.Fatal("the plans never started once the slot was given back")
	}
	s.wait()
}

// scaleTo is the stand-in cases' step: a ScaleChange of spec.replicas to
// v; scalePlan is the plan of that step alone.
func scaleTo(v int64) faults.Step { return faults.ScaleChangeStep{Field: "spec.replicas", Value: v} }

func scalePlan(v int64) []faults.Step { return []faults.Step{scaleTo(v)} }

// TestPlansDrawnLaterStartInTurn: while the aimed plans wait for the
// probe, the plans drawn start in their place; once drawn, the aimed ones
// start before any later one, and the lowest failing plan is the answer
// (Parallel 1 and 2). Nothing drawn but plans not yet drawn: the search
// waits for them rather than ending.
func TestPlansDrawnLaterStartInTurn(t *testing.T) {
	for _, parallel := range []int{1, 2} {
		s := &searcher{opts: SearchOptions{Parallel: parallel}, runs: map[string]int{}}
		log := standIn(s, func(plan []faults.Step, _ int) *Report {
			rep := &Report{Plan: plan}
			if plan[0] == scaleTo(3) {
				rep.Failures = []Failure{{Property: "converges"}}
			}
			return rep
		})
		ps := &planSet{plans: [][]faults.Step{scalePlan(0), nil, scalePlan(2), nil, scalePlan(4), scalePlan(6)}, drawn: make(chan struct{})}
		started := make(chan struct{})
		go func() {
			// The drawn plans run meanwhile.
			require.Eventually(t, func() bool {
				log.mu.Lock()
				defer log.mu.Unlock()
				return len(log.order) == 4
			}, 10*time.Second, time.Millisecond)
			close(started)
			ps.fill(func(i int) []faults.Step { return scalePlan(int64(i)) })
		}()
		i, rep, err := s.firstFailingOf(ps, "", time.Time{}, 1, false)
		<-started
		s.wait()
		require.NoError(t, err)
		require.Equal(t, 3, i, "parallel %d", parallel)
		require.NotNil(t, rep)
		plan := func(v int64) string { return faults.FormatPlan(scalePlan(v)) }
		require.ElementsMatch(t, []string{plan(0), plan(2), plan(4), plan(6)}, log.order[:4], "parallel %d", parallel)
		require.ElementsMatch(t, []string{plan(1), plan(3)}, log.order[4:], "parallel %d", parallel)
	}
}

// TestSearchTellsOfPlansDrawnAgain: a plan drawn twice runs once, and the
// search says so (OnSkip); the shrinker's candidates run before are no
// news. OnCase tells a shrink's runs from the plans drawn.
func TestSearchTellsOfPlansDrawnAgain(t *testing.T) {
	var skipped []string
	var shrinking []bool
	s := &searcher{runs: map[string]int{}, opts: SearchOptions{Parallel: 1,
		OnSkip: func(plan []faults.Step) { skipped = append(skipped, faults.FormatPlan(plan)) },
		OnCase: func(rep *Report) { shrinking = append(shrinking, rep.Shrinking) }}}
	cases := standIn(s, func(plan []faults.Step, _ int) *Report { return &Report{Plan: plan} })
	i, _, err := s.firstFailing([][]faults.Step{scalePlan(1), scalePlan(2), scalePlan(1)}, "", time.Time{}, 1, true)
	require.NoError(t, err)
	require.Equal(t, -1, i)
	s.wait()
	require.Equal(t, []string{faults.FormatPlan(scalePlan(1))}, skipped)
	require.Equal(t, 1, cases.runs[faults.FormatPlan(scalePlan(1))])

	s.shrinking = "converges"
	_, _, err = s.firstFailing([][]faults.Step{scalePlan(1), scalePlan(3)}, "converges", time.Time{}, 1, false)
	require.NoError(t, err)
	s.wait()
	require.Len(t, skipped, 1, "a candidate run before is skipped without a word")
	require.Equal(t, []bool{false, false, true}, shrinking)
}
