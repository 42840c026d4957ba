package main

import (
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kubeprop/kubeprop/harness"
	"github.com/kubeprop/kubeprop/harness/scenario"
)

// kubeprop merge gathers what the shards of a campaign wrote (each
// kubeprop run --shard's JUnit report and scenario folder) into one: one
// JUnit report, one scenario folder, one summary line. A shard whose
// report is an error, or is missing from a set of shards, makes the
// campaign's exit code 2: a campaign is never a pass for want of a
// shard's word.

func mergeCommand(args []string, stdout, stderr io.Writer) int {
	fs := commandFlags("kubeprop merge", "Usage: kubeprop merge OUT DIR...\n\nMerges what kubeprop run wrote in each DIR (its --junit report, its\nscenarios under testdata/kubeprop/, with their timelines and evidence),\nsuch as the shards of one seed, into the folder OUT: OUT/junit.xml and\nOUT/testdata/kubeprop/. Files whose names clash are renamed, and said so.\nIt ends with run's summary line, of every run together. The exit code is\nthe worst of the runs': 2 if any was a harness error or a shard of the\nset is missing, 1 if any found a failure.\n", stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitPass
		}
		return exitBadInput
	}
	if fs.NArg() < 2 {
		fmt.Fprintf(stderr, "kubeprop merge: give the folder to write and one folder or more to merge, got %d arguments\n", fs.NArg())
		fs.Usage()
		return exitBadInput
	}
	out := fs.Arg(0)
	m := &merger{out: out, log: stderr, names: map[string]bool{}, files: map[string]bool{}}
	for _, dir := range fs.Args()[1:] {
		if err := m.merge(dir); err != nil {
			return badInput(stderr, err)
		}
	}
	code, line, err := m.write()
	if err != nil {
		return badInput(stderr, err)
	}
	fmt.Fprintln(stdout, line)
	return code
}

// merger gathers the runs' reports and scenarios into out.
type merger struct {
	out string
	log io.Writer

	suite junitSuite
	sum   runSummary
	took  time.Duration // the longest run's
	// runs counts the runs merged, seeds and shards are theirs; names
	// are the test cases' names taken, files the scenario files written.
	runs   int
	seeds  []uint64
	shards []harness.Shard
	names  map[string]bool
	files  map[string]bool
}

// merge takes what kubeprop run wrote under dir: the JUnit reports (of
// suite kubeprop.run) and the scenario files, each with the files saved
// beside it. A folder with neither is an error.
func (m *merger) merge(dir string) error {
	absOut, _ := filepath.Abs(m.out)
	var reports, scenarios []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if abs, _ := filepath.Abs(path); d.IsDir() && abs == absOut {
			return filepath.SkipDir // what this merge writes
		}
		switch {
		case d.IsDir():
		case strings.HasSuffix(path, ".xml"):
			if suite, ok := runReport(path); ok {
				reports = append(reports, path)
				m.add(path, suite)
			}
		case strings.HasSuffix(path, ".yaml") && !scenario.IsEvidence(path):
			if _, err := scenario.Read(path); err == nil {
				scenarios = append(scenarios, path)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("merging %s: %w", dir, err)
	}
	if len(reports) == 0 && len(scenarios) == 0 {
		return fmt.Errorf("%s holds no kubeprop output: no JUnit report of kubeprop run (--junit) and no scenario; give the folders the runs wrote to", dir)
	}
	if len(reports) == 0 {
		return fmt.Errorf("%s holds scenarios but no JUnit report of kubeprop run: without it the runs' plans and verdicts are unknown; run each with --junit into the folder", dir)
	}
	for _, path := range scenarios {
		if err := m.copyScenario(dir, path); err != nil {
			return err
		}
	}
	return nil
}

// runReport reads a JUnit report that kubeprop run wrote; ok is false for
// any other file.
func runReport(path string) (junitSuite, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return junitSuite{}, false
	}
	var suites junitSuites
	if xml.Unmarshal(b, &suites) != nil || len(suites.Suites) != 1 || suites.Suites[0].Name != "kubeprop.run" {
		return junitSuite{}, false
	}
	return suites.Suites[0], true
}

// add takes one run's report: its test cases (named with their shard,
// and numbered when a name is taken) and its summary.
func (m *merger) add(path string, suite junitSuite) {
	m.runs++
	sum, err := summaryOf(suite.Properties)
	if err != nil {
		suite.Cases = append(suite.Cases, junitCase{Name: path, Error: &junitProblem{Message: err.Error(), Type: "harness", Text: err.Error()}})
	}
	if sh, err := harness.ParseShard(sum.Shard); err == nil {
		m.shards = append(m.shards, sh)
	}
	if !slices.Contains(m.seeds, sum.Seed) {
		m.seeds = append(m.seeds, sum.Seed)
	}
	m.sum.Plans += sum.Plans
	m.sum.Again += sum.Again
	m.sum.Failures += sum.Failures
	m.sum.ShrinkRuns += sum.ShrinkRuns
	m.sum.NotJudged += sum.NotJudged
	took, _ := strconv.ParseFloat(suite.Time, 64)
	m.took = max(m.took, time.Duration(took*float64(time.Second)))
	for _, c := range suite.Cases {
		if sum.Shard != "" {
			c.Name += " [shard " + sum.Shard + "]"
		}
		if m.names[c.Name] {
			was := c.Name
			for n := 2; m.names[c.Name]; n++ {
				c.Name = fmt.Sprintf("%s (%d)", was, n)
			}
			fmt.Fprintf(m.log, "kubeprop merge: test case %q of %s is named %q: the name was taken\n", was, path, c.Name)
		}
		m.names[c.Name] = true
		m.suite.Cases = append(m.suite.Cases, c)
	}
}

// copyScenario copies the scenario at path (found under dir) and the
// files beside it into OUT/testdata/kubeprop/, under the folder it had
// below its own testdata/kubeprop (a file of the same name there
// already: renamed), its spec path made relative to where it goes.
func (m *merger) copyScenario(dir, path string) error {
	rel, err := filepath.Rel(dir, path)
	if err != nil {
		return err
	}
	if _, below, ok := strings.Cut(filepath.ToSlash(rel), harness.ScenarioDir+"/"); ok {
		rel = filepath.FromSlash(below)
	}
	to := filepath.Join(m.out, harness.ScenarioDir, rel)
	stem := strings.TrimSuffix(to, ".yaml")
	for n := 2; m.files[to]; n++ {
		to = fmt.Sprintf("%s.%d.yaml", stem, n)
	}
	if to != stem+".yaml" {
		fmt.Fprintf(m.log, "kubeprop merge: %s is written as %s: the name was taken\n", path, to)
	}
	m.files[to] = true
	from := strings.TrimSuffix(path, ".yaml")
	log, events, objects := scenario.Evidence(path)
	toLog, toEvents, toObjects := scenario.Evidence(to)
	for src, dst := range map[string]string{path: to, from + ".html": strings.TrimSuffix(to, ".yaml") + ".html", log: toLog, events: toEvents, objects: toObjects} {
		if err := copyFile(src, dst); err != nil && (src == path || !errors.Is(err, fs.ErrNotExist)) {
			return fmt.Errorf("merging %s: %w", path, err)
		}
	}
	s, err := scenario.Read(to)
	if err != nil {
		return err
	}
	if s.Spec == "" {
		return nil
	}
	spec, err := filepath.Abs(filepath.Join(filepath.Dir(path), s.Spec))
	if err != nil {
		return err
	}
	absTo, err := filepath.Abs(filepath.Dir(to))
	if err != nil {
		return err
	}
	if s.Spec, err = filepath.Rel(absTo, spec); err != nil {
		return err
	}
	return s.Rewrite(to)
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// write writes OUT/junit.xml and returns the exit code and summary line
// of the runs together.
func (m *merger) write() (int, string, error) {
	code := exitPass
	if missing := missingShards(m.shards); len(missing) > 0 {
		err := fmt.Sprintf("the campaign is incomplete: no report of shard %s (a shard that did not finish, or a folder not given)", strings.Join(missing, ", "))
		fmt.Fprintf(m.log, "kubeprop merge: %s\n", err)
		m.suite.Cases = append(m.suite.Cases, junitCase{Name: "missing shards", Error: &junitProblem{Message: err, Type: "harness", Text: err}})
	}
	for _, c := range m.suite.Cases {
		switch {
		case c.Error != nil:
			code = exitBadInput
		case c.Failure != nil:
			code = max(code, exitFailed)
		}
	}
	m.suite.Name, m.suite.Time = "kubeprop.run", fmt.Sprintf("%.3f", m.took.Seconds())
	m.sum.Seed = m.seeds[0]
	m.suite.Properties = m.sum.properties()
	if err := os.MkdirAll(m.out, 0o755); err != nil {
		return exitBadInput, "", fmt.Errorf("writing the merged report: %w", err)
	}
	if err := writeJUnit(filepath.Join(m.out, "junit.xml"), m.suite); err != nil {
		return exitBadInput, "", err
	}
	line := m.sum.line(m.took)
	if len(m.seeds) > 1 {
		line = strings.Replace(line, fmt.Sprintf("seed %d", m.seeds[0]), fmt.Sprintf("seeds %v", m.seeds), 1)
	}
	return code, line + fmt.Sprintf(", %d runs merged", m.runs), nil
}

// missingShards names the shards of each count that no report came from.
func missingShards(shards []harness.Shard) []string {
	have := map[harness.Shard]bool{}
	counts := map[int]bool{}
	for _, sh := range shards {
		have[sh], counts[sh.Count] = true, true
	}
	var missing []string
	for _, n := range slices.Sorted(maps.Keys(counts)) {
		for i := range n {
			if sh := (harness.Shard{Index: i, Count: n}); !have[sh] {
				missing = append(missing, sh.String())
			}
		}
	}
	return missing
}
