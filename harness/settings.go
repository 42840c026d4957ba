package harness

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
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
	{"parallel", fmt.Sprintf("cases run at once, 1 to %d (0: %d in this binary; 2 under -race)", MaxParallel, DefaultParallel()), "a whole number",
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
		if opts.Shard.Count > 1 && opts.Seed == 0 {
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

// jobIndexEnv is the variable a Kubernetes Indexed Job gives each pod its
// completion index in.
const jobIndexEnv = "JOB_COMPLETION_INDEX"

// shardOfJob is the shard of a search given shard (zero: not given) and
// count (the -shards setting; 0: not given), in a pod of an Indexed Job
// when JOB_COMPLETION_INDEX is set: its index is the job's, its count
// that of the shard or of count. A shard given that disagrees with the
// job's index, or a job index with no count, is an error.
func shardOfJob(shard Shard, count int) (Shard, error) {
	if count < 0 {
		return Shard{}, fmt.Errorf("the shard count is %d: give the number of shards, 1 or more", count)
	}
	if shard.Count > 0 && count > 0 && shard.Count != count {
		return Shard{}, fmt.Errorf("shard %s and a count of %d shards disagree: give one of them", shard, count)
	}
	job, inJob := os.LookupEnv(jobIndexEnv)
	if !inJob || job == "" {
		if shard.Count == 0 && count > 0 {
			return Shard{}, fmt.Errorf("a count of %d shards without the shard's index: give -shard I/%d, or run in an Indexed Job (which sets $%s)", count, count, jobIndexEnv)
		}
		return shard, nil
	}
	index, err := strconv.Atoi(job)
	if err != nil || index < 0 {
		return Shard{}, fmt.Errorf("$%s is %q: not a completion index (0, 1, ...)", jobIndexEnv, job)
	}
	switch {
	case shard.Count > 0 && shard.Index != index:
		return Shard{}, fmt.Errorf("shard %s disagrees with $%s=%d: give -shard %d/%d, or no -shard (the job's index is taken)", shard, jobIndexEnv, index, index, shard.Count)
	case shard.Count > 0:
		return shard, nil
	case count == 0:
		return Shard{}, fmt.Errorf("$%s is set (%d) but no shard count: give -shards N (env %s), the job's completions", jobIndexEnv, index, EnvTwin("shards"))
	}
	return ParseShard(fmt.Sprintf("%d/%d", index, count))
}
