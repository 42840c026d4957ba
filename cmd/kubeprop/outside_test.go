package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubeprop/kubeprop/harness/cluster"
)

// outsideTest is a controller author's test file, as the README's "Use
// kubeprop in your repository" shows it, on the bundled PodSet controller.
const outsideTest = `package mycontroller

import (
	"os"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kubeprop/kubeprop/controllers/podset"
	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness"
	"github.com/kubeprop/kubeprop/properties"
)

var env *harness.Env

func TestMain(m *testing.M) {
	env = harness.MustStart(harness.EnvOptions{CRDDirectoryPaths: []string{"config/crd"}})
	code := m.Run()
	env.Stop()
	os.Exit(code)
}

var spec = harness.Spec{
	Scheme: podset.Scheme(),
	Controller: harness.Manager(func(mgr manager.Manager, opts controller.Options) error {
		return (&podset.Reconciler{}).SetupWithManager(mgr, opts)
	}),
	Fixtures: func(ns string) []client.Object { return podset.Fixtures(ns) },
	Faults:   []faults.Fault{faults.ScaleChange(faults.ScaleOptions{})},
	Properties: []properties.Property{
		properties.Converges("converges", podset.Converged, properties.ConvergeOptions{Within: 30 * time.Second}),
		properties.NoPanics(),
	},
}

func TestConformance(t *testing.T) { harness.Check(t, env, spec) }
`

// TestOutsideRepository: kubeprop used from a module of its own, as a
// controller author's repository uses it: the cluster binaries found in
// the user cache that kubeprop bins filled (seeded here from those already
// built, so that nothing is built again), with neither KUBEPROP_ASSETS nor
// KUBEBUILDER_ASSETS set and no bin/ folder above it.
func TestOutsideRepository(t *testing.T) {
	t.Parallel()
	repo, err := filepath.Abs("../..")
	require.NoError(t, err)
	built := filepath.Join(repo, "bin", "k8s", cluster.KubernetesVersion)
	// Go's build cache lives in the user cache folder too: the module
	// outside keeps this one, or it would compile everything afresh.
	goCache, err := exec.Command("go", "env", "GOCACHE").Output()
	require.NoError(t, err)
	cache := t.TempDir()
	dir := filepath.Join(cache, "kubeprop", "k8s", cluster.KubernetesVersion)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	binaries, err := os.ReadDir(built)
	require.NoError(t, err, "the cluster binaries are built by make bins")
	for _, b := range binaries {
		linkOrCopy(t, filepath.Join(built, b.Name()), filepath.Join(dir, b.Name()))
	}

	mod := t.TempDir()
	files := map[string]string{
		"go.mod":             "module example.com/mycontroller\n\ngo 1.26.0\n\nrequire github.com/kubeprop/kubeprop v0.0.0\n\nreplace github.com/kubeprop/kubeprop => " + repo + "\n",
		"controller_test.go": outsideTest,
	}
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(mod, name), []byte(content), 0o644))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(mod, "config", "crd"), 0o755))
	linkOrCopy(t, filepath.Join(repo, "testdata", "crds", "podsets.yaml"), filepath.Join(mod, "config", "crd", "podsets.yaml"))

	// The commands run with the user cache moved and neither asset
	// variable set: their environment only, as the test runs beside others.
	var childEnv []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBEPROP_ASSETS=") && !strings.HasPrefix(kv, "KUBEBUILDER_ASSETS=") && !strings.HasPrefix(kv, "XDG_CACHE_HOME=") {
			childEnv = append(childEnv, kv)
		}
	}
	childEnv = append(childEnv, "XDG_CACHE_HOME="+cache, "GOFLAGS=-mod=mod", "GOWORK=off", "GOCACHE="+strings.TrimSpace(string(goCache)))
	goCmd := func(args ...string) (string, string) {
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = mod, childEnv
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		require.NoError(t, err, "go %s in the module outside:\n%s%s", strings.Join(args, " "), stdout.String(), stderr.String())
		return stdout.String(), stderr.String()
	}
	goCmd("mod", "tidy")
	stdout, stderr := goCmd("run", "github.com/kubeprop/kubeprop/cmd/kubeprop", "bins", "--print-path")
	require.Equal(t, dir+"\n", stdout)
	require.Equal(t, 4, strings.Count(stderr, "there already"), stderr)
	out, _ := goCmd("test", "-count=1", "-v", "-run", "TestConformance", ".", "-kubeprop.checks=2")
	require.Contains(t, out, "--- PASS: TestConformance")
}

func linkOrCopy(t *testing.T, from, to string) {
	t.Helper()
	if os.Link(from, to) == nil {
		return
	}
	src, err := os.Open(from)
	require.NoError(t, err)
	defer src.Close()
	st, err := src.Stat()
	require.NoError(t, err)
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, st.Mode())
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
}
