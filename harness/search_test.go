package harness

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/kubeprop/kubeprop/faults"
)

// TestSearchDrawsRapidsPlans: plan i of a search with seed S is the plan
// rapid.Check draws in its i-th check with -rapid.seed=S, so a seed means
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
