package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kubeprop/kubeprop/controllers/suite"
	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness"
)

// bench runs the search on every target once per seed (1..seeds) and
// prints two tables. For the correct targets, the plans per minute at
// Parallel 1 (seed 1) and at the search's Parallel (the default unless
// -parallel says; every seed), their ratio, the machine's CPU in use
// meanwhile, and the false alarms. For each seeded bug (at the search's Parallel), how often it was
// caught by its property, the time to the first failure, the number of
// the failing plan the search took (the first judged) and the
// time to the shrunk plan (median [min, max]), and the shrunk plan's
// length against the known minimum. Scenarios go to a scratch folder: the suite's saved ones stay
// as they are.
func bench(env *harness.Env, only string, seeds int) int {
	scratch, err := os.MkdirTemp("", "kubeprop-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 2
	}
	defer os.RemoveAll(scratch)
	parallel := search.Parallel
	if parallel == 0 {
		parallel = harness.DefaultParallel()
	}
	speed := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(speed, "controller\tplans\tplans/min at Parallel 1\tplans/min at Parallel %d\tratio\tCPU in use (1 / %d)\tfalse alarms (1 / %d)\n", parallel, parallel, parallel)
	detection := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(detection, "controller\tseeds\tcaught as expected\tfirst failure\tits plan number\tshrunk plan\tshrunk steps (minimum)\n")
	code := 0
	targets := suite.Targets()
	for _, target := range targets {
		if !selected(target, targets, only) {
			continue
		}
		var row string
		if target.Correct() {
			// One case at a time takes 10 minutes a seed: the rate at
			// Parallel 1 is measured on the first seed only.
			one := benchTarget(env, target, 1, 1, scratch)
			many := benchTarget(env, target, seeds, parallel, scratch)
			code = max(code, one.code, many.code)
			row = fmt.Sprintf("%s\t%d\t%.1f\t%.1f\t%.1f×\t%.0f%% / %.0f%%\t%d / %d\n", target.Name, one.cases,
				one.perMinute(), many.perMinute(), many.perMinute()/one.perMinute(), one.cpu, many.cpu, one.alarms, many.alarms)
			fmt.Fprint(speed, row)
		} else {
			r := benchTarget(env, target, seeds, parallel, scratch)
			code = max(code, r.code)
			row = fmt.Sprintf("%s\t%d\t%d/%d (%s)\t%s\t%s\t%s\t%s (%d)\n", target.Name, seeds, r.caught, seeds, target.Property,
				spread(r.found), intSpread(r.failingPlans), spread(r.shrunk), intSpread(r.lengths), target.MinSteps)
			fmt.Fprint(detection, row)
		}
		// Each row on stderr as it is done: the whole report takes hours,
		// and an interrupted run keeps what it measured.
		fmt.Fprintf(os.Stderr, "bench: row: %s", strings.ReplaceAll(row, "\t", " | "))
	}
	_ = speed.Flush()
	fmt.Println()
	_ = detection.Flush()
	return code
}

// benchResult is what a target's searches over the seeds measured.
type benchResult struct {
	cases, caught, alarms, code int
	found, shrunk               []time.Duration
	lengths, failingPlans       []int
	spent                       time.Duration
	cpu                         float64 // the machine's CPU in use, percent of all cores
}

func (r benchResult) perMinute() float64 { return float64(r.cases) / r.spent.Minutes() }

// benchTarget searches target once per seed at the given Parallel.
func benchTarget(env *harness.Env, target suite.Target, seeds, parallel int, scratch string) benchResult {
	var r benchResult
	var times harness.Times // summed over the target's cases
	var stepsTime time.Duration
	cpu := machineCPU()
	for seed := 1; seed <= seeds; seed++ {
		fmt.Fprintf(os.Stderr, "bench: %s, seed %d, parallel %d ...\n", target.Name, seed, parallel)
		start := time.Now()
		opts := target.SearchOptions(search)
		opts.Seed, opts.Parallel = uint64(seed), parallel
		opts.Dir = filepath.Join(scratch, target.Name, strconv.Itoa(parallel), strconv.Itoa(seed))
		// One line per case: a seed that runs long shows where its time
		// goes.
		opts.OnCase = caseLines(fmt.Sprintf("bench: %s, seed %d,", target.Name, seed), func(rep *harness.Report) {
			r.cases++
			times.Setup, times.Judge, times.Teardown = times.Setup+rep.Times.Setup, times.Judge+rep.Times.Judge, times.Teardown+rep.Times.Teardown
			stepsTime += rep.Times.Total() - rep.Times.Setup - rep.Times.Judge - rep.Times.Teardown
		})
		f, err := harness.Find(env, specOf(target), "bench/"+target.Name, opts)
		r.spent += time.Since(start)
		switch {
		case err != nil:
			fmt.Fprintf(os.Stderr, "bench: %s, seed %d: %v\n", target.Name, seed, err)
			r.code = 1
		case f == nil:
		case target.Correct():
			r.alarms++
			// The scratch folder goes with the run: what it takes to
			// find the cause is printed.
			fmt.Fprintf(os.Stderr, "bench: %s, seed %d: FALSE ALARM %s\n    plan %s (shrunk from plan %d)\n    %s\n",
				target.Name, seed, f.Message, faults.FormatPlan(f.Plan), f.FailingPlan, f.Detail)
		default:
			if f.Property == target.Property {
				r.caught++
			}
			r.found, r.shrunk, r.lengths = append(r.found, f.FoundAfter), append(r.shrunk, f.ShrunkAfter), append(r.lengths, len(f.Plan))
			r.failingPlans = append(r.failingPlans, f.FailingPlan)
		}
	}
	r.cpu = cpu()
	if total := times.Setup + stepsTime + times.Judge + times.Teardown; total > 0 {
		share := func(d time.Duration) string {
			return fmt.Sprintf("%v (%.0f%%)", d.Round(time.Second), 100*d.Seconds()/total.Seconds())
		}
		fmt.Fprintf(os.Stderr, "bench: %s at parallel %d: %d cases in %v, %.1f/min, CPU %.0f%%; case time %v: setup %s, steps and their settles %s, heal and judging %s, teardown %s\n",
			target.Name, parallel, r.cases, r.spent.Round(time.Second), r.perMinute(), r.cpu, total.Round(time.Second),
			share(times.Setup), share(stepsTime), share(times.Judge), share(times.Teardown))
	}
	return r
}

// machineCPU starts measuring the machine's CPU in use (every process,
// the cluster's included) and returns what stops it: the percent of all
// cores busy in between, from /proc/stat; -1 where it cannot be read.
func machineCPU() func() float64 {
	busy0, total0, err0 := procStat()
	return func() float64 {
		busy1, total1, err1 := procStat()
		if err0 != nil || err1 != nil || total1 <= total0 {
			return -1
		}
		return 100 * float64(busy1-busy0) / float64(total1-total0)
	}
}

// procStat reads the busy and total jiffies of all cores.
func procStat() (busy, total uint64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	if len(fields) < 5 || fields[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	for i, f := range fields[1:] {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %w", err)
		}
		if i >= 7 {
			break // guest time is counted in user time already
		}
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total, nil
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

// intSpread prints median [min, max].
func intSpread(ns []int) string {
	if len(ns) == 0 {
		return "-"
	}
	s := slices.Clone(ns)
	slices.Sort(s)
	return fmt.Sprintf("%d [%d, %d]", s[len(s)/2], s[0], s[len(s)-1])
}
