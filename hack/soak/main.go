// Command soak runs many cases of the conformance suite's targets
// (controllers/suite) one after another in one process and one hollow
// cluster, and watches what a long run keeps: the process's memory and
// goroutines, the case namespaces, pods and nodes left in the cluster, and
// the API server's memory. Each case is a plan drawn from every fault of
// the target's Spec (not the focused ones) as a search with the seed
// draws it (harness.SearchPlans: half at random, half aimed at what the
// probe saw the controller do), run through harness.Run, -parallel at
// once (harness.DefaultParallel); nothing is shrunk.
//
// It prints one line after the first case (the baseline), one every
// -every cases and one after the last, each once the cases under way
// have ended:
//
//	soak: case 100/1000 failures=0 errors=0 rss=… heap=… goroutines=… namespaces=0 pods=0 nodes=0 apiserver_rss=… elapsed=…
//
// then a summary: the growth of the process's RSS (and heap, and the API
// server's RSS) from case -every to the end, and the goroutines at the end
// against after the first case. A property failure is printed on one line
// (target, case, plan, message) and its scenario saved under -scenarios
// with the command that replays it; a harness error is printed and counted
// apart. The soak goes on after either. SIGINT or SIGTERM ends the cases
// under way (their teardowns run), prints the summary of the cases done and
// stops the cluster; a second signal exits at once (the cluster's watchdog
// stops its processes).
//
// Run it from the repository's root: make soak (SOAK_CASES, SOAK_TARGETS,
// SOAK_FLAGS). Flags: -cases N (env SOAK_CASES, default 1000), -targets
// a,b (env SOAK_TARGETS, default podset; several targets take turns case
// by case), -seed S (KUBEPROP_SEED, default random), -every N (SOAK_EVERY,
// default 100), -parallel N (KUBEPROP_PARALLEL), -scenarios DIR (default
// reports/soak). The exit code is 0 when no case failed and the harness
// never erred, 1 otherwise, 2 for bad flags or a cluster that did not
// start.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubeprop/kubeprop/controllers/suite"
	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness"
)

// casePrefix starts the names of the harness's case namespaces and nodes.
const casePrefix = "kp-"

func main() {
	cases := flag.Int("cases", envInt("SOAK_CASES", 1000), "cases to run in all (env SOAK_CASES)")
	targets := flag.String("targets", envString("SOAK_TARGETS", "podset"), "comma-separated names of controllers/suite targets; several take turns case by case (env SOAK_TARGETS)")
	// -seed and -parallel are the search's settings, as go test's
	// -kubeprop.* flags name them (their env twins KUBEPROP_SEED and
	// KUBEPROP_PARALLEL).
	seed := flag.Int("seed", envInt(harness.EnvTwin("seed"), 0), "the seed the cases' plans are drawn with, as a search draws them; 0: a random seed, printed (env "+harness.EnvTwin("seed")+")")
	every := flag.Int("every", envInt("SOAK_EVERY", 100), "print a line every this many cases (env SOAK_EVERY)")
	parallel := flag.Int("parallel", envInt(harness.EnvTwin("parallel"), harness.DefaultParallel()), "cases at once (env "+harness.EnvTwin("parallel")+")")
	scenarios := flag.String("scenarios", "reports/soak", "save the scenarios of failures under this folder, by target")
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard()) // the client-go controllers report their errors through klog
	if *cases < 1 || *every < 1 || *parallel < 1 || *parallel > harness.MaxParallel {
		fmt.Fprintf(os.Stderr, "soak: -cases and -every must be at least 1, -parallel 1 to %d\n", harness.MaxParallel)
		os.Exit(2)
	}
	chosen, err := pickTargets(*targets)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	if *seed == 0 {
		*seed = rand.IntN(1_000_000) + 1
	}
	os.Exit(run(chosen, *cases, *seed, *every, *parallel, *scenarios))
}

// envInt and envString are a flag's default from its environment twin.
func envInt(name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "soak: $%s is %q, not a whole number\n", name, v)
		os.Exit(2)
	}
	return n
}

func envString(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// soakTarget is a suite target with its plans.
type soakTarget struct {
	name  string
	spec  harness.Spec
	plans [][]faults.Step // drawn once the cluster is up
}

// pickTargets finds the named targets of the suite.
func pickTargets(names string) ([]soakTarget, error) {
	all := suite.Targets()
	var out []soakTarget
	for _, name := range strings.Split(names, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		i := slices.IndexFunc(all, func(t suite.Target) bool { return t.Name == name })
		if i < 0 {
			known := make([]string, len(all))
			for j, t := range all {
				known[j] = t.Name
			}
			return nil, fmt.Errorf("no target %q in controllers/suite; the targets are %s", name, strings.Join(known, ", "))
		}
		spec := all[i].Spec
		out = append(out, soakTarget{name: name, spec: spec})
	}
	if len(out) == 0 {
		return nil, errors.New("-targets names no target")
	}
	return out, nil
}

// soak is a run in progress.
type soak struct {
	env        *harness.Env
	clientset  *kubernetes.Clientset
	cases      int // the run's cases in all
	targets    int // they take turns case by case
	start      time.Time
	mu         sync.Mutex // guards the counts below while cases run
	done       int        // cases run to the end
	failures   int
	errors     int
	left       int // cases whose teardown left something behind
	apiPID     int // the API server's, found once, checked on every use
	baseline   *sample
	reference  *sample // at case -every: past the warm-up
	last       *sample
	scenarioTo string
}

// sample is what the soak measures after a case. Sizes are in bytes;
// -1 is unknown.
type sample struct {
	cases                   int
	elapsed                 time.Duration
	rss, heap, apiRSS       int64
	goroutines              int
	namespaces, pods, nodes int
}

func run(targets []soakTarget, cases, seed, every, parallel int, scenarios string) (code int) {
	env, err := harness.Start(harness.EnvOptions{TimeScale: suite.TimeScale, CRDDirectoryPaths: []string{suite.CRDs}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err, "(run it from the repository's root: make soak)")
		return 2
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Println("soak: stopping the hollow cluster:", err)
			code = 1
		}
	}()
	clientset, err := kubernetes.NewForConfig(env.Config())
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		return 2
	}
	if scenarios, err = filepath.Abs(scenarios); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		return 2
	}
	s := &soak{env: env, clientset: clientset, cases: cases, targets: len(targets), start: time.Now(), scenarioTo: scenarios}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		sig := <-sigs
		fmt.Printf("soak: %v: ending the cases under way, then the summary (again to exit at once)\n", sig)
		cancel()
		<-sigs
		fmt.Println("soak: exiting at once; the cluster's watchdog stops its processes")
		os.Exit(1)
	}()

	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.name
	}
	apiserver := "not found"
	if pid := s.apiServerPID(); pid > 0 {
		apiserver = "pid " + strconv.Itoa(pid)
	}
	// Each target's plans, as a search of its cases draws them.
	for i := range targets {
		n := (cases + len(targets) - 1 - i) / len(targets)
		if n == 0 {
			continue
		}
		plans, err := harness.SearchPlans(ctx, env, targets[i].spec, harness.SearchOptions{Checks: n, Seed: uint64(seed), Parallel: parallel})
		if err != nil {
			fmt.Fprintf(os.Stderr, "soak: drawing the plans of %s: %v\n", targets[i].name, err)
			return 2
		}
		targets[i].plans = plans
	}
	fmt.Printf("soak: %d cases of %s, %d at once, seed %d, a line every %d cases; cluster %s, kube-apiserver %s\n",
		cases, strings.Join(names, ", "), parallel, seed, every, env.Cluster().Dir(), apiserver)

	// Parallel cases at a time; before each line the cases under way
	// finish, so that what the line counts in the cluster is what ended
	// cases left.
	slots := make(chan struct{}, parallel)
	var running sync.WaitGroup
	for i := 0; i < cases && ctx.Err() == nil; i++ {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		running.Go(func() {
			defer func() { <-slots }()
			s.runCase(ctx, targets[i%len(targets)], i, seed)
		})
		if n := i + 1; n == 1 || n%every == 0 || n == cases {
			running.Wait()
			if ctx.Err() == nil {
				s.measure(ctx, s.done, every)
			}
		}
	}
	running.Wait()
	interrupted := ctx.Err() != nil
	// A last line after the last case, and after an interrupt: what the
	// teardown of the case under way left.
	if s.done > 0 && (interrupted || s.last == nil || s.last.cases != s.done) {
		s.measure(context.Background(), s.done, every)
	}
	s.summary(interrupted)
	if s.failures > 0 || s.errors > 0 {
		return 1
	}
	return 0
}

// runCase runs case i (from 0) and prints what went wrong in it.
func (s *soak) runCase(ctx context.Context, t soakTarget, i, seed int) {
	plan := t.plans[i/s.targets]
	rep, err := harness.Run(ctx, s.env, t.spec, plan)
	if ctx.Err() != nil {
		return // interrupted: the case did not run to its end
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done++
	n := i + 1
	switch {
	case err != nil:
		s.errors++
		fmt.Printf("soak: ERROR %s case %d (seed %d, plan %d): %s: %v\n", t.name, n, seed, i/s.targets+1, faults.FormatPlan(plan), err)
	case rep.Failed():
		s.failures++
		f := rep.Failures[0]
		fmt.Printf("soak: FAIL %s case %d (seed %d, plan %d): %s: %s\n", t.name, n, seed, i/s.targets+1, faults.FormatPlan(rep.Plan), f.Message) // the message starts with the property
		if path, err := s.saveScenario(t.name, n, rep); err != nil {
			fmt.Printf("soak:   %v\n", err)
		} else {
			fmt.Printf("soak:   scenario %s\nsoak:   replay:   go test ./controllers -run '^TestConformance$/^%s$' -kubeprop.replay=%s\n", path, t.name, path)
		}
	}
	if rep != nil && len(rep.Teardown.Left) > 0 {
		s.left++
		fmt.Printf("soak: LEFT %s case %d: the teardown left %s\n", t.name, n, strings.Join(rep.Teardown.Left, "; "))
	}
}

// measure takes a sample after case n, prints its line and keeps it.
func (s *soak) measure(ctx context.Context, n, every int) {
	if ctx.Err() != nil {
		ctx = context.Background() // the last line of an interrupted run
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	smp := &sample{cases: n, elapsed: time.Since(s.start), rss: vmRSS("/proc/self/status"), heap: int64(ms.HeapInuse),
		goroutines: runtime.NumGoroutine(), apiRSS: -1}
	if pid := s.apiServerPID(); pid > 0 {
		smp.apiRSS = vmRSS(fmt.Sprintf("/proc/%d/status", pid))
	}
	var errs []string
	smp.namespaces, smp.pods, smp.nodes, errs = s.leftovers(ctx)
	fmt.Printf("soak: case %d/%d failures=%d errors=%d rss=%s heap=%s goroutines=%d namespaces=%s pods=%s nodes=%s apiserver_rss=%s elapsed=%s\n",
		n, s.cases, s.failures, s.errors, mib(smp.rss), mib(smp.heap), smp.goroutines,
		count(smp.namespaces), count(smp.pods), count(smp.nodes), mib(smp.apiRSS), smp.elapsed.Round(time.Second))
	for _, e := range errs {
		fmt.Println("soak:  ", e)
	}
	if s.baseline == nil {
		s.baseline = smp
	}
	if s.reference == nil && n >= every {
		s.reference = smp
	}
	s.last = smp
}

// leftovers counts the case namespaces (kp-…) in the cluster, the pods in
// them and the case nodes; -1 for what could not be listed.
func (s *soak) leftovers(ctx context.Context) (namespaces, pods, nodes int, errs []string) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	namespaces, pods, nodes = -1, -1, -1
	nsList, err := s.clientset.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		errs = append(errs, "listing namespaces: "+err.Error())
	} else {
		namespaces = countCases(nsList.Items, func(ns corev1.Namespace) string { return ns.Name })
	}
	podList, err := s.clientset.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		errs = append(errs, "listing pods: "+err.Error())
	} else {
		pods = countCases(podList.Items, func(p corev1.Pod) string { return p.Namespace })
	}
	nodeList, err := s.clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		errs = append(errs, "listing nodes: "+err.Error())
	} else {
		nodes = countCases(nodeList.Items, func(n corev1.Node) string { return n.Name })
	}
	return namespaces, pods, nodes, errs
}

// countCases counts the items whose name (or namespace) is a case's.
func countCases[T any](items []T, name func(T) string) int {
	n := 0
	for _, it := range items {
		if strings.HasPrefix(name(it), casePrefix) {
			n++
		}
	}
	return n
}

// apiServerPID finds this cluster's kube-apiserver in /proc: the process
// whose program is kube-apiserver and whose command line names a file in
// the cluster's folder (its certificates and audit log are there), so that
// another cluster on the machine is not measured. The cluster package does
// not export the process. 0 when it is not found.
func (s *soak) apiServerPID() int {
	if s.apiPID > 0 && isAPIServer(s.apiPID, s.env.Cluster().Dir()) {
		return s.apiPID
	}
	s.apiPID = 0
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err == nil && isAPIServer(pid, s.env.Cluster().Dir()) {
			s.apiPID = pid
			break
		}
	}
	return s.apiPID
}

func isAPIServer(pid int, dir string) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(cmdline) == 0 {
		return false
	}
	args := bytes.Split(bytes.TrimRight(cmdline, "\x00"), []byte{0})
	return filepath.Base(string(args[0])) == "kube-apiserver" &&
		bytes.Contains(cmdline, []byte(filepath.Clean(dir)+string(filepath.Separator)))
}

// vmRSS reads VmRSS from a /proc status file, in bytes; -1 when it cannot.
func vmRSS(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			fields := strings.Fields(rest) // "123456 kB"
			if len(fields) == 2 && fields[1] == "kB" {
				if kb, err := strconv.ParseInt(fields[0], 10, 64); err == nil {
					return kb * 1024
				}
			}
		}
	}
	return -1
}

// saveScenario writes a failing case's scenario under the soak's folder,
// for the suite's TestConformance to replay with -kubeprop.replay.
func (s *soak) saveScenario(target string, n int, rep *harness.Report) (string, error) {
	path := filepath.Join(s.scenarioTo, target, fmt.Sprintf("%s-case%d.yaml", rep.Failures[0].Property, n))
	return path, rep.SaveScenario(path, "TestConformance/"+target)
}

// summary prints the outcome and the growth over the run.
func (s *soak) summary(interrupted bool) {
	how := "done"
	if interrupted {
		how = "interrupted"
	}
	fmt.Printf("soak: %s: %d of %d cases in %s: %d failures, %d harness errors, %d teardowns left something\n",
		how, s.done, s.cases, time.Since(s.start).Round(time.Second), s.failures, s.errors, s.left)
	if s.last == nil {
		fmt.Println("soak: no case ran to its end: nothing measured")
		return
	}
	from := s.reference
	if from == nil || from == s.last {
		from = s.baseline // fewer cases than -every: from the first
	}
	per := ""
	if d := s.last.cases - from.cases; d >= 100 { // a rate over fewer cases is mostly warm-up
		per = fmt.Sprintf(", %s per 100 cases", signedMiB((s.last.rss-from.rss)*100/int64(d), from.rss, s.last.rss))
	}
	fmt.Printf("soak: rss %s at case %d -> %s at case %d (%s%s); heap %s -> %s (%s); apiserver_rss %s -> %s (%s)\n",
		mib(from.rss), from.cases, mib(s.last.rss), s.last.cases, signedMiB(s.last.rss-from.rss, from.rss, s.last.rss), per,
		mib(from.heap), mib(s.last.heap), signedMiB(s.last.heap-from.heap, from.heap, s.last.heap),
		mib(from.apiRSS), mib(s.last.apiRSS), signedMiB(s.last.apiRSS-from.apiRSS, from.apiRSS, s.last.apiRSS))
	fmt.Printf("soak: goroutines %d after case 1 -> %d at case %d (%+d); left at the end: namespaces=%s pods=%s nodes=%s\n",
		s.baseline.goroutines, s.last.goroutines, s.last.cases, s.last.goroutines-s.baseline.goroutines,
		count(s.last.namespaces), count(s.last.pods), count(s.last.nodes))
}

// mib prints a size in MiB; ? when unknown.
func mib(b int64) string {
	if b < 0 {
		return "?"
	}
	return fmt.Sprintf("%.1fMiB", float64(b)/(1<<20))
}

// signedMiB prints a difference in MiB with its sign; ? when either end
// is unknown.
func signedMiB(d, from, to int64) string {
	if from < 0 || to < 0 {
		return "?"
	}
	return fmt.Sprintf("%+.1fMiB", float64(d)/(1<<20))
}

func count(n int) string {
	if n < 0 {
		return "?"
	}
	return strconv.Itoa(n)
}
