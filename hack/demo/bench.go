package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/kubeprop/kubeprop/controllers/suite"
	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness"
)

// bench runs the search on every target once per seed (1..seeds) and
// prints, per seeded bug, how often it was caught by its property, the
// time to the first failure and to the shrunk plan (median [min, max]) and
// the shrunk plan's length against the known minimum; per correct target,
// the checks per minute and the false alarms. Scenarios go to a scratch
// folder: the suite's saved ones stay as they are.
func bench(env *harness.Env, only string, seeds int) int {
	scratch, err := os.MkdirTemp("", "kubeprop-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 2
	}
	defer os.RemoveAll(scratch)
	checks := search.Checks
	table := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(table, "controller\tseeds\tcaught as expected\tfirst failure\tshrunk plan\tshrunk steps (minimum)\tchecks/min\tfalse alarms\n")
	code := 0
	for _, target := range suite.Targets() {
		if !selected(target.Name, only) {
			continue
		}
		var found, shrunk []time.Duration
		var lengths []int
		caught, alarms := 0, 0
		var spent time.Duration
		var setupTime, stepsTime, judgeTime, teardownTime time.Duration // summed over the target's cases
		for seed := 1; seed <= seeds; seed++ {
			fmt.Fprintf(os.Stderr, "bench: %s, seed %d ...\n", target.Name, seed)
			start := time.Now()
			spec, cases, last := specOf(target), 0, start
			opts := target.SearchOptions(search)
			opts.Seed, opts.Dir = uint64(seed), filepath.Join(scratch, target.Name, strconv.Itoa(seed))
			var mu sync.Mutex
			// One line per case: a seed that runs long shows where its
			// time goes.
			opts.OnCase = func(rep *harness.Report) {
				mu.Lock()
				defer mu.Unlock()
				cases++
				setupTime, judgeTime, teardownTime = setupTime+rep.Times.Setup, judgeTime+rep.Times.Judge, teardownTime+rep.Times.Teardown
				stepsTime += rep.Times.Total() - rep.Times.Setup - rep.Times.Judge - rep.Times.Teardown
				verdict := "pass"
				if rep.Failed() {
					verdict = "FAIL " + rep.Failures[0].Property
				}
				fmt.Fprintf(os.Stderr, "bench: %s, seed %d, case %d (%s): %s %s\n", target.Name, seed, cases,
					time.Since(last).Round(100*time.Millisecond), faults.FormatPlan(rep.Plan), verdict)
				last = time.Now()
			}
			f, err := harness.Find(env, spec, "bench/"+target.Name, opts)
			spent += time.Since(start)
			switch {
			case err != nil:
				fmt.Fprintf(os.Stderr, "bench: %s, seed %d: %v\n", target.Name, seed, err)
				code = 1
			case f == nil:
			case target.Correct():
				alarms++
				fmt.Fprintf(os.Stderr, "bench: %s, seed %d: FALSE ALARM %s\n", target.Name, seed, f.Message)
			default:
				if f.Property == target.Property {
					caught++
				}
				found, shrunk, lengths = append(found, f.FoundAfter), append(shrunk, f.ShrunkAfter), append(lengths, len(f.Plan))
			}
		}
		var row string
		if target.Correct() {
			row = fmt.Sprintf("%s\t%d\t-\t-\t-\t-\t%.1f\t%d\n", target.Name, seeds, float64(seeds*checks)/spent.Minutes(), alarms)
		} else {
			row = fmt.Sprintf("%s\t%d\t%d/%d (%s)\t%s\t%s\t%s (%d)\t-\t-\n", target.Name, seeds, caught, seeds, target.Property,
				spread(found), spread(shrunk), lengthSpread(lengths), target.MinSteps)
		}
		if total := setupTime + stepsTime + judgeTime + teardownTime; total > 0 {
			share := func(d time.Duration) string {
				return fmt.Sprintf("%v (%.0f%%)", d.Round(time.Second), 100*d.Seconds()/total.Seconds())
			}
			fmt.Fprintf(os.Stderr, "bench: %s: case time %v: setup %s, steps and their settles %s, heal and judging %s, teardown %s\n",
				target.Name, total.Round(time.Second), share(setupTime), share(stepsTime), share(judgeTime), share(teardownTime))
		}
		// Each row on stderr as it is done: the whole report takes hours,
		// and an interrupted run keeps what it measured.
		fmt.Fprintf(os.Stderr, "bench: row: %s", strings.ReplaceAll(row, "\t", " | "))
		fmt.Fprint(table, row)
	}
	_ = table.Flush()
	return code
}

// spread prints median [min, max].
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	r := func(d time.Duration) time.Duration { return d.Round(time.Second) }
	return fmt.Sprintf("%v [%v, %v]", r(s[len(s)/2]), r(s[0]), r(s[len(s)-1]))
}

func lengthSpread(ns []int) string {
	if len(ns) == 0 {
		return "-"
	}
	s := slices.Clone(ns)
	slices.Sort(s)
	return fmt.Sprintf("%d [%d, %d]", s[len(s)/2], s[0], s[len(s)-1])
}
