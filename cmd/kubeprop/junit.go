package main

import (
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// junitReport is a JUnit XML report, the format CI systems show test
// results from: one test case per spec run, or per scenario replayed.
type junitReport struct {
	path  string
	suite string
	cases []junitCase
	took  time.Duration
}

type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Time       string          `xml:"time,attr"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
}

// junitProperty is a name and value of a suite's properties: a run's
// summary (runSummary), which kubeprop merge adds up.
type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

// junitProblem is a failure (a property failed) or an error (bad input, or
// the harness failed).
type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// newJUnit checks, before any cluster work, that the report can be
// written to path; an empty path is no report.
func newJUnit(path, suite string) (*junitReport, error) {
	if path == "" {
		return nil, nil
	}
	dir := filepath.Dir(path)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("--junit %s: the folder %s does not exist; create it or give another path", path, dir)
	}
	probe, err := os.CreateTemp(dir, ".kubeprop-junit-*")
	if err != nil {
		return nil, fmt.Errorf("--junit %s: the folder %s cannot be written: %w", path, dir, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	return &junitReport{path: path, suite: suite}, nil
}

// add records one test case; a nil report records nothing.
func (r *junitReport) add(c junitCase, took time.Duration) {
	if r == nil {
		return
	}
	c.Classname = r.suite
	c.Time = fmt.Sprintf("%.3f", took.Seconds())
	r.cases = append(r.cases, c)
	r.took += took
}

// write writes the report, with a run's summary in its properties (none
// for the zero summary), whole or not at all (a CI step that reads it
// must not find half a file).
func (r *junitReport) write(sum runSummary) error {
	if r == nil {
		return nil
	}
	suite := junitSuite{Name: r.suite, Tests: len(r.cases), Cases: r.cases, Time: fmt.Sprintf("%.3f", r.took.Seconds())}
	if sum != (runSummary{}) {
		suite.Properties = sum.properties()
	}
	return writeJUnit(r.path, suite)
}

// writeJUnit writes a report of one suite to path, whole or not at all.
func writeJUnit(path string, suite junitSuite) error {
	suite.Tests, suite.Failures, suite.Errors = len(suite.Cases), 0, 0
	for _, c := range suite.Cases {
		if c.Failure != nil {
			suite.Failures++
		}
		if c.Error != nil {
			suite.Errors++
		}
	}
	b, err := xml.MarshalIndent(junitSuites{Suites: []junitSuite{suite}}, "", "  ")
	if err != nil {
		return fmt.Errorf("writing the JUnit report: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append([]byte(xml.Header), append(b, '\n')...), 0o644); err != nil {
		return fmt.Errorf("writing the JUnit report: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing the JUnit report: %w", err)
	}
	return nil
}

// runSummary is what kubeprop run's summary line says; its JUnit report
// keeps it as properties, for kubeprop merge to add up.
type runSummary struct {
	Plans, Again, Failures, ShrinkRuns int64
	// NotJudged: plans that held only because a deadline property could
	// not judge them (a retry the work queue owes past its deadline).
	NotJudged int64
	Seed      uint64
	Shard     string // I/N; empty: the whole search
}

// line is the summary line of a run that took took.
func (s runSummary) line(took time.Duration) string {
	plans := fmt.Sprint(s.Plans, " plans")
	if s.Again > 0 {
		plans += fmt.Sprintf(" (and %d drawn again, not run twice)", s.Again)
	}
	failures := fmt.Sprint(s.Failures, " failures")
	if s.NotJudged > 0 {
		failures += fmt.Sprintf(" (%d plans not judged)", s.NotJudged)
	}
	line := fmt.Sprintf("%s, %s, %d shrink runs, %s, seed %d", plans, failures, s.ShrinkRuns, took.Round(time.Second), s.Seed)
	if s.Shard != "" {
		line += ", shard " + s.Shard
	}
	return line
}

// The properties a run's summary is kept in.
const (
	propPlans      = "kubeprop.plans"
	propAgain      = "kubeprop.drawn-again"
	propFailures   = "kubeprop.failures"
	propShrinkRuns = "kubeprop.shrink-runs"
	propNotJudged  = "kubeprop.not-judged"
	propSeed       = "kubeprop.seed"
	propShard      = "kubeprop.shard"
)

func (s runSummary) properties() []junitProperty {
	props := []junitProperty{
		{propPlans, fmt.Sprint(s.Plans)}, {propAgain, fmt.Sprint(s.Again)}, {propFailures, fmt.Sprint(s.Failures)},
		{propShrinkRuns, fmt.Sprint(s.ShrinkRuns)}, {propNotJudged, fmt.Sprint(s.NotJudged)}, {propSeed, fmt.Sprint(s.Seed)},
	}
	if s.Shard != "" {
		props = append(props, junitProperty{propShard, s.Shard})
	}
	return props
}

// summaryOf reads a run's summary back from its suite's properties; a
// value that does not parse is an error.
func summaryOf(props []junitProperty) (runSummary, error) {
	var s runSummary
	for _, p := range props {
		var err error
		switch p.Name {
		case propPlans:
			s.Plans, err = strconv.ParseInt(p.Value, 10, 64)
		case propAgain:
			s.Again, err = strconv.ParseInt(p.Value, 10, 64)
		case propFailures:
			s.Failures, err = strconv.ParseInt(p.Value, 10, 64)
		case propShrinkRuns:
			s.ShrinkRuns, err = strconv.ParseInt(p.Value, 10, 64)
		case propNotJudged:
			s.NotJudged, err = strconv.ParseInt(p.Value, 10, 64)
		case propSeed:
			s.Seed, err = strconv.ParseUint(p.Value, 10, 64)
		case propShard:
			s.Shard = p.Value
		}
		if err != nil {
			return s, fmt.Errorf("property %s is %q: not a number", p.Name, p.Value)
		}
	}
	return s, nil
}
