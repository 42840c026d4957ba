package scenario_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness/scenario"
)

// TestWriteAndRead: a scenario reads back as written, and its header
// gives the command that replays it: go test in the package whose
// testdata holds it, or kubeprop replay when it names its spec file.
func TestWriteAndRead(t *testing.T) {
	t.Chdir(t.TempDir())
	plan := []faults.Step{faults.NodeLossStep{Node: 1}, faults.ScaleChangeStep{Field: "spec.replicas", Value: 0}}
	s, err := scenario.New(plan, "TestConformance/podset", scenario.Expect{Outcome: scenario.Fail, Property: "converges", Message: "PodSet web has 2 of 3"})
	require.NoError(t, err)

	path := filepath.Join("controllers", "testdata", "kubeprop", "TestConformance", "podset", "converges-2.yaml")
	require.NoError(t, s.Write(path))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	first, _, _ := strings.Cut(string(b), "\n")
	require.Equal(t, "# kubeprop scenario. Replay: go test -run '^TestConformance$/^podset$' -kubeprop.replay=testdata/kubeprop/TestConformance/podset/converges-2.yaml", first)

	read, steps, err := scenario.ReadPlan(path, faults.Catalog())
	require.NoError(t, err)
	require.Equal(t, s.Expect, read.Expect)
	require.Equal(t, plan, steps)

	read.Spec = "../spec.yaml"
	require.NoError(t, read.Write("found.yaml"))
	b, err = os.ReadFile("found.yaml")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(b), "# kubeprop scenario. Replay: kubeprop replay found.yaml\n"), string(b))
	// Written at an absolute path (kubeprop run --out /abs), it names no
	// path of this machine: it replays from wherever it is kept.
	abs := filepath.Join(t.TempDir(), "out", "found.yaml")
	require.NoError(t, read.Write(abs))
	b, err = os.ReadFile(abs)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(b), "# kubeprop scenario. Replay: kubeprop replay found.yaml, in this file's folder\n"), string(b))
	require.NotContains(t, string(b), filepath.Dir(abs))
}

// TestReadBadFiles: each problem is named, with its fix.
func TestReadBadFiles(t *testing.T) {
	dir := t.TempDir()
	for text, want := range map[string]string{
		"version: 2\nplan: [{fault: NodeLoss, node: 0}]\nexpect: {outcome: pass}\n":                          "has version 2; this kubeprop reads version 1",
		"version: 1\nplan: []\nexpect: {outcome: pass}\n":                                                    "empty plan",
		"version: 1\nplan: [{fault: NodeLoss, node: 0}]\nexpect: {outcome: fail}\n":                          "names no expect.property",
		"version: 1\nplan: [{fault: NodeLoss, node: 0}]\nexpect: {outcome: maybe}\n":                         `expect.outcome is "maybe"`,
		"version: 1\nplan: [{fault: NodeLoss, node: 0}]\nexpect: {outcome: pass}\nextra: 1\n":                "malformed",
		"version: 1\nplan: [{fault: NodeLost, node: 0}]\nexpect: {outcome: pass}\n":                          "step 1",
		"version: 1\nplan: [{fault: ControllerRestart, into: 150}]\nexpect: {outcome: pass}\n":               "into is 150: give a percentage of the step before, 1-99",
		"version: 1\nplan: [{fault: ControllerRestart, into: 50, staleMs: 2000}]\nexpect: {outcome: pass}\n": "both into (50) and staleMs (2000) are set: give one",
		"version: 1\nplan: [{fault: NodeLoss, node: 0}]\nexpect: {outcome: pass, rate: 0.5}\n":               "a rate is of a failure's replays; remove it",
		"version: 1\nplan: [{fault: NodeLoss, node: 0}]\nexpect: {outcome: fail, property: p, rate: 1.5}\n":  "expect.rate is 1.5; give the least share",
	} {
		path := filepath.Join(dir, "s.yaml")
		require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
		_, _, err := scenario.ReadPlan(path, faults.Catalog())
		require.ErrorContains(t, err, want, text)
	}
	_, err := scenario.Read(filepath.Join(dir, "none.yaml"))
	require.ErrorContains(t, err, "reading scenario")
}

// TestExpectNeeded: how many replays of n must reproduce a failure.
func TestExpectNeeded(t *testing.T) {
	require.Equal(t, 10, scenario.Expect{}.Needed(10), "every replay, unless a rate is stated")
	require.Equal(t, 7, scenario.Expect{Rate: 0.7}.Needed(10))
	require.Equal(t, 4, scenario.Expect{Rate: 0.7}.Needed(5), "3.5 rounds up")
	require.Equal(t, 1, scenario.Expect{Rate: 0.2}.Needed(5))
	require.Equal(t, 1, scenario.Expect{Rate: 0.01}.Needed(1))
}

// TestRewriteKeepsNotes: a scenario rewritten (kubeprop's -update) keeps
// the comments a person wrote below the header, and takes the new
// expectation.
func TestRewriteKeepsNotes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "testdata", "kubeprop", "TestX", "converges-1.yaml")
	s, err := scenario.New([]faults.Step{faults.NodeLossStep{Node: 1}}, "TestX", scenario.Expect{Outcome: scenario.Fail, Property: "converges"})
	require.NoError(t, err)
	require.NoError(t, s.Write(path))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	header, body, ok := strings.Cut(string(b), "fixed.\n")
	require.True(t, ok, "the header's second line ends so:\n%s", b)
	notes := "# The node lost is the one the pod is on.\n# Found on seed 7.\n"
	require.NoError(t, os.WriteFile(path, []byte(header+"fixed.\n"+notes+body), 0o644))

	s.Expect = scenario.Expect{Outcome: scenario.Pass}
	require.NoError(t, s.Rewrite(path))
	b, err = os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, header+"fixed.\n"+notes, string(b)[:len(header)+len("fixed.\n")+len(notes)], "the header, then the notes")
	got, err := scenario.Read(path)
	require.NoError(t, err)
	require.Equal(t, scenario.Pass, got.Expect.Outcome)
	require.Equal(t, 1, strings.Count(string(b), "# kubeprop scenario."), "one header")
}
