// Command demo runs kubeprop's conformance suite on the bundled
// controllers (controllers/suite) on the hollow cluster and prints a
// table: for each controller, pass, or the property that failed with the
// shrunk plan and the command that replays it. Scenarios go where the
// suite's tests replay them, controllers/testdata/kubeprop/TestConformance/
// <controller>/; HTML timelines to reports/.
//
// Run it from the repository's root: make demo. Flags: -only NAME,
// -checks (plans per controller, default 20), -shrinktime (2m), -seed,
// -parallel; -seeds N measures detection over N seeds instead (make
// bench); -memprofile FILE writes what the run still holds at its end.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubeprop/kubeprop/controllers/suite"
	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness"
)

func main() {
	only := flag.String("only", "", "run only the controllers whose name contains this (a comma-separated list: any of these)")
	seeds := flag.Int("seeds", 0, "instead of the demo, measure detection over seeds 1..N (make bench)")
	flag.BoolVar(&focused, "focused", false, "search each bug with the faults that reveal it only, as go test does")
	memProfile := flag.String("memprofile", "", "write a heap profile of what the run still holds at its end to this file")
	flag.IntVar(&search.Checks, "checks", 20, "plans per controller")
	flag.Uint64Var(&search.Seed, "seed", 0, "the searches' seed (0: random)")
	flag.DurationVar(&search.ShrinkTime, "shrinktime", 2*time.Minute, "time budget for shrinking a failure")
	flag.IntVar(&search.Parallel, "parallel", 0, "cases run at once (0: the default)")
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	os.Exit(run(*only, *seeds, *memProfile))
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

// specOf is the Spec a target is searched with.
func specOf(t suite.Target) harness.Spec {
	if focused {
		return t.Focused()
	}
	return t.Spec
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
	table := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(table, "controller\texpected\tresult\tshrunk plan\tfound\tshrunk\treplay")
	code = 0
	for _, target := range suite.Targets() {
		if !selected(target.Name, only) {
			continue
		}
		fmt.Fprintf(os.Stderr, "demo: %s ...\n", target.Name)
		start := time.Now()
		opts := target.SearchOptions(search)
		// Where the suite's tests replay them.
		opts.Dir = filepath.Join("controllers", harness.ScenarioDir, "TestConformance", target.Name)
		f, err := harness.Find(env, specOf(target), "TestConformance/"+target.Name, opts)
		expected := "pass"
		if !target.Correct() {
			expected = fmt.Sprintf("fail %s (minimum %d steps)", target.Property, target.MinSteps)
		}
		switch {
		case err != nil:
			fmt.Fprintf(table, "%s\t%s\tERROR %v\t\t\t\t\n", target.Name, expected, err)
			code = 1
		case f == nil:
			result := "pass"
			if !target.Correct() {
				result, code = "MISSED: passed", 1
			}
			fmt.Fprintf(table, "%s\t%s\t%s\t\t%v\t\t\n", target.Name, expected, result, time.Since(start).Round(time.Second))
		default:
			page := filepath.Join(reports, target.Name+".html")
			if err := os.Rename(f.Page, page); err != nil {
				page = f.Page
			}
			result := "fail " + f.Property
			if f.Property != target.Property || len(f.Plan) > target.ExpectSteps {
				result, code = "UNEXPECTED: "+result, 1
			}
			fmt.Fprintf(table, "%s\t%s\t%s\t%s\t%v\t%v\tgo test ./controllers -run '^TestConformance$/^%s$' -kubeprop.replay=%s\n",
				target.Name, expected, result, faults.FormatPlan(f.Plan),
				f.FoundAfter.Round(time.Second), f.ShrunkAfter.Round(time.Second), target.Name, strings.TrimPrefix(f.Scenario, "controllers/"))
			fmt.Fprintf(os.Stderr, "demo: %s: %s; timeline %s\n", target.Name, f.Message, page)
		}
	}
	_ = table.Flush()
	return code
}

// selected reports whether a target's name contains one of the
// comma-separated parts of only.
func selected(name, only string) bool {
	for _, part := range strings.Split(only, ",") {
		if strings.Contains(name, part) {
			return true
		}
	}
	return false
}
