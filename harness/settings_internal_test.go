package harness

import (
	"context"
	"flag"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness/scenario"
)

// TestSearchFlags: each setting is a flag under the prefix, set from its
// env twin, which a flag given overrides; a twin that does not parse is
// an error naming it and what it takes.
func TestSearchFlags(t *testing.T) {
	require.Equal(t, "KUBEPROP_SHRINKTIME", EnvTwin("shrinktime"))
	require.Equal(t, "KUBEPROP_REPLAY_COUNT", EnvTwin("replay.count"))

	t.Setenv("KUBEPROP_CHECKS", "7")
	t.Setenv("KUBEPROP_SHRINKTIME", "90s")
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	settings := SearchFlags(fs, "x.")
	require.NoError(t, fs.Parse(nil))
	o, err := settings()
	require.NoError(t, err)
	require.Equal(t, SearchOptions{Checks: 7, ShrinkTime: 90 * time.Second}, o, "from the twins")
	require.NoError(t, fs.Parse([]string{"-x.checks=9", "-x.seed", "42", "-x.parallel=3", "-x.shard=1/3"}))
	o, err = settings()
	require.NoError(t, err)
	require.Equal(t, SearchOptions{Checks: 9, Seed: 42, ShrinkTime: 90 * time.Second, Parallel: 3, Shard: Shard{Index: 1, Count: 3}}, o, "the flags over the twins")
	require.Error(t, fs.Parse([]string{"-x.seed=-1"}))

	t.Setenv("KUBEPROP_SHRINKTIME", "soon")
	t.Setenv("KUBEPROP_PARALLEL", "four")
	_, err = SearchFlags(flag.NewFlagSet("test", flag.ContinueOnError), "")()
	require.ErrorContains(t, err, `$KUBEPROP_SHRINKTIME is "soon": not a duration such as 90s or 2m`)
	require.ErrorContains(t, err, `$KUBEPROP_PARALLEL is "four": not a whole number`)
}

// TestShardSettings: a shard is I/N with 0 <= I < N, needs the seed, and
// in an Indexed Job takes its index from $JOB_COMPLETION_INDEX and its
// count from -shards; each bad setting is an error that names it.
func TestShardSettings(t *testing.T) {
	for bad, want := range map[string]string{
		"3/3":  "the index counts from 0 to N-1: give 0/3 to 2/3",
		"0/0":  "a search has 1 shard or more",
		"x/2":  "write it I/N",
		"-1/2": "the index counts from 0",
		"1":    "write it I/N",
	} {
		_, err := ParseShard(bad)
		require.ErrorContains(t, err, want, bad)
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		SearchFlags(fs, "")
		require.ErrorContains(t, fs.Parse([]string{"-seed=1", "-shard=" + bad}), want, bad)
	}
	sh, err := ParseShard("2/5")
	require.NoError(t, err)
	require.Equal(t, Shard{Index: 2, Count: 5}, sh)
	require.Equal(t, "2/5", sh.String())

	parse := func(args ...string) (SearchOptions, error) {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		settings := SearchFlags(fs, "")
		require.NoError(t, fs.Parse(args))
		return settings()
	}
	_, err = parse("-shard=1/3")
	require.ErrorContains(t, err, "shard 1/3 has no seed: give every shard the same -seed (env KUBEPROP_SEED)")
	_, err = parse("-seed=3", "-shards=3")
	require.ErrorContains(t, err, "a count of 3 shards without the shard's index: give -shard I/3, or run in an Indexed Job")
	_, err = parse("-seed=3", "-shard=1/3", "-shards=4")
	require.ErrorContains(t, err, "shard 1/3 and a count of 4 shards disagree")

	t.Setenv("JOB_COMPLETION_INDEX", "2")
	o, err := parse("-seed=3", "-shards=4")
	require.NoError(t, err)
	require.Equal(t, Shard{Index: 2, Count: 4}, o.Shard, "the job's index")
	t.Setenv("KUBEPROP_SHARDS", "5")
	o, err = parse("-seed=3")
	require.NoError(t, err)
	require.Equal(t, Shard{Index: 2, Count: 5}, o.Shard, "the count from its twin")
	t.Setenv("KUBEPROP_SHARDS", "")
	_, err = parse("-seed=3")
	require.ErrorContains(t, err, "$JOB_COMPLETION_INDEX is set (2) but no shard count: give -shards N (env KUBEPROP_SHARDS)")
	_, err = parse("-seed=3", "-shard=1/4")
	require.ErrorContains(t, err, "shard 1/4 disagrees with $JOB_COMPLETION_INDEX=2: give -shard 2/4")
	o, err = parse("-seed=3", "-shard=2/4")
	require.NoError(t, err)
	require.Equal(t, Shard{Index: 2, Count: 4}, o.Shard)
	_, err = parse("-seed=3", "-shards=2")
	require.ErrorContains(t, err, "shard 2/2: the index counts from 0 to N-1")
	t.Setenv("JOB_COMPLETION_INDEX", "two")
	_, err = parse("-seed=3", "-shards=4")
	require.ErrorContains(t, err, `$JOB_COMPLETION_INDEX is "two": not a completion index`)
}

// TestUpdateExpectation: -kubeprop.update rewrites a scenario to expect
// what its replays saw: every property held, or the property that failed
// (the one expected while it still fails, else the one that failed most),
// at the rate it reproduced when that was not every time.
func TestUpdateExpectation(t *testing.T) {
	failed := func(props ...string) *Report {
		rep := &Report{}
		for _, p := range props {
			rep.Failures = append(rep.Failures, Failure{Property: p, Message: p + " failed"})
		}
		return rep
	}
	fail := func(p string, rate float64) scenario.Expect {
		return scenario.Expect{Outcome: scenario.Fail, Property: p, Message: p + " failed", Rate: rate}
	}
	pass := scenario.Expect{Outcome: scenario.Pass}
	for _, c := range []struct {
		name     string
		expected scenario.Expect
		reps     Replays
		meets    bool
		seen     scenario.Expect
	}{
		{"fixed", fail("converges", 0), Replays{failed(), failed()}, false, pass},
		{"a new failure", pass, Replays{failed("quiescent"), failed("converges", "quiescent")}, false, fail("quiescent", 0)},
		{"less often", fail("converges", 0), Replays{failed("converges"), failed(), failed()}, false, fail("converges", 0.33)},
		{"as often as stated", fail("converges", 0.3), Replays{failed("converges"), failed(), failed()}, true, fail("converges", 0.33)},
		{"the expected one kept", fail("converges", 0), Replays{failed("quiescent"), failed("quiescent", "converges")}, false, fail("converges", 0.5)},
		{"another one instead", fail("converges", 0), Replays{failed("quiescent"), failed("no-panics")}, false, fail("no-panics", 0.5)},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.meets, meets(c.reps, c.expected))
			require.Equal(t, c.seen, expectationOf(c.reps, c.expected))
		})
	}

	file := filepath.Join(t.TempDir(), "testdata", "kubeprop", "TestX", "converges-1.yaml")
	plan := []faults.Step{faults.NodeLossStep{Node: 1}}
	s, err := scenario.New(plan, "TestX", fail("converges", 0))
	require.NoError(t, err)
	require.NoError(t, s.Write(file))
	was, now, updated, err := UpdateScenario(file, Replays{failed("converges")})
	require.NoError(t, err)
	require.False(t, updated, "the replays saw what it expects")
	require.Equal(t, was, now)
	was, now, updated, err = UpdateScenario(file, Replays{failed()})
	require.NoError(t, err)
	require.True(t, updated)
	require.Equal(t, fail("converges", 0), was)
	require.Equal(t, "fail converges", was.String())
	require.Equal(t, "pass", now.String())
	s, steps, err := scenario.ReadPlan(file, faults.Catalog())
	require.NoError(t, err)
	require.Equal(t, pass, s.Expect, "rewritten")
	require.Equal(t, faults.FormatPlan(plan), faults.FormatPlan(steps), "the plan as it was")
}

// TestListingStartsNoCluster: with -kubeprop.list, Start starts no
// cluster, and a case on its Env is an error that says why, not a panic.
func TestListingStartsNoCluster(t *testing.T) {
	*listFlag = true
	defer func() { *listFlag = false }()
	env, err := Start(EnvOptions{AssetsDir: t.TempDir()}) // no binaries there: none is looked for
	require.NoError(t, err)
	_, err = Run(context.Background(), env, Spec{}, nil)
	require.ErrorContains(t, err, "the hollow cluster is not running: start one with harness.Start (with -kubeprop.list, Start starts none")
	require.NoError(t, env.Stop())
}
