package search

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness/internal/lifecycle"
)

// Finding is harness.Finding: see its documentation there.
type Finding struct {
	Failure
	// Plan is the shrunk plan; DrawnSteps the length of the plan that
	// failed first.
	Plan       []faults.Step
	DrawnSteps int
	// Seed is the search's: the same seed draws the same plans (and at
	// Parallel 1 finds the same first failure).
	Seed uint64
	// FailingPlan is the number (from 1) of the failing plan the search
	// took: at Parallel 1, how many plans it took to find the failure.
	FailingPlan int
	// FoundAfter and ShrunkAfter are the times from the start of the
	// search to the first failure and to the last smaller one.
	FoundAfter, ShrunkAfter time.Duration
	// Shrink is where the shrink's time went.
	Shrink ShrinkStats
	// Scenario and Page are the files written: the scenario to replay and
	// the HTML timeline.
	Scenario, Page string
	Report         *Report
}

// Find is harness.Find: see its documentation there.
func Find(env *Env, spec Spec, name string, opts SearchOptions) (*Finding, error) {
	s, err := newSearcher(env, spec, name, opts)
	if err != nil {
		return nil, err
	}
	return s.find(name)
}

// find is Find's search and shrink, by s (its cases stand-ins in tests).
func (s *searcher) find(name string) (*Finding, error) {
	opts := s.opts
	// Nothing a search started outlives it.
	defer s.wait()
	start := time.Now()
	probe, endProbe := context.WithCancel(context.Background())
	index, first, err := s.firstFailingOf(s.plans(probe), "", time.Time{}, 1, true)
	// A probe still running when a failure was found is not needed.
	endProbe()
	if err == nil && first == nil {
		// Every plan passed: a teardown stuck after its pass was told
		// is still the harness's failure, and so is a probe that failed
		// (the plans aimed at what it would have seen were not run).
		s.wait()
		s.mu.Lock()
		err = cmp.Or(s.lateErr, s.probeErr)
		s.mu.Unlock()
	}
	if err != nil || first == nil {
		return nil, err
	}
	failedAt := time.Now()
	drawn := first
	first = s.withoutFaults(first, failedAt.Add(opts.ShrinkTime))
	s.mu.Lock()
	s.shrinking = first.Failures[0].Property
	s.mu.Unlock()
	last, lastAt := s.shrink(first, failedAt.Add(opts.ShrinkTime))
	shrunk := time.Now()
	if lastAt.IsZero() {
		lastAt = failedAt
	}
	// The reports' teardowns end (see searcher.run).
	s.wait()
	if err := s.takeLateErr(); err != nil {
		return nil, err
	}
	f := last.Failures[0]
	finding := &Finding{Failure: f, Plan: last.Plan, DrawnSteps: len(drawn.Plan),
		Seed: opts.Seed, FailingPlan: index + 1, FoundAfter: failedAt.Sub(start), ShrunkAfter: lastAt.Sub(start), Report: last}
	s.mu.Lock()
	finding.Shrink = s.shrinkStats
	s.mu.Unlock()
	finding.Shrink.Took = shrunk.Sub(failedAt)
	finding.Scenario = filepath.Join(opts.Dir, fmt.Sprintf("%s-%d.yaml", f.Property, len(last.Plan)))
	if err := lifecycle.SaveScenarioAt(last, finding.Scenario, name, finding.Shrink.rate()); err != nil {
		return finding, err
	}
	finding.Page = strings.TrimSuffix(finding.Scenario, ".yaml") + ".html"
	if err := lifecycle.WriteHTML(last, finding.Page, name+": "+f.Property); err != nil {
		return finding, err
	}
	return finding, nil
}

// withoutFaults: a failure of the property judged against a reference
// run (properties.Referenced) because that run itself failed property P
// (the controller fails P with the user changes alone) is the failure of
// P by the reference's plan, run as a case; that is the one shrunk.
// Shrunk as the reference property's, it keeps its plan: each candidate
// fails P first, which comes before it (or its own reference fails P
// again). Such a failure is judged at the heal, and often wins the race
// against P's in another case. rep itself when it is not such a failure,
// or when the reference's plan does not fail P as a case by deadline.
func (s *searcher) withoutFaults(rep *Report, deadline time.Time) *Report {
	if rep.Trace == nil {
		return rep
	}
	ref := rep.Trace.Reference
	if p := s.spec.Referenced(); p == nil || p.Name() != rep.Failures[0].Property || ref == nil || ref.FailedProperty == "" {
		return rep
	}
	plan := lifecycle.ReferenceSteps(rep.Plan, lifecycle.WithDefaults(s.spec).Nodes)
	s.mu.Lock()
	s.shrinking = ref.FailedProperty // its candidates' spec (candidateSpec)
	s.mu.Unlock()
	// Run even when it ran in the search (a plan drawn with no fault):
	// it failed the referenced property there, not P.
	_, failed, err := s.firstFailing([][]faults.Step{plan}, ref.FailedProperty, deadline, 2, false)
	if err != nil || failed == nil {
		return rep
	}
	return failed
}

// SearchPlans is harness.SearchPlans: see its documentation there.
func SearchPlans(ctx context.Context, env *Env, spec Spec, opts SearchOptions) ([][]faults.Step, error) {
	s, err := newSearcher(env, spec, "", opts)
	if err != nil {
		return nil, err
	}
	ps := s.plans(ctx)
	<-ps.drawn
	s.wait()
	return ps.plans, nil
}
