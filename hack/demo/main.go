// Command demo runs kubeprop's conformance suite on the bundled
// controllers (controllers/suite) on the hollow cluster and prints a
// table: for each controller, pass, or the property that failed with the
// shrunk plan and the command that replays it. Scenarios go to
// reports/scenarios/<controller>/, HTML timelines to reports/ with a PNG
// screenshot of each (when Chromium is installed); the suite's
// own saved scenarios (controllers/testdata/kubeprop/TestConformance/),
// which make test replays, are left as they are.
//
// Run it from the repository's root: make demo. Flags: -only NAME,
// -checks (plans per controller), -shrinktime, -seed, -parallel (cases at
// once in all) are the search's settings, named and defaulted as go
// test's -kubeprop.* flags (make demo gives -checks 20 -shrinktime 2m);
// -targets (controllers searched at once, sharing -parallel), -reference
// (add matches-reference to every target's properties, default true);
// -seeds N measures detection over N seeds instead (make bench, which
// searches as go test does: without matches-reference); -memprofile FILE
// writes what the run still holds at its end; -generic judges with the
// general properties alone and matches-reference (how far the oracle goes
// with no predicate).
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubeprop/kubeprop/controllers/suite"
	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness"
	"github.com/kubeprop/kubeprop/internal/browser"
	"github.com/kubeprop/kubeprop/properties"
)

func main() {
	only := flag.String("only", "", "run only the controller of this name, or those whose name contains this (a comma-separated list: any of these)")
	seeds := flag.Int("seeds", 0, "instead of the demo, measure detection over seeds 1..N (make bench)")
	flag.BoolVar(&focused, "focused", false, "search each bug with the faults that reveal it only, as go test does")
	memProfile := flag.String("memprofile", "", "write a heap profile of what the run still holds at its end to this file")
	// -checks, -seed, -shrinktime and -parallel, as go test's -kubeprop.*
	// flags name them, with the same defaults (make demo gives -checks 20).
	settings := harness.SearchFlags(flag.CommandLine, "")
	flag.IntVar(&targetsAtOnce, "targets", 4, "controllers searched at once; they share -parallel (the demo only: the bench searches one at a time)")
	flag.BoolVar(&reference, "reference", true, "the demo only: judge every case against its reference run too (properties.MatchesReference), the oracle that needs no predicate")
	flag.BoolVar(&generic, "generic", false, "the demo only: judge with the general properties alone (the targets' own predicates left out; matches-reference in, whatever -reference says)")
	flag.Parse()
	if testFlags := goTestFlags(flag.CommandLine); len(testFlags) > 0 {
		fmt.Fprintf(os.Stderr, "demo: %s: go test's flags, which the demo does not read: it takes -checks, -seed, -shrinktime and -parallel; "+
			"a scenario it saved replays with the command its table prints (go test ./controllers -run '^TestConformance$/^NAME$' -kubeprop.replay=FILE)\n",
			strings.Join(testFlags, ", "))
		os.Exit(2)
	}
	var err error
	if search, err = settings(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(2)
	}
	ctrllog.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	os.Exit(run(*only, *seeds, *memProfile))
}

// goTestFlags are the flags given of go test's -kubeprop.* and -rapid.*:
// the harness and rapid register them in every binary that imports them,
// and the demo reads none (one given would pass unheard).
func goTestFlags(fs *flag.FlagSet) []string {
	var given []string
	fs.Visit(func(f *flag.Flag) {
		if strings.HasPrefix(f.Name, "kubeprop.") || strings.HasPrefix(f.Name, "rapid.") {
			given = append(given, "-"+f.Name)
		}
	})
	return given
}

// writeHeapProfile writes the heap in use after a collection: what a long
// run keeps from case to case.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing the heap profile: %w", err)
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("writing the heap profile: %w", err)
	}
	return f.Close()
}

// focused: search the bugs with their revealing faults only.
var focused bool

// search are the options of every search, from the flags.
var search harness.SearchOptions

// targetsAtOnce is how many targets the demo searches at once.
var targetsAtOnce int

// reference: the demo adds matches-reference to every target's properties.
var reference bool

// generic: the demo judges with the general properties alone.
var generic bool

// generalProperties are the properties that hold of every controller,
// with no predicate of its own.
var generalProperties = []string{"bounded-backoff", "no-fight-loop", "quiescent", "no-panics"}

// specOf is the Spec a target is searched with.
func specOf(t suite.Target) harness.Spec {
	if focused {
		return t.Focused()
	}
	return t.Spec
}

// withReference is spec with matches-reference after its own properties:
// a bug's own property, where both fail after the heal, is the one
// reported.
func withReference(spec harness.Spec) harness.Spec {
	spec.Properties = append(slices.Clip(spec.Properties), properties.MatchesReference(properties.ReferenceOptions{}))
	return spec
}

func run(only string, seeds int, memProfile string) (code int) {
	env, err := harness.Start(harness.EnvOptions{TimeScale: suite.TimeScale, CRDDirectoryPaths: []string{suite.CRDs}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 2
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "demo: stopping the hollow cluster:", err)
		}
	}()
	if memProfile != "" {
		// Before the cluster stops: what the harness keeps while it runs.
		defer func() {
			if err := writeHeapProfile(memProfile); err != nil {
				fmt.Fprintln(os.Stderr, "demo:", err)
				code = max(code, 1)
			}
		}()
	}
	if seeds > 0 {
		return bench(env, only, seeds)
	}
	reports, err := filepath.Abs("reports")
	if err == nil {
		err = os.MkdirAll(reports, 0o755)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 2
	}
	if search.Seed == 0 {
		// One seed for every target, named in the summary: the same
		// command with -seed draws the same plans.
		search.Seed = rand.Uint64N(1_000_000) + 1
	}
	d := &demo{start: time.Now(), seed: search.Seed}
	// A screenshot beside each timeline page, for a glance.
	if b, err := browser.Start(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "demo: no screenshots of the timeline pages: %v\n", err)
	} else {
		d.browser = b
		defer b.Close()
	}
	// ^C prints what is done so far; the cluster stops with the process
	// (its watchdog stops the processes of a search cut short).
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		sig := <-sigs
		fmt.Fprintf(os.Stderr, "demo: %v: the targets done so far\n", sig)
		d.print(true)
		if d.browser != nil {
			d.browser.Close()
		}
		_ = env.Stop()
		os.Exit(130)
	}()
	// Targets side by side, each with its share of the cases at once: a
	// search that finds nothing waits on its slowest case, and a shrink
	// pass on its candidates before the one it takes.
	parallel := search.Parallel
	if parallel == 0 {
		parallel = harness.DefaultParallel()
	}
	atOnce := make(chan struct{}, max(1, targetsAtOnce))
	var wg sync.WaitGroup
	targets := suite.Targets()
	for i, target := range targets {
		if !selected(target, targets, only) {
			continue
		}
		atOnce <- struct{}{}
		wg.Go(func() {
			defer func() { <-atOnce }()
			d.target(env, target, reports, i, max(1, parallel/cap(atOnce)))
		})
	}
	wg.Wait()
	return d.print(false)
}

// demo is the table of a demo run, a row per target as each ends.
type demo struct {
	start   time.Time
	seed    uint64
	browser *browser.Browser // nil without Chromium

	mu   sync.Mutex
	rows []row
}

// A target's outcome. A seeded bug that the search missed, or caught by
// another property or at more steps than its minimum, is a finding about
// the search, shown in the table and the summary line; a failure of a
// correct target (a false alarm: a harness bug until shown otherwise) or
// an error of the harness is the run's failure.
const (
	passed        = "pass"
	caught        = "caught"
	missed        = "missed"
	caughtAnother = "caught otherwise"
	falseAlarm    = "false alarm"
	harnessError  = "error"
)

type row struct {
	cells string // tab-separated
	// outcome is one of the outcomes above.
	outcome string
	order   int // the target's place in the suite
}

// target searches one target, parallel cases at once, printing each
// case as it ends.
func (d *demo) target(env *harness.Env, target suite.Target, reports string, order, parallel int) {
	fmt.Fprintf(os.Stderr, "demo: %s ...\n", target.Name)
	start := time.Now()
	opts := target.SearchOptions(search)
	opts.Parallel = parallel
	// Beside the timelines, not over the suite's saved scenarios: those
	// are what make test replays, and a searched one may reproduce only
	// when the timing falls right. Absolute, so that the replay command
	// in the file's header works from any folder.
	scenarios := filepath.Join("scenarios", target.Name) // under reports/
	opts.Dir = filepath.Join(reports, scenarios)
	opts.OnCase = caseLines("demo: "+target.Name, nil)
	spec := specOf(target)
	if generic {
		spec.Properties = slices.DeleteFunc(slices.Clone(spec.Properties), func(p properties.Property) bool {
			return !slices.Contains(generalProperties, p.Name())
		})
	}
	if reference || generic {
		spec = withReference(spec)
	}
	f, err := harness.Find(env, spec, "TestConformance/"+target.Name, opts)
	expected := "pass"
	if !target.Correct() {
		expected = fmt.Sprintf("fail %s (minimum %d steps)", target.Property, target.MinSteps)
	}
	var r row
	switch {
	case err != nil:
		r = row{fmt.Sprintf("%s\t%s\tERROR %v\t\t\t\t", target.Name, expected, err), harnessError, order}
	case f == nil:
		r = row{fmt.Sprintf("%s\t%s\tpass\t\t%v\t\t", target.Name, expected, time.Since(start).Round(time.Second)), passed, order}
		if !target.Correct() {
			r = row{fmt.Sprintf("%s\t%s\tMISSED: passed\t\t%v\t\t", target.Name, expected, time.Since(start).Round(time.Second)), missed, order}
		}
	default:
		page := filepath.Join(reports, target.Name+".html")
		if err := os.Rename(f.Page, page); err != nil {
			page = f.Page
		}
		result, outcome := "fail "+f.Property, caught
		// The reference run's oracle catching a bug is the catch it is
		// there for.
		byItsProperty := f.Property == target.Property || !target.Correct() && (f.Property == properties.MatchesReferenceName || generic)
		switch {
		case target.Correct():
			result, outcome = "FALSE ALARM: "+result, falseAlarm
		case !byItsProperty || len(f.Plan) > target.ExpectSteps:
			result, outcome = "UNEXPECTED: "+result, caughtAnother
		}
		r = row{fmt.Sprintf("%s\t%s\t%s\t%s\t%v\t%v\tgo test ./controllers -run '^TestConformance$/^%s$' -kubeprop.replay=%s",
			target.Name, expected, result, faults.FormatPlan(f.Plan),
			f.FoundAfter.Round(time.Second), f.ShrunkAfter.Round(time.Second), target.Name, filepath.Join("..", "reports", scenarios, filepath.Base(f.Scenario))), outcome, order}
		if d.browser != nil {
			if err := d.browser.Screenshot(page, strings.TrimSuffix(page, ".html")+".png", 1280); err != nil {
				fmt.Fprintf(os.Stderr, "demo: %s: %v\n", target.Name, err)
			}
		}
		fmt.Fprintf(os.Stderr, "demo: %s: %s; timeline %s\ndemo: %s: shrink %s\n", target.Name, f.Message, page, target.Name, f.Shrink)
	}
	d.mu.Lock()
	d.rows = append(d.rows, r)
	d.mu.Unlock()
}

// print writes the table and the summary line, and returns the exit
// code: 1 when a correct target failed or the harness did, not for what
// the search missed.
func (d *demo) print(interrupted bool) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	table := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(table, "controller\texpected\tresult\tshrunk plan\tfound\tshrunk\treplay")
	count := map[string]int{}
	slices.SortFunc(d.rows, func(a, b row) int { return a.order - b.order })
	for _, r := range d.rows {
		fmt.Fprintln(table, r.cells)
		count[r.outcome]++
	}
	_ = table.Flush()
	cut := ""
	if interrupted {
		cut = " (interrupted)"
	}
	fmt.Printf("%d targets%s, %d pass, %d caught as expected, %d missed, %d caught otherwise, %d false alarms, %d errors, %v, seed %d\n", len(d.rows), cut,
		count[passed], count[caught], count[missed], count[caughtAnother], count[falseAlarm], count[harnessError], time.Since(d.start).Round(time.Second), d.seed)
	if count[falseAlarm]+count[harnessError] > 0 {
		return 1
	}
	return 0
}

// caseLines is an OnCase that prints each case as it ends on stderr,
// numbered, after prefix; also, when set, is called with each report
// first (a search calls OnCase one case at a time).
func caseLines(prefix string, also func(*harness.Report)) func(*harness.Report) {
	cases := 0
	return func(rep *harness.Report) {
		if also != nil {
			also(rep)
		}
		cases++
		teardown := "" // where a long one went
		if rep.Times.Teardown > 10*time.Second {
			teardown = " (teardown: " + strings.Join(rep.Teardown.Phases, ", ") + ")"
		}
		fmt.Fprintf(os.Stderr, "%s case %d (%v: %s%s): %s %s\n", prefix, cases,
			rep.Times.Total().Round(100*time.Millisecond), rep.Times, teardown, faults.FormatPlan(rep.Plan), verdict(rep))
	}
}

// verdict is a case's outcome in a word or two.
func verdict(rep *harness.Report) string {
	if rep.Failed() {
		return "FAIL " + rep.Failures[0].Property
	}
	if len(rep.NotJudged) > 0 {
		return "pass, but " + rep.NotJudged[0].Property + " " + rep.NotJudged[0].Message
	}
	return "pass"
}

// selected reports whether target is named by one of the comma-separated
// parts of only: a part that is a target's whole name selects that target
// alone (podset, not clientgo-podset), another part every target whose
// name contains it.
func selected(target suite.Target, targets []suite.Target, only string) bool {
	for _, part := range strings.Split(only, ",") {
		whole := slices.ContainsFunc(targets, func(t suite.Target) bool { return t.Name == part })
		if part == target.Name || !whole && strings.Contains(target.Name, part) {
			return true
		}
	}
	return false
}
