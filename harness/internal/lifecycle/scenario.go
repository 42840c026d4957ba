package lifecycle

import (
	"fmt"

	"github.com/kubeprop/kubeprop/harness/scenario"
)

// SaveScenario writes the scenario of the report's first failure to path
// (package scenario): the plan as the case carried it out, the failure
// expected. test is the test that replays it (TestConformance/podset),
// for the header's replay command. Beside it go the controller's log, the
// namespace's events and the final objects (scenario.Evidence).
func (r *Report) SaveScenario(path, test string) error { return r.saveScenario(path, test, 0) }

// saveScenario is SaveScenario with the scenario's expect.rate (0: every
// replay).
func (r *Report) saveScenario(path, test string, rate float64) error {
	f := r.Failures[0]
	s, err := scenario.New(r.Plan, test, scenario.Expect{Outcome: scenario.Fail, Property: f.Property, Message: f.Message, Rate: rate})
	if err != nil {
		return fmt.Errorf("writing scenario %s: %w", path, err)
	}
	if err := s.Write(path); err != nil {
		return err
	}
	return r.SaveEvidence(path)
}

// SaveScenarioAt is SaveScenario, stating the rate at which the failure
// reproduced (0: every time).
func SaveScenarioAt(r *Report, path, test string, rate float64) error {
	return r.saveScenario(path, test, rate)
}
