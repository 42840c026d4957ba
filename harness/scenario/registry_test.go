package scenario

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubeprop/kubeprop/faults"
)

// TestRegistryHasTheCatalog: every fault of the catalog can be named in a
// spec file; a fault added to faults.Catalog() and not here fails.
func TestRegistryHasTheCatalog(t *testing.T) {
	for _, f := range faults.Catalog() {
		require.Contains(t, FaultNames(), f.Name(), "the spec files' registry lacks %s", f.Name())
		built, err := Faults([]map[string]any{{"fault": f.Name()}})
		require.NoError(t, err, f.Name())
		require.Equal(t, f.Name(), built[0].Name())
	}
	require.Contains(t, FaultNames(), "UserChange")
}

func TestRegistryBuildsUserOperations(t *testing.T) {
	fs, err := Faults([]map[string]any{
		{"fault": "UserChange", "name": "StorageChange", "field": "spec.storage", "values": []any{"1Gi", "2Gi"}},
		{"fault": "UserChange", "name": "ImageChange", "patches": []any{map[string]any{"spec": map[string]any{"image": "db:2"}}}},
		{"fault": "Burst"},
		{"fault": "Burst", "of": []any{"StorageChange", map[string]any{"fault": "ScaleChange", "max": 4}}},
		{"fault": "ScaleChange"},
		{"fault": "NodeLoss"},
		{"fault": "Recreate"},
	})
	require.NoError(t, err)
	require.Equal(t, []string{"StorageChange", "ImageChange", "Burst", "Burst", "ScaleChange", "NodeLoss", "Recreate"},
		[]string{fs[0].Name(), fs[1].Name(), fs[2].Name(), fs[3].Name(), fs[4].Name(), fs[5].Name(), fs[6].Name()})
	cfg := faults.Config{Nodes: 3, Fixtures: 1}
	require.Regexp(t, `^StorageChange\{Object: 0, Patch: \{"spec":\{"storage":"[12]Gi"\}\}\}$`, faults.Format(fs[0].Steps(cfg).Example(0)))
	require.Equal(t, `ImageChange{Object: 0, Patch: {"spec":{"image":"db:2"}}}`, faults.Format(fs[1].Steps(cfg).Example(0)))

	// The burst with no `of` draws the spec's user changes, NodeLoss
	// not among them; the named one only its own.
	names := map[int]map[string]bool{2: {}, 3: {}}
	for seed := range 200 {
		for i := range names {
			for _, st := range fs[i].Steps(cfg).Example(seed).(faults.BurstStep).Steps {
				names[i][st.Fault()] = true
			}
		}
	}
	require.Equal(t, map[string]bool{"StorageChange": true, "ImageChange": true, "ScaleChange": true, "Recreate": true}, names[2])
	require.Equal(t, map[string]bool{"StorageChange": true, "ScaleChange": true}, names[3])

	// A scenario's burst of the spec's own change decodes with the spec's
	// faults.
	step := fs[3].Steps(cfg).Example(1)
	s, err := New([]faults.Step{step}, "", Expect{Outcome: Pass})
	require.NoError(t, err)
	plan, err := s.Steps("x.yaml", append(fs, faults.Catalog()...))
	require.NoError(t, err)
	require.Equal(t, step, plan[0])
}

func TestRegistryBadInput(t *testing.T) {
	for _, c := range []struct {
		entry map[string]any
		err   string
	}{
		{map[string]any{"fault": "NodeExplode"}, `faults[0]: unknown fault "NodeExplode"; the known faults are APIErrors, Burst, ChildDelete`},
		{map[string]any{"fault": "NodeLoss", "node": 1}, "faults[0]: NodeLoss: takes no options"},
		{map[string]any{"fault": "UserChange", "name": "X"}, "give the change: field with values"},
		{map[string]any{"fault": "UserChange", "field": "spec.size"}, "UserChange: no values for spec.size"},
		{map[string]any{"fault": "UserChange", "name": "ScaleChange", "field": "spec.x", "values": []any{1}}, `name "ScaleChange" is a fault of the catalog's`},
		{map[string]any{"fault": "UserChange", "field": "spec.x", "values": []any{1}, "patches": []any{map[string]any{}}}, "not both"},
		{map[string]any{"fault": "Burst", "of": []any{"StorageChange"}}, `of[0]: "StorageChange" is none of the spec's faults`},
		{map[string]any{"fault": "Burst", "of": []any{map[string]any{"fault": "NodeLoss"}}}, "Burst: NodeLoss is not a user change"},
		{map[string]any{"fault": "Burst", "of": []any{7}}, "of[0]: give a fault's name or an entry"},
		{map[string]any{"fault": "ScaleChange", "feild": "spec.replicas"}, `unknown field "feild"`},
	} {
		_, err := Faults([]map[string]any{c.entry})
		require.ErrorContains(t, err, c.err, "%v", c.entry)
	}
}
