package harness

import (
	"strings"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness/internal/lifecycle"
	"github.com/kubeprop/kubeprop/harness/scenario"
)

// Check draws fault plans and runs each on env; a property failure is
// shrunk to a minimal plan, printed with its timeline, saved as a scenario
// file and given a replay command. It searches with the flags
// -kubeprop.checks, -kubeprop.seed, -kubeprop.shrinktime and
// -kubeprop.parallel (and -kubeprop.shard), and their KUBEPROP_* twins
// (SearchOptionsFromFlags); CheckWith takes the options as a value. With
// -kubeprop.replay=FILE it replays that scenario instead; with
// -kubeprop.list it logs the plans it would run (ListPlans), and runs none.
func Check(t TB, env *Env, spec Spec) {
	t.Helper()
	opts, err := SearchOptionsFromFlags()
	if err != nil {
		t.Fatal(err)
	}
	for _, ignored := range ignoredRapidFlags() {
		t.Logf("kubeprop: %s", ignored)
	}
	CheckWith(t, env, spec, opts)
}

// CheckWith is Check with the search's options given.
func CheckWith(t TB, env *Env, spec Spec, opts SearchOptions) {
	t.Helper()
	spec, err := lifecycle.Checked(spec)
	if err != nil {
		t.Fatal(err)
	}
	if *replayFlag != "" {
		replay(t, env, spec, *replayFlag, true, *replayCountFlag)
		return
	}
	if listing() {
		list, err := ListPlans(spec, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("kubeprop: -kubeprop.list: the plans of %s (none is run):\n%s", t.Name(), list)
		return
	}
	f, err := Find(env, spec, t.Name(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if f != nil {
		log, events, objects := scenario.Evidence(f.Scenario)
		t.Errorf("kubeprop: %s\n    plan (shrunk from %d to %d steps): %s\n    seed:     %d\n    timeline:\n      %s\n    timeline: %s\n    scenario: %s\n    log:      %s\n    events:   %s\n    objects:  %s\n    replay:   go test -run '%s' -kubeprop.replay=%s",
			f.Message, f.DrawnSteps, len(f.Plan), faults.FormatPlan(f.Plan), f.Seed,
			strings.Join(f.Report.Timeline, "\n      "), f.Page, f.Scenario, log, events, objects, scenario.RunPattern(t.Name()), f.Scenario)
		t.FailNow()
	}
}
