package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/kubeprop/kubeprop/faults"
)

// ScenarioVersion is the version of the scenario files this harness
// writes and reads.
const ScenarioVersion = 1

// Scenario is a saved plan: readable, editable, and replayed by Replay and
// ReplayDir independently of rapid's bitstream.
type Scenario struct {
	Version int    `json:"version"`
	Test    string `json:"test,omitempty"`
	// Spec is the kubeprop run spec file the scenario was found with,
	// relative to the scenario file: kubeprop replay reads it. Empty for
	// a scenario of a go test.
	Spec   string           `json:"spec,omitempty"`
	Plan   []map[string]any `json:"plan"`
	Expect Expect           `json:"expect"`
}

// Expect says what a replay must see.
type Expect struct {
	// Outcome is "pass" (every property holds: a regression test for a
	// fixed bug) or "fail" (Property fails: a known bug, reproduced).
	Outcome  string `json:"outcome"`
	Property string `json:"property,omitempty"`
	Message  string `json:"message,omitempty"`
}

// Outcomes a scenario may expect.
const (
	OutcomePass = "pass"
	OutcomeFail = "fail"
)

// SaveScenario writes the scenario of the report's first failure to path:
// the plan as the case carried it out, the failure expected. test is the
// test that replays it (TestConformance/podset), for the header's replay
// command.
func (r *Report) SaveScenario(path, test string) error {
	f := r.Failures[0]
	s := Scenario{Version: ScenarioVersion, Test: test,
		Expect: Expect{Outcome: OutcomeFail, Property: f.Property, Message: f.Message}}
	for _, st := range r.Plan {
		m, err := faults.EncodeStep(st)
		if err != nil {
			return fmt.Errorf("writing scenario %s: %w", path, err)
		}
		s.Plan = append(s.Plan, m)
	}
	return writeScenario(path, s)
}

func writeScenario(path string, s Scenario) error {
	b, err := yaml.Marshal(s)
	if err != nil {
		return fmt.Errorf("writing scenario %s: %w", path, err)
	}
	header := fmt.Sprintf("# kubeprop scenario. Replay: go test -run '%s' -kubeprop.replay=%s\n"+
		"# Edit freely; set expect.outcome to pass once the bug is fixed.\n", runPattern(s.Test), path)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("writing scenario %s: %w", path, err)
	}
	return os.WriteFile(path, append([]byte(header), b...), 0o644)
}

// ReadScenario reads and checks a scenario file and decodes its plan with
// the faults spec knows.
func ReadScenario(path string, spec Spec) (Scenario, []faults.Step, error) {
	return readScenario(path, spec.withDefaults().known())
}

// readScenario reads and checks a scenario file and decodes its plan.
func readScenario(path string, known []faults.Fault) (Scenario, []faults.Step, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Scenario{}, nil, fmt.Errorf("reading scenario: %w", err)
	}
	var s Scenario
	if err := yaml.UnmarshalStrict(b, &s); err != nil {
		return s, nil, fmt.Errorf("scenario %s is malformed: %w", path, err)
	}
	if s.Version != ScenarioVersion {
		return s, nil, fmt.Errorf("scenario %s has version %d; this kubeprop reads version %d: rewrite it, or replay it with the kubeprop that wrote it", path, s.Version, ScenarioVersion)
	}
	if len(s.Plan) == 0 {
		return s, nil, fmt.Errorf("scenario %s has an empty plan: list at least one step, e.g. - {fault: NodeLoss, node: 0}", path)
	}
	switch s.Expect.Outcome {
	case OutcomePass:
	case OutcomeFail:
		if s.Expect.Property == "" {
			return s, nil, fmt.Errorf("scenario %s expects a failure but names no expect.property", path)
		}
	default:
		return s, nil, fmt.Errorf("scenario %s: expect.outcome is %q; use %q or %q", path, s.Expect.Outcome, OutcomePass, OutcomeFail)
	}
	plan := make([]faults.Step, len(s.Plan))
	for i, m := range s.Plan {
		if plan[i], err = faults.DecodeStep(m, known); err != nil {
			return s, nil, fmt.Errorf("scenario %s, step %d: %w", path, i+1, err)
		}
	}
	return s, plan, nil
}

// runPattern is the -run pattern that selects the test of that name, and
// no other: ^TestA$ or ^TestA$/^sub$.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}
