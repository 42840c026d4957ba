package harness

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubeprop/kubeprop/faults"
)

// The search's settings have one definition, here, for every way in:
// go test reads them as -kubeprop.<name> flags, kubeprop run, the demo
// and the soak as -<name>; each has an environment twin KUBEPROP_<NAME>
// that sets it when its flag is not given. Zero means the default
// (SearchOptions). A twin whose value does not parse is an error that
// names it, not a default taken quietly.

// searchSettings are the settings of SearchOptions, by name, each with
// what its value takes (for the error of a twin that does not parse).
var searchSettings = []struct {
	name, usage, takes string
	define             func(fs *flag.FlagSet, o *SearchOptions, name, usage string)
}{
	{"checks", fmt.Sprintf("fault plans to draw (0: %d)", DefaultChecks), "a whole number",
		func(fs *flag.FlagSet, o *SearchOptions, name, usage string) { fs.IntVar(&o.Checks, name, 0, usage) }},
	{"seed", "the search's seed, to repeat it (0: a random one, named in the finding)", "a whole number from 0",
		func(fs *flag.FlagSet, o *SearchOptions, name, usage string) { fs.Uint64Var(&o.Seed, name, 0, usage) }},
	{"shrinktime", fmt.Sprintf("time budget for shrinking a failure (0: %v)", DefaultShrinkTime), "a duration such as 90s or 2m",
		func(fs *flag.FlagSet, o *SearchOptions, name, usage string) {
			fs.DurationVar(&o.ShrinkTime, name, 0, usage)
		}},
	{"parallel", fmt.Sprintf("cases run at once, 1 to %d (0: %d; %d under -race)", MaxParallel, defaultParallel, defaultParallelRace), "a whole number",
		func(fs *flag.FlagSet, o *SearchOptions, name, usage string) { fs.IntVar(&o.Parallel, name, 0, usage) }},
	{"shard", "run shard I/N of the search: the plans whose index is I mod N (needs the seed; in an Indexed Job, -shards N takes I from $JOB_COMPLETION_INDEX)", "I/N, such as 0/3",
		func(fs *flag.FlagSet, o *SearchOptions, name, usage string) { fs.Var(&o.Shard, name, usage) }},
}

// EnvTwin is the environment variable that sets the setting of a flag
// name when the flag is not given: KUBEPROP_SHRINKTIME for shrinktime,
// KUBEPROP_REPLAY_COUNT for replay.count.
func EnvTwin(name string) string {
	return "KUBEPROP_" + strings.ToUpper(strings.ReplaceAll(name, ".", "_"))
}

// SearchFlags defines the search's settings on fs, each as prefix+name
// (go test's are "kubeprop."), and returns the options they give, to be
// called once fs is parsed. Each is set from its environment twin
// (EnvTwin) unless its flag is given. In a pod of a Kubernetes Indexed Job
// ($JOB_COMPLETION_INDEX set), -shards N (twin KUBEPROP_SHARDS) makes the
// search the shard of the job's index. The error names each twin that
// does not parse and what it takes, and a shard that cannot be run.
func SearchFlags(fs *flag.FlagSet, prefix string) func() (SearchOptions, error) {
	o := &SearchOptions{}
	var errs []error
	define := func(name, usage, takes string, def func(name, usage string)) {
		usage = fmt.Sprintf("%s (env %s)", usage, EnvTwin(name))
		if owner, ok := strings.CutSuffix(prefix, "."); ok {
			usage = owner + ": " + usage // among go test's flags
		}
		def(prefix+name, usage)
		errs = append(errs, fromEnv(fs.Lookup(prefix+name).Value, name, takes))
	}
	for _, s := range searchSettings {
		define(s.name, s.usage, s.takes, func(name, usage string) { s.define(fs, o, name, usage) })
	}
	var shards int
	define("shards", "the number of shards, for a search in an Indexed Job: the shard's index is $JOB_COMPLETION_INDEX", "a whole number",
		func(name, usage string) { fs.IntVar(&shards, name, 0, usage) })
	return func() (SearchOptions, error) {
		if err := errors.Join(errs...); err != nil {
			return SearchOptions{}, err
		}
		opts := *o
		var err error
		if opts.Shard, err = shardOfJob(opts.Shard, shards); err != nil {
			return SearchOptions{}, err
		}
		if opts.Shard.sharded() && opts.Seed == 0 {
			return SearchOptions{}, fmt.Errorf("shard %s has no seed: give every shard the same -%sseed (env %s), or each draws its own plans", opts.Shard, prefix, EnvTwin("seed"))
		}
		return opts, nil
	}
}

// fromEnv sets v from the twin of the setting name, when it is set;
// takes says what a value must be.
func fromEnv(v flag.Value, name, takes string) error {
	twin := EnvTwin(name)
	s, ok := os.LookupEnv(twin)
	if !ok || s == "" {
		return nil
	}
	if err := v.Set(s); err != nil {
		return fmt.Errorf("$%s is %q: not %s", twin, s, takes)
	}
	return nil
}

// The settings as go test reads them.
var (
	testSearch      = SearchFlags(flag.CommandLine, "kubeprop.")
	listFlag        = flag.Bool("kubeprop.list", false, "kubeprop: Check prints the index and plan of each plan its search would run (with -kubeprop.shard, the shard's), and runs none; no cluster starts (env KUBEPROP_LIST)")
	replayFlag      = flag.String("kubeprop.replay", "", "kubeprop: replay this scenario file instead of drawing plans (env KUBEPROP_REPLAY)")
	replayCountFlag = flag.Int("kubeprop.replay.count", 1, "kubeprop: replay each scenario this many times, -kubeprop.parallel at a time, and say how many reproduced its failure (env KUBEPROP_REPLAY_COUNT)")
	updateFlag      = flag.Bool("kubeprop.update", false, "kubeprop: a replay that does not see what its scenario expects rewrites the expectation to what it saw, instead of failing (env KUBEPROP_UPDATE)")
	testFlagsErr    = errors.Join(
		fromEnv(flagValue("kubeprop.list"), "list", "true or false"),
		fromEnv(flagValue("kubeprop.replay"), "replay", "a scenario file"),
		fromEnv(flagValue("kubeprop.replay.count"), "replay.count", "a whole number"),
		fromEnv(flagValue("kubeprop.update"), "update", "true or false"))
)

// listing: a test binary given -kubeprop.list, in which Check lists
// plans and Start starts no cluster.
func listing() bool { return testing.Testing() && *listFlag }

func flagValue(name string) flag.Value { return flag.CommandLine.Lookup(name).Value }

// SearchOptionsFromFlags is what Check searches with: the -kubeprop.*
// flags of go test and their KUBEPROP_* twins (SearchFlags). rapid's own
// flags (-rapid.checks, ...) are rapid's, for the package's rapid tests;
// the search does not read them.
func SearchOptionsFromFlags() (SearchOptions, error) {
	opts, err := testSearch()
	if err = errors.Join(testFlagsErr, err); err != nil {
		return SearchOptions{}, fmt.Errorf("kubeprop's settings: %w", err)
	}
	return opts, nil
}

// ignoredRapidFlags names the rapid flags given (or their RAPID_* twins)
// that the search does not read, each with the kubeprop flag that sets
// what it seems to mean.
func ignoredRapidFlags() []string {
	given := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var out []string
	for _, s := range searchSettings {
		rapidName, rapidTwin := "rapid."+s.name, "RAPID_"+strings.ToUpper(s.name)
		if flag.Lookup(rapidName) == nil || given["kubeprop."+s.name] || os.Getenv(EnvTwin(s.name)) != "" {
			continue
		}
		switch {
		case given[rapidName]:
			out = append(out, fmt.Sprintf("-%s is rapid's own; the search reads -kubeprop.%s (env %s)", rapidName, s.name, EnvTwin(s.name)))
		case os.Getenv(rapidTwin) != "":
			out = append(out, fmt.Sprintf("$%s is rapid's own; the search reads $%s (flag -kubeprop.%s)", rapidTwin, EnvTwin(s.name), s.name))
		}
	}
	return out
}

// SearchOptions configure a search (Check, Find). The zero value is 100
// plans from a random seed, 1 m of shrinking, DefaultParallel cases at a
// time, and scenarios under testdata/kubeprop/<name>. go test, kubeprop
// run, the demo and the soak take the same settings by the same names
// (SearchFlags).
type SearchOptions struct {
	// Checks is how many plans to draw. Zero means 100.
	Checks int
	// Seed makes a search repeatable: the same seed draws the same plans.
	// Zero draws a random one, which the finding names.
	Seed uint64
	// ShrinkTime bounds shrinking, from the first failure on. Zero means
	// 1 m.
	ShrinkTime time.Duration
	// Parallel is how many cases run at once, in the search and in each
	// shrink pass: 1 to 64. Zero means DefaultParallel().
	Parallel int
	// Shard, of a Count above 1, runs only that shard's plans (see
	// Shard): the Count shards of one Seed together run the plans of the
	// whole search, each shrinking its own failure. A shard needs a Seed.
	Shard Shard
	// Dir is where the scenario and the HTML timeline of a failure go.
	// Empty means testdata/kubeprop/<name>, relative to the working folder.
	Dir string
	// OnCase, when set, is called with the report of every case as it
	// ends, one call at a time (with Parallel > 1 from the goroutines that
	// ran the cases, never two at once).
	OnCase func(*Report)
	// OnSkip, when set, is called with a plan drawn that the search does
	// not run: the same plan ran before (rapid draws short plans more
	// than once). Called as OnCase is.
	OnSkip func(plan []faults.Step)
}

// The search's defaults: what zero SearchOptions.Checks and ShrinkTime
// mean.
const (
	DefaultChecks     = 100
	DefaultShrinkTime = time.Minute
)

// MaxParallel bounds SearchOptions.Parallel.
const MaxParallel = 64

// DefaultParallel is what a zero SearchOptions.Parallel means: the cases
// at once that keep a 2-core machine busy without false alarms (see the
// README's bench table); two in a binary built with -race, whose
// in-process work is several times slower.
func DefaultParallel() int {
	if raceDetector {
		return defaultParallelRace
	}
	return defaultParallel
}

const (
	defaultParallel     = 16
	defaultParallelRace = 2
)

func (o SearchOptions) withDefaults(name string) SearchOptions {
	if o.Checks == 0 {
		o.Checks = DefaultChecks
	}
	if o.Seed == 0 {
		o.Seed = rand.Uint64()
	}
	if o.ShrinkTime == 0 {
		o.ShrinkTime = DefaultShrinkTime
	}
	if o.Parallel == 0 {
		o.Parallel = DefaultParallel()
	}
	if o.Dir == "" {
		o.Dir = filepath.Join(ScenarioDir, name)
	}
	return o
}

func (o SearchOptions) validate() error {
	var errs []error
	if o.Checks < 0 {
		errs = append(errs, fmt.Errorf("SearchOptions.Checks is %d: give a number of plans, or 0 for %d", o.Checks, DefaultChecks))
	}
	if o.ShrinkTime < 0 {
		errs = append(errs, fmt.Errorf("SearchOptions.ShrinkTime is %v: give a duration, or 0 for %v", o.ShrinkTime, DefaultShrinkTime))
	}
	if err := o.Shard.validate(); err != nil {
		errs = append(errs, fmt.Errorf("SearchOptions.Shard: %w", err))
	}
	if o.Parallel < 0 || o.Parallel > MaxParallel {
		errs = append(errs, fmt.Errorf("SearchOptions.Parallel is %d: give 1 to %d cases at once, or 0 for the default (%d)", o.Parallel, MaxParallel, DefaultParallel()))
	}
	if err := writable(o.Dir); err != nil {
		errs = append(errs, fmt.Errorf("SearchOptions.Dir: %w", err))
	}
	return errors.Join(errs...)
}

// writable checks, without creating anything, that dir can be made and
// written: its nearest existing ancestor is a writable folder.
func writable(dir string) error {
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		info, err := os.Stat(p)
		switch {
		case err == nil && !info.IsDir():
			return fmt.Errorf("%s is not a folder, so %s cannot be made", p, dir)
		case err == nil:
			if err := syscall.Access(p, 2 /* W_OK */); err != nil {
				return fmt.Errorf("folder %s cannot be written: %w", p, err)
			}
			return nil
		case !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
			return fmt.Errorf("%s: %w", dir, err)
		}
		if filepath.Dir(p) == p {
			return nil
		}
	}
}
