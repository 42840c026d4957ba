package controllers_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubeprop/kubeprop/controllers/suite"
	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness"
	"github.com/kubeprop/kubeprop/harness/scenario"
	"github.com/kubeprop/kubeprop/internal/browser"
)

var (
	env *harness.Env
	// userChecks: -kubeprop.checks (or KUBEPROP_CHECKS) was given; otherwise a
	// correct target gets 5 checks and a bug's search up to 20 plans.
	userChecks bool
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard()) // the client-go controller reports its errors through klog
	flag.Parse()
	// A case takes seconds: unless told otherwise, draw 5 plans per check
	// and give shrinking 3 minutes (under -race on 2 cores a case that
	// waits for quiescence or a convergence deadline takes 20-40 s, two
	// run at a time, and a candidate kept has its confirming run in one
	// of the two slots).
	userChecks = os.Getenv("KUBEPROP_CHECKS") != "" || flagSet("kubeprop.checks")
	if !userChecks {
		_ = flag.Set("kubeprop.checks", "5")
	}
	if os.Getenv("KUBEPROP_SHRINKTIME") == "" && !flagSet("kubeprop.shrinktime") {
		_ = flag.Set("kubeprop.shrinktime", "3m")
	}
	// Three targets at a time (unless -parallel says otherwise): most of
	// a bug's search is a deadline waited out (a convergence failure
	// waits 30 s), so a third search costs little CPU, and two at a time
	// made this package alone take 16 minutes.
	if !flagSet("test.parallel") {
		_ = flag.Set("test.parallel", "3")
	}
	env = harness.MustStart(harness.EnvOptions{TimeScale: suite.TimeScale, CRDDirectoryPaths: []string{filepath.Join("..", suite.CRDs)}})
	code := m.Run()
	if pages != nil {
		pages.Close()
	}
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the hollow cluster:", err)
		code = 1
	}
	os.Exit(code)
}

// searchOptions are Check's options (harness.SearchOptionsFromFlags) with
// one difference: without -kubeprop.seed (or KUBEPROP_SEED) the seed is 1, not a
// random one. The suite gates every landing: it draws the same plans on
// every run, and a bug missed or a false alarm is not down to the luck of
// a draw (make bench measures detection over several seeds).
func searchOptions(t testing.TB) harness.SearchOptions {
	o, err := harness.SearchOptionsFromFlags()
	require.NoError(t, err)
	if o.Seed == 0 {
		o.Seed = 1
	}
	return o
}

func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// TestConformance checks every target: the correct controllers pass their
// checks; each seeded bug is found, by the expected property, and shrunk
// to at most its minimal plan. The search for a bug is focused (it draws
// from the faults that reveal the bug): a search of every fault takes
// minutes per bug, and is make demo's and make bench's.
func TestConformance(t *testing.T) {
	for _, target := range searchOrder(suite.Targets()) {
		t.Run(target.Name, func(t *testing.T) {
			// Check replays the scenario of -kubeprop.replay, when given.
			if flag.Lookup("kubeprop.replay").Value.String() != "" {
				harness.CheckWith(t, env, target.Spec, searchOptions(t))
				return
			}
			// Three targets at a time (see TestMain), the correct ones
			// first: a correct target must pass beside another's search
			// as the bugs' searches run beside each other (a false alarm
			// under load is a harness bug).
			t.Parallel()
			if target.Correct() {
				harness.CheckWith(t, env, target.Spec, searchOptions(t))
				return
			}
			opts := searchOptions(t)
			if !userChecks {
				opts.Checks = 20
			}
			opts.Dir = t.TempDir() // the scenario and timeline go there
			opts = target.SearchOptions(opts)
			f, err := harness.Find(env, target.Focused(), t.Name(), opts)
			require.NoError(t, err)
			require.NotNil(t, f, "the bug was not found in %d plans of seed %d", opts.Checks, opts.Seed)
			t.Logf("%s: %s\nplan (shrunk from %d to %d steps): %s\nfound after %v (plan %d), shrunk after %v\nshrink %s",
				f.Property, f.Message, f.DrawnSteps, len(f.Plan), faults.FormatPlan(f.Plan), f.FoundAfter, f.FailingPlan, f.ShrunkAfter, f.Shrink)
			require.Equal(t, target.Property, f.Property, "the bug was caught by another property: %s", f.Message)
			require.LessOrEqual(t, len(f.Plan), target.ExpectSteps, "not shrunk to %d steps (the minimum is %d): %s",
				target.ExpectSteps, target.MinSteps, faults.FormatPlan(f.Plan))
			// What a maintainer reads: the timeline page shows the
			// failure's evidence, and the controller's log, the events
			// and the objects sit beside the scenario.
			page := inspectPage(t, f.Page)
			require.Empty(t, page.Problems(1280), "the timeline page %s does not fit 1280 px", f.Page)
			require.Positive(t, page.EvidenceMarks[f.Property], "the timeline page %s draws no evidence of %s", f.Page, f.Property)
			require.Positive(t, page.EvidenceListed[f.Property], "the timeline page %s lists no evidence of %s", f.Page, f.Property)
			logFile, eventsFile, objectsFile := scenario.Evidence(f.Scenario)
			for _, path := range []string{logFile, eventsFile, objectsFile} {
				require.FileExists(t, path)
			}
		})
	}
}

// pages is the Chromium the seeded bugs' timeline pages are checked in,
// started by the first.
var (
	pages      *browser.Browser
	pagesErr   error
	pagesStart sync.Once
)

func inspectPage(t *testing.T, path string) browser.Page {
	pagesStart.Do(func() { pages, pagesErr = browser.Start(context.Background()) })
	require.NoError(t, pagesErr, "the seeded bugs' timeline pages are checked in Chromium")
	page, err := pages.Inspect(path, 1280)
	require.NoError(t, err)
	return page
}

// searchOrder puts the correct targets first, then the seeded bugs from
// the last to the first: the stateful operator's, whose cases take
// longest, start early, and the last ones, which alone set how long the
// test runs after the others end, is of short searches.
func searchOrder(targets []suite.Target) []suite.Target {
	var correct, bugs []suite.Target
	for _, t := range targets {
		if t.Correct() {
			correct = append(correct, t)
		} else {
			bugs = append(bugs, t)
		}
	}
	slices.Reverse(bugs)
	return append(correct, bugs...)
}

func scenarioDir(target suite.Target) string {
	return filepath.Join(harness.ScenarioDir, "TestConformance", target.Name)
}

// TestSavedScenarios replays the scenario saved for each seeded bug (by
// make demo, under testdata/kubeprop/<controller>/): each must fail as it
// says, on every go test. The scenarios saved for a correct target are
// false alarms once found and fixed: each must pass. One at a time first:
// the correct targets' (they judge timing) and the bugs' caught by
// bounded-backoff, whose verdict depends on the machine's speed (beside
// another replay under -race, clientgonobackoff's thirty refused writes
// passed once: the kubelet's pod writes, news to the controller, cut the
// streak of retries short). Then the other bugs' three at a time (go test
// -parallel): most of their time is a deadline waited out.
func TestSavedScenarios(t *testing.T) {
	for _, target := range suite.Targets() {
		t.Run(target.Name, func(t *testing.T) {
			dir := scenarioDir(target)
			if target.Correct() {
				harness.ReplayDir(t, env, target.Spec, dir)
				return
			}
			if target.Property != "bounded-backoff" {
				t.Parallel()
			}
			files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
			require.NoError(t, err)
			require.NotEmpty(t, files, "no saved scenario for %s: run make demo DEMO_FLAGS='-only %s' and commit %s", target.Name, target.Name, dir)
			harness.ReplayDir(t, env, target.Spec, dir)
		})
	}
}
