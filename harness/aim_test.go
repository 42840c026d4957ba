package harness_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness"
)

// TestAimedSearch: the probe sees the controller's own writes (not its
// leases or Events) and the resources it watches, and the search's odd plans aim at them: a crash
// after one of those writes, right before a user change; the even plans
// are the unaimed draws of the same seed.
func TestAimedSearch(t *testing.T) {
	t.Parallel()
	spec := widgetSpec(false)
	spec.Faults = []faults.Fault{faults.ScaleChange(faults.ScaleOptions{}), faults.CrashAfterWrite()}
	writes, provoked, watched, err := harness.ProbeWrites(context.Background(), env, spec)
	require.NoError(t, err)
	require.Equal(t, []string{"pods", "widgets"}, watched, "its informers' watches: the widgets and the pods they own")
	// The probe's one user change is a ScaleChange: what the controller
	// wrote after it, it wrote after a ScaleChange.
	require.NotEmpty(t, provoked, "writes: %v", writes)
	for w, names := range provoked {
		require.Contains(t, writes, w)
		require.Equal(t, []string{"ScaleChange"}, names, "%v", w)
	}
	require.Contains(t, writes, faults.WriteMatch{Verb: "create", Resource: "pods"})
	require.Contains(t, writes, faults.WriteMatch{Verb: "update", Resource: "widgets/status"})
	for _, w := range writes {
		require.Contains(t, []string{"pods", "widgets", "widgets/status"}, w.Resource, "writes: %v", writes)
	}

	var mu sync.Mutex
	var plans [][]faults.Step
	const checks = 4
	f, err := harness.Find(env, spec, t.Name(), harness.SearchOptions{Checks: checks, Seed: 7, Parallel: 2, Dir: t.TempDir(),
		OnCase: func(rep *harness.Report) {
			mu.Lock()
			defer mu.Unlock()
			plans = append(plans, rep.Plan)
		}})
	require.NoError(t, err)
	require.Nil(t, f, "a correct controller")
	require.Len(t, plans, checks)
	// A crash the case names by the write it came after (see
	// faults.CrashAfterWriteStep) is the step drawn.
	unnamed := func(plan []faults.Step) string {
		out := slices.Clone(plan)
		for i, s := range out {
			if c, ok := s.(faults.CrashAfterWriteStep); ok {
				out[i] = faults.CrashAfterWriteStep{Writes: c.Writes}
			}
		}
		return faults.FormatPlan(out)
	}
	random := unnamed(spec.Plans().Example(7))
	require.True(t, slices.ContainsFunc(plans, func(p []faults.Step) bool { return unnamed(p) == random }),
		"the first plan is rapid's first draw %s: %v", random, plans)
	aimed := 0
	for _, plan := range plans {
		crashes := 0
		for i, s := range plan[:len(plan)-1] {
			c, ok := s.(faults.CrashAfterWriteStep)
			if !ok || !faults.IsUserChange(plan[i+1]) {
				continue
			}
			// A crash names the write it happened after, or stays as aimed.
			require.Contains(t, writes, faults.WriteMatch{Verb: c.Verb, Resource: c.Resource}, faults.FormatPlan(plan))
			crashes++
		}
		if crashes > 0 {
			aimed++
		}
	}
	require.GreaterOrEqual(t, aimed, checks/2, "plans: %v", plans)
}
