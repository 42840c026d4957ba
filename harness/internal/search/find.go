package search

import (
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
	opts = s.opts
	// Nothing a search started outlives it.
	defer s.wait()
	start := time.Now()
	probe, endProbe := context.WithCancel(context.Background())
	index, first, err := s.firstFailingOf(s.plans(probe), "", time.Time{}, 1, true)
	// A probe still running when a failure was found is not needed.
	endProbe()
	if err == nil && first == nil {
		// Every plan passed: a teardown stuck after its pass was told
		// is still the harness's failure.
		s.wait()
		err = s.takeLateErr()
	}
	if err != nil || first == nil {
		return nil, err
	}
	failedAt := time.Now()
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
	finding := &Finding{Failure: f, Plan: last.Plan, DrawnSteps: len(first.Plan),
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
