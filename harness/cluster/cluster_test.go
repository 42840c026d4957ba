package cluster

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// leakModeEnv makes the test binary a helper that starts a cluster and then
// ends in the way the variable names, for TestNoLeakedProcesses.
const leakModeEnv = "KUBEPROP_TEST_LEAK_MODE"

// clusterProcesses is how many processes the helper runs that name its
// cluster's folder: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and a controller binary.
const clusterProcesses = 5

// processWait bounds the waits for processes to show in /proc or leave it:
// generous, for a machine loaded by other test binaries.
const processWait = 30 * time.Second

// awaitProcesses waits until exactly n processes name a file in dir and
// returns those of the last look, n of them unless processWait passed.
// A process started a moment ago may not show yet: exec.Cmd.Start returns
// once the child is inside execve, but the kernel sets the new program's
// command line and environment (mm->arg_start, env_start) only after it
// has closed the close-on-exec pipe Start waits on, so for a moment
// /proc/<pid>/cmdline and environ read empty. On a loaded machine the
// moment is long enough for a single look to miss the process.
func awaitProcesses(dir string, n int) []int {
	var pids []int
	_ = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, processWait, true, func(context.Context) (bool, error) {
		pids = processesUnder(dir)
		return len(pids) == n, nil
	})
	return pids
}

// requireStaysGone waits until gone reports true, then checks that it
// keeps reporting true for a second: what was stopped must not come back.
// gone also describes what is left, for the failure.
func requireStaysGone(t *testing.T, what string, gone func() (bool, string)) {
	t.Helper()
	var left string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, processWait, true, func(context.Context) (bool, error) {
		ok, desc := gone()
		left = desc
		return ok, nil
	})
	require.NoError(t, err, "%s: still there after %v: %s", what, processWait, left)
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		time.Sleep(100 * time.Millisecond)
		ok, desc := gone()
		require.True(t, ok, "%s: back after it was gone: %s", what, desc)
	}
}

// noProcessesUnder is a gone func for requireStaysGone: no process names a
// file in dir.
func noProcessesUnder(dir string) func() (bool, string) {
	return func() (bool, string) {
		pids := processesUnder(dir)
		return len(pids) == 0, fmt.Sprintf("processes %v name %s", pids, dir)
	}
}

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard()) // envtest logs through controller-runtime
	mode := os.Getenv(leakModeEnv)
	if mode == "" {
		os.Exit(m.Run())
	}
	c, err := Start(context.Background(), Options{TimeScale: 10})
	if err != nil {
		fmt.Println("start failed:", err)
		os.Exit(3)
	}
	// A controller binary as harness.Process starts one: its own process
	// group, and the cluster's folder only in its environment.
	controller := exec.Command("sleep", "600")
	controller.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(c.Dir(), "controller.kubeconfig"))
	controller.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := controller.Start(); err != nil {
		fmt.Println("start failed: the controller:", err)
		os.Exit(3)
	}
	// The controller has only just started: wait for it (and the rest) to
	// show in /proc, or for processWait to pass and the count to be wrong.
	fmt.Printf("cluster-dir=%s\nprocesses=%d\n", c.Dir(), len(awaitProcesses(c.Dir(), clusterProcesses)))
	switch mode {
	case "stop":
		_ = c.Stop()
		os.Exit(0)
	case "signal":
		select {} // until the parent's signal
	default: // fail, panic, timeout: TestNoLeakedProcesses plays the part
		code := m.Run()
		_ = c.Stop() // as a TestMain does; panics and timeouts never get here
		os.Exit(code)
	}
}

// TestNoLeakedProcesses ends a test binary that runs a cluster in every way
// a test binary ends and counts the cluster's processes afterwards.
func TestNoLeakedProcesses(t *testing.T) {
	switch os.Getenv(leakModeEnv) {
	case "fail":
		t.Error("failing on purpose: the helper's TestMain must still stop the cluster")
		return
	case "panic":
		panic("panicking on purpose: the watchdog must stop the cluster")
	case "timeout":
		select {} // until -test.timeout fires
	}

	cases := []struct {
		mode     string
		signal   syscall.Signal
		exitCode int    // of the helper
		output   string // what the helper must have printed
	}{
		{mode: "stop"},
		{mode: "fail", exitCode: 1, output: "failing on purpose"},
		{mode: "panic", exitCode: 2, output: "panicking on purpose"},
		{mode: "timeout", exitCode: 2, output: "test timed out after 2s"},
		{mode: "signal", signal: syscall.SIGINT, exitCode: -1},
		{mode: "signal", signal: syscall.SIGTERM, exitCode: -1},
		{mode: "signal", signal: syscall.SIGKILL, exitCode: -1},
	}
	for _, c := range cases {
		name := c.mode
		if c.signal != 0 {
			name = c.signal.String()
		}
		t.Run(name, func(t *testing.T) {
			// Only fail, panic and timeout reach m.Run, and run this test.
			cmd := exec.Command(os.Args[0], "-test.run=^TestNoLeakedProcesses$", "-test.timeout=2s", "-test.v")
			// Its own temporary folder, which it must leave empty.
			tmp := t.TempDir()
			cmd.Env = append(os.Environ(), leakModeEnv+"="+c.mode, "TMPDIR="+tmp)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

			var dir string
			running := -1
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				line := sc.Text()
				if v, ok := strings.CutPrefix(line, "cluster-dir="); ok {
					dir = v
				}
				if v, ok := strings.CutPrefix(line, "processes="); ok {
					running, _ = strconv.Atoi(v)
					break
				}
				if strings.HasPrefix(line, "start failed") {
					t.Fatal(line)
				}
			}
			require.NotEmpty(t, dir, "the helper printed no cluster folder")
			require.Equal(t, clusterProcesses, running, "etcd, kube-apiserver, kube-controller-manager, kube-scheduler and a controller binary should run")
			var stdout strings.Builder
			copied := make(chan struct{})
			go func() {
				for sc.Scan() {
					stdout.WriteString(sc.Text() + "\n")
				}
				close(copied)
			}()

			if c.signal != 0 {
				require.NoError(t, cmd.Process.Signal(c.signal))
			}
			<-copied
			_ = cmd.Wait()
			output := stdout.String() + stderr.String()
			require.Equal(t, c.exitCode, cmd.ProcessState.ExitCode(), "helper output:\n%s", output)
			require.Contains(t, output, c.output)

			requireStaysGone(t, "after the helper ended ("+name+"), its cluster's processes and folder", func() (bool, string) {
				pids := processesUnder(dir)
				_, statErr := os.Stat(dir)
				return len(pids) == 0 && os.IsNotExist(statErr), fmt.Sprintf("processes %v name %s; the folder: %v", pids, dir, statErr)
			})
			left, err := os.ReadDir(tmp)
			require.NoError(t, err)
			var names []string
			for _, e := range left {
				names = append(names, e.Name())
			}
			require.Empty(t, names, "after the helper ended (%s), its temporary folder should be empty", name)
		})
	}
}

func TestBinariesMissing(t *testing.T) {
	_, err := Start(context.Background(), Options{AssetsDir: t.TempDir()})
	require.ErrorIs(t, err, ErrBinariesMissing)
	for _, want := range []string{"make bins", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		require.ErrorContains(t, err, want)
	}

	t.Setenv(envAssets, "")
	t.Setenv(envKubebuilderAssts, "")
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Chdir(t.TempDir())
	_, err = Start(context.Background(), Options{})
	require.ErrorIs(t, err, ErrBinariesMissing)
	require.ErrorContains(t, err, "make bins")
	require.ErrorContains(t, err, "go run github.com/kubeprop/kubeprop/cmd/kubeprop bins")
	require.ErrorContains(t, err, filepath.Join("bin", "k8s", KubernetesVersion))
	require.ErrorContains(t, err, filepath.Join(cache, "kubeprop", "k8s", KubernetesVersion))

	// Last of all, the harness looks where kubeprop bins builds them.
	dir, err := DefaultAssetsDir()
	require.NoError(t, err)
	require.Equal(t, filepath.Join(cache, "kubeprop", "k8s", KubernetesVersion), dir)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for _, b := range allBinaries {
		require.NoError(t, os.WriteFile(filepath.Join(dir, b), []byte("#!/bin/sh\n"), 0o755))
	}
	found, err := findAssets("")
	require.NoError(t, err)
	require.Equal(t, dir, found)
}

// fakeAssets makes a folder with the real binaries, except those given as
// shell scripts.
func fakeAssets(t *testing.T, scripts map[string]string) string {
	t.Helper()
	real, err := findAssets("")
	require.NoError(t, err, "the real binaries are needed: run `make bins`")
	dir := t.TempDir()
	for _, b := range allBinaries {
		path := filepath.Join(dir, b)
		if s, ok := scripts[b]; ok {
			require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+s), 0o755))
			continue
		}
		require.NoError(t, os.Symlink(filepath.Join(real, b), path))
	}
	return dir
}

func TestBinaryOfWrongVersion(t *testing.T) {
	dir := fakeAssets(t, map[string]string{binAPIServer: `echo "Kubernetes v1.30.4"`})
	_, err := Start(context.Background(), Options{AssetsDir: dir})
	require.Error(t, err)
	for _, want := range []string{"kube-apiserver", "v1.30.4", KubernetesVersion, "make bins"} {
		require.ErrorContains(t, err, want)
	}
}

func TestChildDiesAtStart(t *testing.T) {
	dir := fakeAssets(t, map[string]string{binControllerManager: `
if [ "$1" = "--version" ]; then echo "Kubernetes ` + KubernetesVersion + `"; exit 0; fi
echo "E1129 controllermanager.go:1] unknown flag: pretend this went wrong" >&2
exit 1
`})
	start := time.Now()
	_, err := Start(context.Background(), Options{AssetsDir: dir})
	require.Error(t, err)
	require.ErrorContains(t, err, "kube-controller-manager exited during start-up")
	require.ErrorContains(t, err, "pretend this went wrong")
	require.Less(t, time.Since(start), 50*time.Second, "a child dying at start must fail fast, not wait for the start timeout")
	// etcd and kube-apiserver, started before it, are stopped: their
	// command lines name the assets folder.
	requireStaysGone(t, "the processes started before it", noProcessesUnder(dir))
}

func TestBadOptions(t *testing.T) {
	ctx := context.Background()
	_, err := Start(ctx, Options{CRDDirectoryPaths: []string{"no/such/crds"}})
	require.ErrorContains(t, err, `CRD path "no/such/crds"`)
	require.ErrorContains(t, err, "does not exist")

	_, err = Start(ctx, Options{TimeScale: 0.5})
	require.ErrorContains(t, err, "TimeScale 0.5")
	_, err = Start(ctx, Options{TimeScale: 1e6})
	require.ErrorContains(t, err, "out of range")

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	_, err = Start(ctx, Options{APIServerPort: port})
	require.ErrorContains(t, err, fmt.Sprintf("port 127.0.0.1:%d is already in use", port))
}

func TestScaledFlags(t *testing.T) {
	c := &Cluster{opts: Options{TimeScale: 20}}
	require.Equal(t, 2500*time.Millisecond, c.scaled(50*time.Second))
	require.Equal(t, 15, c.scaledSeconds(300*time.Second))
	c.opts.TimeScale = 500
	require.Equal(t, 1, c.scaledSeconds(300*time.Second), "toleration seconds are whole and at least 1")
}

// TestStartWaitsOutCRDCreateHold: the API server holds every create of a
// custom resource for 2 s while its CRD was established less than 2 s
// before (customresource_handler.go); Start returns only once that is
// over, so a case's fixtures are not held. The check is the server's own,
// on the condition it stores. Then stopEndsOpenWatches, on the same
// cluster.
func TestStartWaitsOutCRDCreateHold(t *testing.T) {
	c, err := Start(context.Background(), Options{TimeScale: 10, CRDDirectoryPaths: []string{filepath.Join("..", "testdata", "crds")}})
	require.NoError(t, err)
	defer func() { _ = c.Stop() }() // on a failure before the Stop below
	crds, err := apiextensionsclient.NewForConfigOrDie(c.Config()).ApiextensionsV1().CustomResourceDefinitions().List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, crds.Items)
	for _, crd := range crds.Items {
		established := apiextensionshelpers.FindCRDCondition(&crd, apiextensionsv1.Established)
		require.NotNil(t, established, "CRD %s is not established", crd.Name)
		require.GreaterOrEqual(t, time.Since(established.LastTransitionTime.Time), crdCreateHold,
			"CRD %s: a create of its objects would be held", crd.Name)
	}
	t.Run("stop ends open watches", func(t *testing.T) { stopEndsOpenWatches(t, c) })
}

// stopEndsOpenWatches: a cluster stopped while a client still watches (a
// search cut short by ^C, its cases' informers running) stops cleanly:
// the API server ends the watch rather than waiting on it until the stop
// times out and kills it. It stops c.
func stopEndsOpenWatches(t *testing.T, c *Cluster) {
	w, err := kubernetes.NewForConfigOrDie(c.Config()).CoreV1().Namespaces().Watch(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	defer w.Stop()
	require.NoError(t, c.Stop(), "stopping the cluster with a watch open")
	for range w.ResultChan() { // until the server's end closes it
	}
}
