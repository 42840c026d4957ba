package search

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness/internal/lifecycle"
	"github.com/kubeprop/kubeprop/properties"
)

// TestListedShardsMakeTheWholeList: the lists of shards 0, 1 and 2 of a
// seed together are the whole search's list, each plan in one shard, with
// the same plan, kind and drawn-again mark at each index.
func TestListedShardsMakeTheWholeList(t *testing.T) {
	spec := Spec{
		Controller: lifecycle.ControllerManager(),
		Properties: []properties.Property{properties.NoPanics()},
		Fixtures:   threeReplicas("Widget", "web"),
		Faults: []faults.Fault{faults.ScaleChange(faults.ScaleOptions{}), faults.APIErrors(), faults.CrashAfterWrite(),
			faults.StaleWatch(), faults.NodeLoss()},
	}
	whole, err := ListPlans(spec, SearchOptions{Checks: 40, Seed: 11})
	require.NoError(t, err)
	require.Len(t, whole.Plans, 40)
	require.Equal(t, uint64(11), whole.Seed)
	var probed, again int
	for i, p := range whole.Plans {
		require.Equal(t, i, p.Index)
		require.Equal(t, i%2 == 1, p.Aimed)
		if p.Probed {
			probed++
		}
		if p.Again {
			again++
		}
	}
	require.Positive(t, probed, "the aims at the probe's findings are marked")
	t.Logf("%d probed, %d drawn again\n%s", probed, again, whole)

	byIndex := map[int]ListedPlan{}
	for i := range 3 {
		part, err := ListPlans(spec, SearchOptions{Checks: 40, Seed: 11, Shard: Shard{i, 3}})
		require.NoError(t, err)
		require.Equal(t, Shard{i, 3}, part.Shard)
		require.True(t, strings.HasPrefix(part.String(), "seed 11, shard "+part.Shard.String()+": "), part.String())
		for _, p := range part.Plans {
			require.Equal(t, i, p.Index%3, "plan %d in shard %d", p.Index, i)
			_, twice := byIndex[p.Index]
			require.False(t, twice, "plan %d in two shards", p.Index)
			byIndex[p.Index] = p
		}
	}
	require.Len(t, byIndex, len(whole.Plans))
	for _, p := range whole.Plans {
		require.Equal(t, faults.FormatPlan(p.Plan), faults.FormatPlan(byIndex[p.Index].Plan), "plan %d", p.Index)
		require.Equal(t, p.Aimed, byIndex[p.Index].Aimed)
		require.Equal(t, p.Probed, byIndex[p.Index].Probed)
		require.Equal(t, p.Again, byIndex[p.Index].Again, "plan %d", p.Index)
	}

	_, err = ListPlans(spec, SearchOptions{Checks: 40, Shard: Shard{Index: 1, Count: 3}})
	require.ErrorContains(t, err, "SearchOptions.Shard is 1/3 but the Seed is 0")
	_, err = ListPlans(spec, SearchOptions{Checks: 40, Seed: 1, Shard: Shard{Index: 3, Count: 3}})
	require.ErrorContains(t, err, "SearchOptions.Shard: shard 3/3: the index counts from 0 to N-1")
}

// TestShardedSearchRunsItsPlans: a shard runs the plans whose index is
// its own mod the count, and skips a plan drawn again after another
// shard's: the shards together run the plans the whole search runs, each
// once.
func TestShardedSearchRunsItsPlans(t *testing.T) {
	var plans [][]faults.Step
	for v := range int64(12) {
		plans = append(plans, scalePlan(v))
	}
	plans[7] = scalePlan(1)  // drawn again: plan 1 is another shard's
	plans[10] = scalePlan(4) // drawn again: plan 4 is its own shard's
	search := func(shard Shard) []string {
		var mu sync.Mutex
		var ran []string
		s := &searcher{runs: map[string]int{}, opts: SearchOptions{Parallel: 3}}
		s.runCase = func(_ context.Context, _ *Env, _ Spec, plan []faults.Step, _ func(*Report)) (*Report, error) {
			mu.Lock()
			ran = append(ran, faults.FormatPlan(plan))
			mu.Unlock()
			return &Report{Plan: plan}, nil
		}
		ps := drawnPlans(plans)
		ps.shard = shard
		i, _, err := s.firstFailingOf(ps, "", time.Time{}, 1, true)
		require.NoError(t, err)
		require.Equal(t, -1, i)
		s.wait()
		return ran
	}
	whole := search(Shard{})
	require.Len(t, whole, 10)
	var parts []string
	for i := range 3 {
		part := search(Shard{i, 3})
		for _, p := range part {
			require.NotContains(t, parts, p, "run by two shards")
		}
		parts = append(parts, part...)
	}
	require.ElementsMatch(t, whole, parts)
}

// TestShardRuns: shard I of N runs the plans of index I mod N; the whole
// search, every plan.
func TestShardRuns(t *testing.T) {
	sh, err := ParseShard("2/5")
	require.NoError(t, err)
	require.True(t, sh.runs(7) && sh.runs(2) && !sh.runs(5))
	require.True(t, Shard{}.runs(5) && Shard{Index: 0, Count: 1}.runs(5))
}
