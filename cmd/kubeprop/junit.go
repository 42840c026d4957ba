package main

import (
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
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
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
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

// write writes the report, whole or not at all (a CI step that reads it
// must not find half a file).
func (r *junitReport) write() error {
	if r == nil {
		return nil
	}
	suite := junitSuite{Name: r.suite, Tests: len(r.cases), Cases: r.cases, Time: fmt.Sprintf("%.3f", r.took.Seconds())}
	for _, c := range r.cases {
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
	tmp := r.path + ".tmp"
	if err := os.WriteFile(tmp, append([]byte(xml.Header), append(b, '\n')...), 0o644); err != nil {
		return fmt.Errorf("writing the JUnit report: %w", err)
	}
	if err := os.Rename(tmp, r.path); err != nil {
		return fmt.Errorf("writing the JUnit report: %w", err)
	}
	return nil
}
