package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness/cluster"
	"github.com/kubeprop/kubeprop/harness/scenario"
)

// listed runs kubeprop run --list with args and returns its plans by
// index, each listed once.
func listed(t *testing.T, args ...string) map[int]string {
	t.Helper()
	code, stdout, _ := kubeprop(t, append([]string{"run", "--list"}, args...)...)
	require.Equal(t, exitPass, code)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	require.Regexp(t, `^seed 42(, shard \d/3)?: \d+ plans`, lines[0])
	plans := map[int]string{}
	for _, line := range lines[1:] {
		m := regexp.MustCompile(`^(\d+) (random|aimed|probed)(,again)? (\[.*\])$`).FindStringSubmatch(line)
		require.NotNil(t, m, "a plan's line: %q", line)
		i, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		_, twice := plans[i]
		require.False(t, twice, "plan %d listed twice", i)
		plans[i] = strings.Join(m[2:], " ")
	}
	return plans
}

// TestListedShardsMakeOneRun: the plans kubeprop run --list --shard i/3
// lists for i = 0, 1, 2 are together the plans it lists unsharded, none
// in two shards; no cluster starts.
func TestListedShardsMakeOneRun(t *testing.T) {
	spec := writeSpec(t, "", "")
	whole := listed(t, "--checks", "30", "--seed", "42", spec)
	require.Len(t, whole, 30)
	parts := map[int]string{}
	for i := range 3 {
		for index, plan := range listed(t, "--checks", "30", "--seed", "42", "--shard", strconv.Itoa(i)+"/3", spec) {
			require.Equal(t, i, index%3, "plan %d in shard %d", index, i)
			_, twice := parts[index]
			require.False(t, twice, "plan %d in two shards", index)
			parts[index] = plan
		}
	}
	require.Equal(t, whole, parts)
}

// TestBadShards: every shard that cannot be run is exit code 2 with a
// message that names the problem, before any cluster starts.
func TestBadShards(t *testing.T) {
	spec := writeSpec(t, "", "")
	for args, want := range map[string]string{
		"--shard 3/3":  "shard 3/3: the index counts from 0 to N-1: give 0/3 to 2/3",
		"--shard 0/0":  `shard "0/0": a search has 1 shard or more`,
		"--shard x/2":  `shard "x/2": write it I/N`,
		"--shard -1/2": "shard -1/2: the index counts from 0 to N-1",
		"--shard 1/3":  "shard 1/3 has no seed: give every shard the same -seed",
		"--shards 3":   "a count of 3 shards without the shard's index",
	} {
		code, _, stderr := kubeprop(t, append(append([]string{"run"}, strings.Fields(args)...), spec)...)
		require.Equal(t, exitBadInput, code, args)
		require.Contains(t, stderr, want, args)
	}
	t.Setenv("JOB_COMPLETION_INDEX", "2")
	code, _, stderr := kubeprop(t, "run", "--seed", "1", "--shard", "1/3", spec)
	require.Equal(t, exitBadInput, code)
	require.Contains(t, stderr, "shard 1/3 disagrees with $JOB_COMPLETION_INDEX=2: give -shard 2/3")
	code, _, stderr = kubeprop(t, "run", "--seed", "1", spec)
	require.Equal(t, exitBadInput, code)
	require.Contains(t, stderr, "$JOB_COMPLETION_INDEX is set (2) but no shard count: give -shards N (env KUBEPROP_SHARDS)")
	code, stdout, _ := kubeprop(t, "run", "--list", "--seed", "1", "--shards", "3", spec)
	require.Equal(t, exitPass, code)
	require.Contains(t, stdout, "seed 1, shard 2/3: ", "the job's index")
}

// shardOutput writes what kubeprop run --junit writes into dir, as a run
// of summary sum with one test case tc, and a scenario named file under
// its testdata/kubeprop/spec/ with a timeline beside it.
func shardOutput(t *testing.T, dir string, sum runSummary, tc junitCase, file string) {
	t.Helper()
	tc.Name, tc.Classname = "spec", "kubeprop.run"
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, writeJUnit(filepath.Join(dir, "junit.xml"), junitSuite{Name: "kubeprop.run", Time: "60.000", Cases: []junitCase{tc}, Properties: sum.properties()}))
	if file == "" {
		return
	}
	s, err := scenario.New([]faults.Step{faults.NodeLossStep{Node: 1}}, "", scenario.Expect{Outcome: scenario.Fail, Property: "converges", Message: "converges failed"})
	require.NoError(t, err)
	s.Spec = "../../../spec.yaml"
	path := filepath.Join(dir, "testdata", "kubeprop", "spec", file)
	require.NoError(t, s.Write(path))
	require.NoError(t, os.WriteFile(strings.TrimSuffix(path, ".yaml")+".html", []byte("<html></html>"), 0o644))
}

// TestMerge: kubeprop merge adds the shards' runs up into one report and
// one scenario folder, renaming what clashes, and its exit code is the
// worst: a failure is 1; a shard's harness error, a shard missing, or a
// folder with no kubeprop output is 2, never a pass.
func TestMerge(t *testing.T) {
	root := t.TempDir()
	a, b, c := filepath.Join(root, "a"), filepath.Join(root, "b"), filepath.Join(root, "c")
	fail := &junitProblem{Message: "converges: not within 30s", Type: "converges", Text: "property converges"}
	shardOutput(t, a, runSummary{Plans: 4, Failures: 1, ShrinkRuns: 6, Seed: 9, Shard: "0/3"}, junitCase{Failure: fail}, "converges-1.yaml")
	shardOutput(t, b, runSummary{Plans: 4, Again: 1, NotJudged: 2, Seed: 9, Shard: "1/3"}, junitCase{}, "")
	shardOutput(t, c, runSummary{Plans: 3, Failures: 1, ShrinkRuns: 2, Seed: 9, Shard: "2/3"}, junitCase{Failure: fail}, "converges-1.yaml")

	out := filepath.Join(root, "merged")
	code, stdout, stderr := kubeprop(t, "merge", out, a, b, c)
	require.Equal(t, exitFailed, code)
	require.Regexp(t, `^11 plans \(and 1 drawn again, not run twice\), 2 failures \(2 plans not judged\), 8 shrink runs, 1m0s, seed 9, 3 runs merged\n$`, stdout)
	renamed := filepath.Join(out, "testdata", "kubeprop", "spec", "converges-1.2.yaml")
	require.Contains(t, stderr, "is written as "+renamed+": the name was taken")
	for _, f := range []string{"converges-1.yaml", "converges-1.html", "converges-1.2.yaml", "converges-1.2.html"} {
		require.FileExists(t, filepath.Join(out, "testdata", "kubeprop", "spec", f))
	}
	s, err := scenario.Read(renamed)
	require.NoError(t, err)
	require.Equal(t, filepath.Join("..", "..", "..", "..", "c", "spec.yaml"), s.Spec, "the spec path, from where the scenario is now")

	report, err := os.ReadFile(filepath.Join(out, "junit.xml"))
	require.NoError(t, err)
	var merged junitSuites
	require.NoError(t, xml.Unmarshal(report, &merged))
	require.Len(t, merged.Suites, 1)
	suite := merged.Suites[0]
	require.Equal(t, 3, suite.Tests)
	require.Equal(t, 2, suite.Failures)
	require.Equal(t, []string{"spec [shard 0/3]", "spec [shard 1/3]", "spec [shard 2/3]"}, []string{suite.Cases[0].Name, suite.Cases[1].Name, suite.Cases[2].Name})
	sum, err := summaryOf(suite.Properties)
	require.NoError(t, err)
	require.Equal(t, runSummary{Plans: 11, Again: 1, Failures: 2, ShrinkRuns: 8, NotJudged: 2, Seed: 9}, sum)

	// One run's folder given twice: its test case and scenario renamed.
	e := filepath.Join(root, "e")
	shardOutput(t, e, runSummary{Plans: 2, Seed: 9}, junitCase{}, "quiescent-1.yaml")
	code, stdout, stderr = kubeprop(t, "merge", filepath.Join(root, "m1"), e, e)
	require.Equal(t, exitPass, code)
	require.Contains(t, stdout, "4 plans, 0 failures, 0 shrink runs, 1m0s, seed 9, 2 runs merged")
	require.Contains(t, stderr, `test case "spec" of `+filepath.Join(e, "junit.xml")+` is named "spec (2)": the name was taken`)
	require.FileExists(t, filepath.Join(root, "m1", "testdata", "kubeprop", "spec", "quiescent-1.2.yaml"))

	// A shard missing: not a pass.
	code, _, stderr = kubeprop(t, "merge", filepath.Join(root, "m2"), b)
	require.Equal(t, exitBadInput, code)
	require.Contains(t, stderr, "the campaign is incomplete: no report of shard 0/3, 2/3")
	// A shard's harness error: not a pass.
	d := filepath.Join(root, "d")
	shardOutput(t, d, runSummary{Seed: 9, Shard: "0/1"}, junitCase{Error: &junitProblem{Message: "the harness failed: x", Type: "harness"}}, "")
	code, stdout, _ = kubeprop(t, "merge", filepath.Join(root, "m3"), d)
	require.Equal(t, exitBadInput, code)
	require.Contains(t, stdout, "0 plans, 0 failures")
	// A folder with no kubeprop output.
	code, _, stderr = kubeprop(t, "merge", filepath.Join(root, "m4"), t.TempDir())
	require.Equal(t, exitBadInput, code)
	require.Contains(t, stderr, "holds no kubeprop output: no JUnit report of kubeprop run (--junit) and no scenario")
	code, _, stderr = kubeprop(t, "merge", filepath.Join(root, "m5"))
	require.Equal(t, exitBadInput, code)
	require.Contains(t, stderr, "give the folder to write and one folder or more to merge")
}

// TestShardsMergeToOneRun: three shards of 12 podset plans, run one after
// another and merged, run as many plans as one run of them, with the
// same outcome.
func TestShardsMergeToOneRun(t *testing.T) {
	t.Parallel() // each run starts a hollow cluster of its own
	spec := writeSpec(t, "", "faults: [{fault: ScaleChange, max: 4}, {fault: ContainerKill}, {fault: APIErrors}, {fault: CrashAfterWrite}]\nproperties: [bounded-backoff, no-fight-loop, quiescent, no-panics]\n")
	root := t.TempDir()
	args := []string{"run", "--checks", "12", "--seed", "77", "--parallel", "4"}
	summary := regexp.MustCompile(`(?m)^(\d+) plans(?: \(and (\d+) drawn again, not run twice\))?, (\d+) failures`)
	counts := func(stdout string) (plans, again int) {
		m := summary.FindStringSubmatch(stdout)
		require.NotNil(t, m, stdout)
		plans, _ = strconv.Atoi(m[1])
		if m[2] != "" {
			again, _ = strconv.Atoi(m[2])
		}
		return plans, again
	}
	wholeCode, stdout, _ := kubeprop(t, append(args, "--out", filepath.Join(root, "whole"), spec)...)
	wholePlans, wholeAgain := counts(stdout)
	require.Equal(t, 12, wholePlans+wholeAgain)
	var dirs []string
	shardPlans := 0
	for i := range 3 {
		dir := filepath.Join(root, "shard-"+strconv.Itoa(i))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		code, stdout, _ := kubeprop(t, append(args, "--shard", strconv.Itoa(i)+"/3", "--junit", filepath.Join(dir, "junit.xml"), "--out", dir, spec)...)
		require.Equal(t, wholeCode, code, "shard %d/3's outcome", i)
		require.Contains(t, stdout, ", shard "+strconv.Itoa(i)+"/3\n")
		plans, again := counts(stdout)
		require.Equal(t, 4, plans+again, "shard %d/3 takes 4 of the 12", i)
		shardPlans += plans
		dirs = append(dirs, dir)
	}
	code, stdout, _ := kubeprop(t, append([]string{"merge", filepath.Join(root, "merged")}, dirs...)...)
	require.Equal(t, wholeCode, code, "the merged outcome is the one run's")
	plans, again := counts(stdout)
	require.Equal(t, wholePlans, plans, "the plans the one run ran")
	require.Equal(t, wholeAgain, again)
	require.Equal(t, shardPlans, plans)
	require.Contains(t, stdout, ", seed 77, 3 runs merged")
}

// TestCampaignManifest: deploy/campaign/job.yaml passes a server-side dry
// run on the hollow cluster's API server, its shard count is its
// completions, and every file the Dockerfile copies from the repository
// is there.
func TestCampaignManifest(t *testing.T) {
	t.Parallel() // a cluster of its own
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Stop()) }()
	cl, err := client.New(c.Config(), client.Options{})
	require.NoError(t, err)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "campaign"}}
	require.NoError(t, cl.Create(ctx, ns))

	manifest, err := os.ReadFile("../../deploy/campaign/job.yaml")
	require.NoError(t, err)
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	var kinds []string
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); err != nil {
			require.ErrorContains(t, err, "EOF")
			break
		}
		if obj.Object == nil {
			continue
		}
		obj.SetNamespace(ns.Name)
		require.NoError(t, cl.Create(ctx, &obj, client.DryRunAll), "%s %s", obj.GetKind(), obj.GetName())
		kinds = append(kinds, obj.GetKind())
		if obj.GetKind() != "Job" {
			continue
		}
		completions, _, _ := unstructured.NestedInt64(obj.Object, "spec", "completions")
		containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
		args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
		require.Contains(t, args, "--shard=$(JOB_COMPLETION_INDEX)/"+strconv.FormatInt(completions, 10), "the shard count is the completions")
	}
	require.Equal(t, []string{"PersistentVolumeClaim", "Job"}, kinds)

	dockerfile, err := os.Open("../../deploy/campaign/Dockerfile")
	require.NoError(t, err)
	defer dockerfile.Close()
	var copied int
	for sc := bufio.NewScanner(dockerfile); sc.Scan(); {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 || fields[0] != "COPY" || strings.HasPrefix(fields[1], "--from") {
			continue
		}
		for _, src := range fields[1 : len(fields)-1] {
			_, err := os.Stat(filepath.Join("../..", src))
			require.NoError(t, err, "the Dockerfile copies %s", src)
			copied++
		}
	}
	require.GreaterOrEqual(t, copied, 4)
}
