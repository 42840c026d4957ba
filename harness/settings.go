package harness

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// The search's settings have one definition, here, for every way in:
// go test reads them as -kubeprop.<name> flags, kubeprop run, the demo
// and the soak as -<name>; each has an environment twin KUBEPROP_<NAME>
// that sets it when its flag is not given. Zero means the default
// (SearchOptions). A twin whose value does not parse is an error that
// names it, not a default taken quietly.

// searchSettings are the settings of SearchOptions, by name.
var searchSettings = []struct {
	name, usage string
	value       func(o *SearchOptions) flag.Value
}{
	{"checks", fmt.Sprintf("fault plans to draw (0: %d)", DefaultChecks), func(o *SearchOptions) flag.Value { return (*intValue)(&o.Checks) }},
	{"seed", "the search's seed, to repeat it (0: a random one, named in the finding)", func(o *SearchOptions) flag.Value { return (*uintValue)(&o.Seed) }},
	{"shrinktime", fmt.Sprintf("time budget for shrinking a failure (0: %v)", DefaultShrinkTime), func(o *SearchOptions) flag.Value { return (*durationValue)(&o.ShrinkTime) }},
	{"parallel", fmt.Sprintf("cases run at once, 1 to %d (0: %d; %d under -race)", MaxParallel, defaultParallel, defaultParallelRace),
		func(o *SearchOptions) flag.Value { return (*intValue)(&o.Parallel) }},
}

// EnvTwin is the environment variable that sets the setting of a flag
// name when the flag is not given: KUBEPROP_SHRINKTIME for shrinktime,
// KUBEPROP_REPLAY_COUNT for replay.count.
func EnvTwin(name string) string {
	return "KUBEPROP_" + strings.ToUpper(strings.ReplaceAll(name, ".", "_"))
}

// SearchFlags defines the search's settings on fs, each as prefix+name
// (go test's are "kubeprop."), bound to the options returned, and sets
// each from its environment twin (EnvTwin) now: a flag given on the
// command line overrides its twin when fs is parsed. The error names each
// twin that does not parse, and what it takes.
func SearchFlags(fs *flag.FlagSet, prefix string) (*SearchOptions, error) {
	o := &SearchOptions{}
	var errs []error
	for _, s := range searchSettings {
		v := s.value(o)
		fs.Var(v, prefix+s.name, fmt.Sprintf("%s (env %s)", s.usage, EnvTwin(s.name)))
		errs = append(errs, fromEnv(v, s.name))
	}
	return o, errors.Join(errs...)
}

// fromEnv sets v from the twin of the setting name, when it is set.
func fromEnv(v flag.Value, name string) error {
	twin := EnvTwin(name)
	s, ok := os.LookupEnv(twin)
	if !ok || s == "" {
		return nil
	}
	if err := v.Set(s); err != nil {
		return fmt.Errorf("$%s is %q: %w", twin, s, err)
	}
	return nil
}

// The settings as go test reads them.
var (
	testSearch, testSearchErr = SearchFlags(flag.CommandLine, "kubeprop.")
	replayFlag                = flag.String("kubeprop.replay", "", "kubeprop: replay this scenario file instead of drawing plans (env KUBEPROP_REPLAY)")
	replayCountFlag           = flag.Int("kubeprop.replay.count", 1, "kubeprop: replay each scenario this many times, -kubeprop.parallel at a time, and say how many reproduced its failure (env KUBEPROP_REPLAY_COUNT)")
	updateFlag                = flag.Bool("kubeprop.update", false, "kubeprop: a replay that does not see what its scenario expects rewrites the expectation to what it saw, instead of failing (env KUBEPROP_UPDATE)")
	testFlagsErr              = errors.Join(testSearchErr,
		fromEnv(flagValue("kubeprop.replay"), "replay"), fromEnv(flagValue("kubeprop.replay.count"), "replay.count"),
		fromEnv(flagValue("kubeprop.update"), "update"))
)

func flagValue(name string) flag.Value { return flag.CommandLine.Lookup(name).Value }

// SearchOptionsFromFlags is what Check searches with: the -kubeprop.*
// flags of go test and their KUBEPROP_* twins (SearchFlags). rapid's own
// flags (-rapid.checks, ...) are rapid's, for the package's rapid tests;
// the search does not read them.
func SearchOptionsFromFlags() (SearchOptions, error) {
	if testFlagsErr != nil {
		return SearchOptions{}, fmt.Errorf("kubeprop's settings: %w", testFlagsErr)
	}
	return *testSearch, nil
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

type intValue int

func (v *intValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("not a whole number")
	}
	*v = intValue(n)
	return nil
}
func (v *intValue) String() string { return strconv.Itoa(int(*v)) }

type uintValue uint64

func (v *uintValue) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return fmt.Errorf("not a whole number from 0")
	}
	*v = uintValue(n)
	return nil
}
func (v *uintValue) String() string { return strconv.FormatUint(uint64(*v), 10) }

type durationValue time.Duration

func (v *durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("not a duration such as 90s or 2m")
	}
	*v = durationValue(d)
	return nil
}
func (v *durationValue) String() string { return time.Duration(*v).String() }
