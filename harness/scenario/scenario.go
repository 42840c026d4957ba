package scenario

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/kubeprop/kubeprop/faults"
)

// Version is the version of the scenario files this package writes and
// reads.
const Version = 1

// Scenario is a saved plan: readable, editable, and replayed
// independently of rapid's bitstream.
type Scenario struct {
	Version int `json:"version"`
	// Test is the go test that replays the scenario
	// (TestConformance/podset). Empty for a scenario of kubeprop run.
	Test string `json:"test,omitempty"`
	// Spec is the kubeprop run spec file the scenario was found with,
	// relative to the scenario file: kubeprop replay reads it. Empty for
	// a scenario of a go test.
	Spec   string           `json:"spec,omitempty"`
	Plan   []map[string]any `json:"plan"`
	Expect Expect           `json:"expect"`
}

// Expect says what a replay must see.
type Expect struct {
	// Outcome is Pass (every property holds: a regression test for a
	// fixed bug) or Fail (Property fails: a known bug, reproduced).
	Outcome  string `json:"outcome"`
	Property string `json:"property,omitempty"`
	Message  string `json:"message,omitempty"`
	// Rate is, for a failure, the least share of replays that must
	// reproduce it (0.7: 7 of 10), for a bug that shows only when the
	// timing falls right. Zero means every replay.
	Rate float64 `json:"rate,omitempty"`
}

// Share is the least share of replays that must reproduce the failure
// expected: Rate, or 1 when it states none.
func (e Expect) Share() float64 {
	if e.Rate == 0 {
		return 1
	}
	return e.Rate
}

// String is the expectation in a few words: "pass", "fail converges",
// "fail converges at rate 0.33".
func (e Expect) String() string {
	switch {
	case e.Outcome == Pass:
		return "pass"
	case e.Rate > 0:
		return fmt.Sprintf("fail %s at rate %v", e.Property, e.Rate)
	}
	return "fail " + e.Property
}

// Needed is how many of n replays must reproduce the failure expected.
func (e Expect) Needed(n int) int { return int(math.Ceil(e.Share()*float64(n) - 1e-9)) }

// Outcomes a scenario may expect.
const (
	Pass = "pass"
	Fail = "fail"
)

// New is the scenario of a plan, to be replayed by test (empty for
// kubeprop run's), expecting expect.
func New(plan []faults.Step, test string, expect Expect) (Scenario, error) {
	s := Scenario{Version: Version, Test: test, Expect: expect}
	for _, st := range plan {
		m, err := faults.EncodeStep(st)
		if err != nil {
			return s, err
		}
		s.Plan = append(s.Plan, m)
	}
	return s, nil
}

// Write writes the scenario to path, after a header that gives its replay
// command: kubeprop replay for a scenario that names its spec file (the
// file's name alone when path is absolute), go test -run ...
// -kubeprop.replay otherwise, with the path as go test in the test's
// package folder sees it (from the path's testdata folder on).
func (s Scenario) Write(path string) error { return s.write(path, nil) }

// Rewrite writes the scenario over the file at path, as Write does, and
// keeps the comments the file has below Write's header: what a person
// wrote there about the plan.
func (s Scenario) Rewrite(path string) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("rewriting scenario %s: %w", path, err)
	}
	var notes []string
	for _, line := range strings.Split(string(old), "\n") {
		if !strings.HasPrefix(line, "#") {
			break
		}
		if !strings.HasPrefix(line, headerStart) && !strings.HasPrefix(line, headerEdit) {
			notes = append(notes, line+"\n")
		}
	}
	return s.write(path, notes)
}

// write writes the scenario to path: the header, notes, the YAML.
func (s Scenario) write(path string, notes []string) error {
	b, err := yaml.Marshal(s)
	if err != nil {
		return fmt.Errorf("writing scenario %s: %w", path, err)
	}
	replay := "kubeprop replay " + path
	if filepath.IsAbs(path) {
		// No path of the machine that wrote it: the file may be kept
		// anywhere (its spec path is relative to it).
		replay = "kubeprop replay " + filepath.Base(path) + ", in this file's folder"
	}
	if s.Spec == "" {
		replay = fmt.Sprintf("go test -run '%s' -kubeprop.replay=%s", RunPattern(s.Test), packagePath(path))
	}
	header := headerStart + replay + "\n" + headerEdit + "set expect.outcome to pass once the bug is fixed.\n"
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("writing scenario %s: %w", path, err)
	}
	if err := os.WriteFile(path, []byte(header+strings.Join(notes, "")+string(b)), 0o644); err != nil {
		return fmt.Errorf("writing scenario %s: %w", path, err)
	}
	return nil
}

// The lines of Write's header.
const (
	headerStart = "# kubeprop scenario. Replay: "
	headerEdit  = "# Edit freely; "
)

// packagePath is a relative scenario path as seen from the folder of the
// test package whose testdata holds it: controllers/testdata/kubeprop/x.yaml
// is testdata/kubeprop/x.yaml to go test ./controllers. Other paths are
// returned as they are.
func packagePath(path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	parts := strings.Split(filepath.ToSlash(path), "/")
	if i := slices.Index(parts, "testdata"); i > 0 {
		return filepath.FromSlash(strings.Join(parts[i:], "/"))
	}
	return path
}

// Read reads and checks a scenario file: its version, a plan of at least
// one entry, its expectation. The plan's steps are decoded by Steps.
func Read(path string) (Scenario, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Scenario{}, fmt.Errorf("reading scenario: %w", err)
	}
	var s Scenario
	if err := yaml.UnmarshalStrict(b, &s); err != nil {
		return s, fmt.Errorf("scenario %s is malformed: %w", path, err)
	}
	if s.Version != Version {
		return s, fmt.Errorf("scenario %s has version %d; this kubeprop reads version %d: rewrite it, or replay it with the kubeprop that wrote it", path, s.Version, Version)
	}
	if len(s.Plan) == 0 {
		return s, fmt.Errorf("scenario %s has an empty plan: list at least one step, e.g. - {fault: NodeLoss, node: 0}", path)
	}
	switch s.Expect.Outcome {
	case Pass:
	case Fail:
		if s.Expect.Property == "" {
			return s, fmt.Errorf("scenario %s expects a failure but names no expect.property", path)
		}
	default:
		return s, fmt.Errorf("scenario %s: expect.outcome is %q; use %q or %q", path, s.Expect.Outcome, Pass, Fail)
	}
	switch {
	case s.Expect.Rate != 0 && s.Expect.Outcome == Pass:
		return s, fmt.Errorf("scenario %s expects every property to hold and states expect.rate: a rate is of a failure's replays; remove it", path)
	case s.Expect.Rate < 0 || s.Expect.Rate > 1:
		return s, fmt.Errorf("scenario %s: expect.rate is %v; give the least share of replays that must fail, above 0 and at most 1 (0.7: 7 of 10)", path, s.Expect.Rate)
	}
	return s, nil
}

// Steps decodes the plan with the faults known (a spec's faults and the
// catalog); path names the file in errors.
func (s Scenario) Steps(path string, known []faults.Fault) ([]faults.Step, error) {
	plan := make([]faults.Step, len(s.Plan))
	for i, m := range s.Plan {
		var err error
		if plan[i], err = faults.DecodeStep(m, known); err != nil {
			return nil, fmt.Errorf("scenario %s, step %d: %w", path, i+1, err)
		}
	}
	return plan, nil
}

// ReadPlan reads a scenario file (Read) and decodes its plan (Steps).
func ReadPlan(path string, known []faults.Fault) (Scenario, []faults.Step, error) {
	s, err := Read(path)
	if err != nil {
		return s, nil, err
	}
	plan, err := s.Steps(path, known)
	return s, plan, err
}

// RunPattern is the go test -run pattern that selects the test of that
// name, and no other: ^TestA$ or ^TestA$/^sub$.
func RunPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// Evidence are the files saved beside a scenario at path (name.yaml): the
// controller's log (name.log), the namespace's events (name.events.yaml)
// and the final objects (name.objects.yaml).
func Evidence(path string) (log, events, objects string) {
	base := strings.TrimSuffix(path, filepath.Ext(path))
	return base + ".log", base + eventsSuffix, base + objectsSuffix
}

const (
	eventsSuffix  = ".events.yaml"
	objectsSuffix = ".objects.yaml"
)

// IsEvidence reports whether path is a file saved beside a scenario
// (Evidence), not a scenario: a folder of scenarios holds both.
func IsEvidence(path string) bool {
	return strings.HasSuffix(path, eventsSuffix) || strings.HasSuffix(path, objectsSuffix)
}
