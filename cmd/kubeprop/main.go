package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness"
	"github.com/kubeprop/kubeprop/harness/cluster"
	"github.com/kubeprop/kubeprop/harness/scenario"
)

// Exit codes.
const (
	exitPass     = 0 // every property held
	exitFailed   = 1 // a property failed
	exitBadInput = 2 // bad input, or the harness failed
)

const usage = `kubeprop tests a Kubernetes controller binary against a real control
plane under randomized faults, and shrinks what breaks it to a minimal plan.

Usage:
  kubeprop run [flags] SPEC.yaml            search fault plans for a property failure
  kubeprop replay [flags] SCENARIO.yaml...  run saved scenarios again
  kubeprop merge OUT DIR...                 merge the reports of runs (shards)
  kubeprop bins [--dir DIR] [--print-path]  build the cluster binaries
  kubeprop help [run|replay|merge|bins]     show help

A spec file names the controller binary, its CRDs, the fixtures (YAML
manifests), the faults with their options, and invariants as CEL
expressions over each object of a kind (object; pods is every pod, and
objects('apps/v1', 'StatefulSet') every object of a recorded kind; an
expression that reads oldObject judges each change, oldObject null on a
create and object null on a delete):

  controller:
    command: ./bin/podset-controller      # relative to the spec file
    args: ["--namespace=$(KUBEPROP_NAMESPACE)"]
    env: {LOG_LEVEL: debug}               # $(KUBEPROP_NAMESPACE), $(KUBECONFIG) expand
  crds: [crds/]
  fixtures: [podset.yaml]
  faults:
    - fault: NodeLoss
    - fault: ContainerKill
      selector: app=web
    - fault: ScaleChange
      field: spec.replicas
      max: 4
    - fault: UserChange                   # a change of any field, or patches:
      name: ImageChange
      field: spec.template.spec.containers[0].image
      values: [web:2, web:3]
    - fault: Burst                        # user changes faster than it looks
    - fault: Recreate                     # deleted and created again
  invariants:
    - name: ready
      kind: PodSet
      expression: object.status.readyReplicas == object.spec.replicas
      within: 30s                         # converges; omit for "always"
    - name: never-shrinks
      kind: PodSet
      expression: oldObject == null || object == null || object.spec.replicas >= oldObject.spec.replicas
  properties: [bounded-backoff, no-fight-loop, quiescent, no-panics, matches-reference]

The binary connects with the kubeconfig in $KUBECONFIG; the case's
namespace is in $KUBEPROP_NAMESPACE. Progress goes to stderr, the verdict
to stdout.

Exit codes: 0 every property held, 1 a property failed, 2 bad input or a
harness failure; of several scenarios, the worst. --junit FILE writes a
JUnit XML report (run: one test case for the spec; replay: one per
scenario) with the property, the message, the shrunk plan, the seed, the
scenario and the replay command of each failure.

Campaigns on many machines: run --seed S --shard I/N runs the plans of
seed S whose index is I mod N (in a Kubernetes Indexed Job, --shards N
takes I from $JOB_COMPLETION_INDEX); the N shards together run the plans
of one run. run --list prints the plans without running any. kubeprop
merge gathers the shards' reports and scenarios into one.
`

func main() {
	discardLogs()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// discardLogs silences klog and controller-runtime's log, through which
// the cluster's components and envtest log: kubeprop's own progress is
// what stderr shows. At the process's start, before any goroutine logs
// (the loggers are globals that klog reads unlocked).
func discardLogs() {
	klog.SetLogger(logr.Discard())
	ctrllog.SetLogger(logr.Discard())
}

// run is the whole command, for the tests.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitBadInput
	}
	switch args[0] {
	case "run":
		return runCommand(args[1:], stdout, stderr)
	case "replay":
		return replayCommand(args[1:], stdout, stderr)
	case "bins":
		return binsCommand(args[1:], stdout, stderr)
	case "merge":
		return mergeCommand(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		if len(args) > 1 && slices.Contains([]string{"run", "replay", "bins", "merge"}, args[1]) {
			return run([]string{args[1], "-h"}, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return exitPass
	default:
		fmt.Fprintf(stderr, "kubeprop: unknown command %q; the commands are run, replay, merge, bins and help\n", args[0])
		return exitBadInput
	}
}

func runCommand(args []string, stdout, stderr io.Writer) int {
	fs := commandFlags("kubeprop run", "Usage: kubeprop run [flags] SPEC.yaml\n\nDraws fault plans for the controller of SPEC.yaml, runs each on a hollow\ncluster, and shrinks the first property failure to a minimal plan, saved\nas a scenario for kubeprop replay. It ends with a summary line: plans run,\nfailing cases, time, seed.\n", stderr)
	// The search's settings, as go test's -kubeprop.* flags name them;
	// -checks 0 takes the spec's checks first.
	settings := harness.SearchFlags(fs, "")
	list := fs.Bool("list", false, "print the index and plan of each plan the search would run (with -shard, the shard's), and run none: no cluster starts")
	out := fs.String("out", "", "where scenarios go: OUT/testdata/kubeprop/NAME/, with an HTML timeline beside each (default: the spec file's folder)")
	junitPath := fs.String("junit", "", "write a JUnit XML report there: one test case for the spec")
	verbose := fs.Bool("v", false, "print every case's timeline to stderr")
	if code, ok := parse(fs, args, 1, stderr); !ok {
		return code
	}
	opts, err := settings()
	if err != nil {
		return badInput(stderr, err)
	}
	junit, err := newJUnit(*junitPath, "kubeprop.run")
	if err != nil {
		return badInput(stderr, err)
	}
	l, err := loadSpec(fs.Arg(0))
	if err != nil {
		return badInput(stderr, err)
	}
	if opts.Checks == 0 {
		opts.Checks = cmp.Or(l.checks, harness.DefaultChecks)
	}
	if opts.Seed == 0 {
		opts.Seed = rand.Uint64() // drawn here, so that the summary names it
	}
	if *list {
		plans, err := harness.ListPlans(l.spec, opts)
		if err != nil {
			return badInput(stderr, err)
		}
		fmt.Fprint(stdout, plans)
		return exitPass
	}
	name := strings.TrimSuffix(filepath.Base(l.path), filepath.Ext(l.path))
	// The plans drawn and run, those of them that failed, the plans drawn
	// again (not run twice), and the shrink's runs, counted apart.
	var cases, failing, again, shrinkRuns, unjudged atomic.Int64
	started := time.Now()
	// finish ends every run that began: its test case in the JUnit
	// report, the summary line.
	finish := func(tc junitCase, code int) int {
		tc.Name = name
		took := time.Since(started)
		sum := runSummary{Plans: cases.Load(), Again: again.Load(), Failures: failing.Load(), ShrinkRuns: shrinkRuns.Load(), NotJudged: unjudged.Load(), Seed: opts.Seed, Shard: opts.Shard.String()}
		junit.add(tc, took)
		if err := junit.write(sum); err != nil {
			code = badInput(stderr, err)
		}
		fmt.Fprintln(stdout, sum.line(took))
		return code
	}
	harnessError := func(err error) int {
		return finish(junitCase{Error: &junitProblem{Message: err.Error(), Type: "harness", Text: err.Error()}}, badInput(stderr, err))
	}
	opts.OnCase = func(rep *harness.Report) {
		verdict := "pass"
		if rep.Failed() {
			verdict = "FAIL " + rep.Failures[0].Message
		}
		if len(rep.NotJudged) > 0 {
			verdict += fmt.Sprintf(" (but %s %s)", rep.NotJudged[0].Property, rep.NotJudged[0].Message)
			if !rep.Shrinking {
				unjudged.Add(1)
			}
		}
		var what string
		if rep.Shrinking {
			what = fmt.Sprint("shrink run ", shrinkRuns.Add(1))
		} else {
			what = fmt.Sprint("case ", cases.Add(1))
			if rep.Failed() {
				failing.Add(1)
			}
		}
		fmt.Fprintf(stderr, "kubeprop: %s (%s): %s %s\n", what, time.Since(started).Round(time.Second), faults.FormatPlan(rep.Plan), verdict)
		if *verbose {
			fmt.Fprintf(stderr, "    %s\n", strings.Join(rep.Timeline, "\n    "))
		}
	}
	opts.OnSkip = func(plan []faults.Step) {
		again.Add(1)
		fmt.Fprintf(stderr, "kubeprop: %s was drawn before: not run twice\n", faults.FormatPlan(plan))
	}
	env, stop, err := startEnv(l, stderr)
	if err != nil {
		return harnessError(err)
	}
	defer stop()
	if *out == "" {
		*out = filepath.Dir(fs.Arg(0))
	}
	opts.Dir = filepath.Join(*out, harness.ScenarioDir, name)
	if opts.Shard.Count > 1 {
		fmt.Fprintf(stderr, "kubeprop: searching shard %s of %d plans of %s, seed %d\n", opts.Shard, opts.Checks, l.path, opts.Seed)
	} else {
		fmt.Fprintf(stderr, "kubeprop: searching %d plans of %s, seed %d\n", opts.Checks, l.path, opts.Seed)
	}
	f, err := harness.Find(env, l.spec, name, opts)
	if err != nil {
		return harnessError(err)
	}
	if f == nil {
		fmt.Fprintf(stdout, "PASS %s: every property held on %d plans\n", name, cases.Load())
		if n := unjudged.Load(); n > 0 {
			held := fmt.Sprintf("but %d of them held for want of a judgement (a retry the work queue owes past a deadline): see \"not judged\" in the log", n)
			fmt.Fprintln(stdout, "  "+held)
			return finish(junitCase{SystemOut: held}, exitPass)
		}
		return finish(junitCase{}, exitPass)
	}
	if err := pointAtSpec(f.Scenario, l.path); err != nil {
		return harnessError(err)
	}
	detail := fmt.Sprintf("%s\n  shrunk plan (%d steps, drawn with %d): %s\n  found after %s, shrunk after %s, seed %d\n  shrink: %s\n  scenario: %s\n  timeline: %s\n%s  replay:   kubeprop replay %s\n",
		f.Message, len(f.Plan), f.DrawnSteps, faults.FormatPlan(f.Plan), f.FoundAfter.Round(time.Second), f.ShrunkAfter.Round(time.Second), f.Seed,
		f.Shrink, f.Scenario, f.Page, evidenceLines(f.Scenario), f.Scenario)
	fmt.Fprintf(stdout, "FAIL %s: %s", name, detail)
	return finish(junitCase{Failure: &junitProblem{Message: f.Message, Type: f.Property, Text: "property " + f.Property + ": " + detail}}, exitFailed)
}

func binsCommand(args []string, stdout, stderr io.Writer) int {
	fs := commandFlags("kubeprop bins", "Usage: kubeprop bins [flags]\n\nBuilds the hollow cluster's binaries (etcd "+"v"+cluster.EtcdVersion+", kube-apiserver,\nkube-controller-manager and kube-scheduler "+cluster.KubernetesVersion+") from the Go module proxy\nwith the Go toolchain, into the folder where the harness looks for them\nlast, skipping those already there. The first build takes about 9 minutes.\n", stderr)
	dir := fs.String("dir", "", "the folder to build into (default: "+defaultAssetsDir()+")")
	printPath := fs.Bool("print-path", false, "print only the folder, for scripts (progress still goes to stderr)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitPass
		}
		return exitBadInput
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "kubeprop bins: takes no arguments, got %q\n", fs.Args())
		return exitBadInput
	}
	got, err := cluster.BuildBinaries(context.Background(), cluster.BuildOptions{Dir: *dir, Log: prefixed{stderr, "kubeprop bins: "}})
	if err != nil {
		return badInput(stderr, err)
	}
	if *printPath {
		fmt.Fprintln(stdout, got)
	} else {
		fmt.Fprintf(stdout, "the cluster binaries are in %s\n", got)
	}
	return exitPass
}

func defaultAssetsDir() string {
	d, err := cluster.DefaultAssetsDir()
	if err != nil {
		return "the user's cache folder"
	}
	return d
}

// prefixed writes each write to w after a prefix.
type prefixed struct {
	w      io.Writer
	prefix string
}

func (p prefixed) Write(b []byte) (int, error) {
	if _, err := fmt.Fprintf(p.w, "%s%s", p.prefix, b); err != nil {
		return 0, err
	}
	return len(b), nil
}

func replayCommand(args []string, stdout, stderr io.Writer) int {
	fs := commandFlags("kubeprop replay", "Usage: kubeprop replay [flags] SCENARIO.yaml...\n\nRuns the plan of each saved scenario (once, or -count times, -parallel at\na time), with the controller of the spec file that found it, and prints\nevery property's verdict and how many replays reproduced the failure. The exit code\nis the worst of all: 2 if any could not be replayed, 1 if any failed.\n", stderr)
	specPath := fs.String("spec", "", "the spec file (default: the one each scenario names)")
	junitPath := fs.String("junit", "", "write a JUnit XML report there: one test case per scenario")
	verbose := fs.Bool("v", false, "print each case's timeline to stderr")
	evidence := fs.Bool("evidence", false, "write the controller's log, the events and the objects of each replay that fails beside its scenario, replacing those saved with it")
	count := fs.Int("count", 1, "replay each scenario this many times and say how many reproduced its failure")
	update := fs.Bool("update", false, "a scenario whose replays do not see what it expects gets its expectation rewritten to what they saw (after a deliberate change: a bug fixed), its notes kept, and counts as passed")
	parallel := fs.Int("parallel", 0, fmt.Sprintf("replays run at once, 1 to %d (0: the default, %d)", harness.MaxParallel, harness.DefaultParallel()))
	if code, ok := parse(fs, args, -1, stderr); !ok {
		return code
	}
	if *count < 1 {
		return badInput(stderr, fmt.Errorf("-count is %d: give how many times to replay each scenario, 1 or more", *count))
	}
	if *parallel < 0 || *parallel > harness.MaxParallel {
		return badInput(stderr, fmt.Errorf("-parallel is %d: give 1 to %d, or 0 for the default", *parallel, harness.MaxParallel))
	}
	junit, err := newJUnit(*junitPath, "kubeprop.replay")
	if err != nil {
		return badInput(stderr, err)
	}
	started := time.Now()
	r := &replayer{stdout: stdout, stderr: stderr, specPath: *specPath, verbose: *verbose, evidence: *evidence, count: *count, parallel: *parallel, update: *update}
	defer r.stop()
	code, failing := exitPass, 0
	for _, path := range fs.Args() {
		began := time.Now()
		c, got, err := r.replay(path)
		tc := junitCase{Name: path}
		switch {
		case err != nil:
			fmt.Fprintf(stderr, "kubeprop: %s: %v\n", path, err)
			tc.Error = &junitProblem{Message: err.Error(), Type: "harness", Text: err.Error()}
		case c == exitFailed:
			tc.Failure = &junitProblem{Message: got.message, Type: got.property, Text: got.text}
		}
		if c != exitPass {
			failing++
		}
		junit.add(tc, time.Since(began))
		code = max(code, c)
	}
	if err := junit.write(runSummary{}); err != nil {
		fmt.Fprintf(stderr, "kubeprop: %v\n", err)
		code = exitBadInput
	}
	fmt.Fprintf(stdout, "%d scenarios, %d failures, %s\n", fs.NArg(), failing, time.Since(started).Round(time.Second))
	return code
}

// replayer replays scenarios one after another, on one hollow cluster
// while they share a spec file.
type replayer struct {
	stdout, stderr io.Writer
	specPath       string
	verbose        bool
	evidence       bool // save a failing replay's log, events and objects
	update         bool // rewrite an expectation the replays do not meet
	count          int  // replays of each scenario
	parallel       int  // replays at once (0: the default)

	spec    *loadedSpec
	env     *harness.Env
	stopEnv func()
}

func (r *replayer) stop() {
	if r.stopEnv != nil {
		r.stopEnv()
		r.stopEnv = nil
	}
}

// replay runs one scenario and returns its exit code and what it
// printed; the error is bad input or the harness's failure.
func (r *replayer) replay(path string) (int, replayed, error) {
	s, err := scenario.Read(path)
	if err != nil {
		return exitBadInput, replayed{}, err
	}
	specPath := r.specPath
	if specPath == "" {
		if s.Spec == "" {
			return exitBadInput, replayed{}, fmt.Errorf("scenario %s names no spec file (it was written by go test: replay it with the go test command in its first line), or give -spec", path)
		}
		specPath = filepath.Join(filepath.Dir(path), s.Spec)
	}
	if r.spec == nil || !samePath(r.spec.path, specPath) {
		l, err := loadSpec(specPath)
		if err != nil {
			return exitBadInput, replayed{}, err
		}
		r.stop()
		r.spec = l
	}
	plan, err := s.Steps(path, append(slices.Clone(r.spec.spec.Faults), faults.Catalog()...))
	if err != nil {
		return exitBadInput, replayed{}, err
	}
	if r.env == nil || r.stopEnv == nil {
		if r.env, r.stopEnv, err = startEnv(r.spec, r.stderr); err != nil {
			return exitBadInput, replayed{}, err
		}
	}
	fmt.Fprintf(r.stderr, "kubeprop: replaying %s: %s\n", path, faults.FormatPlan(plan))
	reps, err := harness.Repeat(context.Background(), r.env, r.spec.spec, plan, harness.RepeatOptions{Count: r.count, Parallel: r.parallel})
	if err != nil {
		return exitBadInput, replayed{}, err
	}
	if r.verbose {
		for i, rep := range reps {
			if len(reps) > 1 {
				fmt.Fprintf(r.stderr, "  replay %d of %d:\n", i+1, len(reps))
			}
			fmt.Fprintf(r.stderr, "    %s\n", strings.Join(rep.Timeline, "\n    "))
		}
	}
	if r.update {
		was, now, updated, err := harness.UpdateScenario(path, reps)
		if err != nil {
			return exitBadInput, replayed{}, err
		}
		if updated {
			text := fmt.Sprintf("UPDATED %s: it expected %s, its replays saw %s\n", path, was, now)
			fmt.Fprint(r.stdout, text)
			return exitPass, replayed{text: text}, nil
		}
	}
	// The first failing replay speaks for all; the count says how often.
	rep, failed, reproduced := reps[0], reps.Failing(""), 0
	if i := slices.IndexFunc(reps, (*harness.Report).Failed); i >= 0 {
		rep = reps[i]
	}
	if s.Expect.Outcome == scenario.Fail {
		reproduced = reps.Failing(s.Expect.Property)
	}
	var out strings.Builder
	code := exitPass
	if !rep.Failed() {
		fmt.Fprintf(&out, "PASS every property held%s\n", inEvery(len(reps)))
		notJudged(&out, reps)
		if s.Expect.Outcome == scenario.Fail {
			fmt.Fprintf(&out, "  the scenario expected %s to fail: fixed? then set expect.outcome to pass, or replay with -update\n", s.Expect.Property)
		}
	} else {
		code = exitFailed
		for _, f := range rep.Failures {
			fmt.Fprintf(&out, "FAIL %s\n", f.Message)
		}
		if len(reps) > 1 {
			fmt.Fprintf(&out, "  failed in %d of %d replays\n", failed, len(reps))
		}
		if s.Expect.Outcome == scenario.Fail && reproduced > 0 {
			switch need := s.Expect.Needed(len(reps)); {
			case len(reps) == 1:
				fmt.Fprintf(&out, "  reproduced, as the scenario expects\n")
			case reproduced >= need:
				fmt.Fprintf(&out, "  reproduced %d of %d, as the scenario expects (at least %d)\n", reproduced, len(reps), need)
			default:
				fmt.Fprintf(&out, "  reproduced %d of %d (%.2f), below the scenario's expect.rate: it expects at least %d\n", reproduced, len(reps), float64(reproduced)/float64(len(reps)), need)
			}
		}
		evidence := evidenceLines(path)
		if r.evidence {
			if err := rep.SaveEvidence(path); err != nil {
				evidence = fmt.Sprintf("  (this replay's log, events and objects not saved: %v)\n", err)
			}
		} else if log, _, _ := scenario.Evidence(path); !exists(log) {
			evidence = "  (no log, events or objects beside the scenario: replay with -evidence to save this replay's)\n"
		}
		fmt.Fprintf(&out, "  plan:     %s\n  scenario: %s\n%s  replay:   kubeprop replay %s\n", faults.FormatPlan(plan), path, evidence, path)
	}
	fmt.Fprint(r.stdout, out.String())
	got := replayed{text: out.String()}
	if rep.Failed() {
		got.property, got.message = rep.Failures[0].Property, rep.Failures[0].Message
	}
	return code, got, nil
}

// inEvery is " in every one of n replays", or nothing for one.
func inEvery(n int) string {
	if n == 1 {
		return ""
	}
	return fmt.Sprintf(" in every one of %d replays", n)
}

// evidenceLines name the files beside the scenario at path: the
// controller's log, the events, the final objects (of the case that saved
// them, or of the replay that failed).
func evidenceLines(path string) string {
	log, events, objects := scenario.Evidence(path)
	return fmt.Sprintf("  log:      %s\n  events:   %s\n  objects:  %s\n", log, events, objects)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// replayed is what a replay printed, and its first failure.
type replayed struct {
	text, property, message string
}

// samePath reports whether two paths name the same file.
func samePath(a, b string) bool {
	aa, errA := filepath.Abs(a)
	bb, errB := filepath.Abs(b)
	return errA == nil && errB == nil && aa == bb
}

// commandFlags is a command's flag set: errors and help go to stderr.
func commandFlags(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage+"\nFlags:\n")
		fs.PrintDefaults()
	}
	return fs
}

// parse parses a command's flags and its file arguments: files of them,
// or, when files is -1, one or more.
func parse(fs *flag.FlagSet, args []string, files int, stderr io.Writer) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitPass, false
		}
		return exitBadInput, false
	}
	switch {
	case files == -1 && fs.NArg() == 0:
		fmt.Fprintf(stderr, "%s: give one file or more\n", fs.Name())
		fs.Usage()
		return exitBadInput, false
	case files >= 0 && fs.NArg() != files:
		fmt.Fprintf(stderr, "%s: give one file, got %d arguments\n", fs.Name(), fs.NArg())
		fs.Usage()
		return exitBadInput, false
	}
	return 0, true
}

func badInput(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "kubeprop: %v\n", err)
	return exitBadInput
}

// startEnv starts the hollow cluster with the spec's CRDs. The cluster is
// stopped by the returned func, and on SIGINT or SIGTERM before the
// process exits: no etcd, API server or controller outlives kubeprop.
func startEnv(l *loadedSpec, stderr io.Writer) (*harness.Env, func(), error) {
	fmt.Fprintf(stderr, "kubeprop: starting the hollow cluster\n")
	env, err := harness.Start(harness.EnvOptions{CRDDirectoryPaths: l.crds, TimeScale: l.file.TimeScale})
	if err != nil {
		return nil, nil, err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sig:
			fmt.Fprintf(stderr, "kubeprop: %v: stopping the cluster\n", s)
			_ = env.Stop()
			os.Exit(exitBadInput)
		case <-done:
		}
	}()
	return env, func() {
		signal.Stop(sig)
		close(done)
		if err := env.Stop(); err != nil {
			fmt.Fprintf(stderr, "kubeprop: stopping the cluster: %v\n", err)
		}
	}, nil
}

// pointAtSpec records the spec file in a scenario written by Find, so
// that kubeprop replay finds the controller and its header gives the
// kubeprop replay command.
func pointAtSpec(path, spec string) error {
	s, err := scenario.Read(path)
	if err != nil {
		return err
	}
	absSpec, err := filepath.Abs(spec)
	if err != nil {
		return err
	}
	absDir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return err
	}
	if s.Spec, err = filepath.Rel(absDir, absSpec); err != nil {
		return err
	}
	return s.Write(path)
}

// notJudged tells how many of reps a property held only for want of a
// judgement, and why in the first.
func notJudged(out io.Writer, reps harness.Replays) {
	var first *harness.Failure
	n := 0
	for _, rep := range reps {
		if len(rep.NotJudged) > 0 {
			n++
			if first == nil {
				first = &rep.NotJudged[0]
			}
		}
	}
	if first != nil {
		fmt.Fprintf(out, "  but not judged in %d of %d: %s %s\n", n, len(reps), first.Property, first.Message)
	}
}
