package harness_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness"
	"github.com/kubeprop/kubeprop/properties"
)

// widgetProcessArg makes the test binary the Widget controller as a
// process (see TestMain): a binary for harness.Process that needs no
// build step.
const widgetProcessArg = "widget-process"

// runWidgetProcess is the Widget controller as its own process: it
// connects with $KUBECONFIG, watches $KUBEPROP_NAMESPACE and stops on
// SIGTERM. With -exit-at=N it exits with status 1 when a Widget asks for N
// replicas, as a crashing binary does.
func runWidgetProcess(args []string) int {
	fs := flag.NewFlagSet(widgetProcessArg, flag.ContinueOnError)
	exitAt := fs.Int64("exit-at", 0, "exit with status 1 when a Widget asks for this many replicas")
	ignoreTerm := fs.Bool("ignore-sigterm", false, "ignore SIGTERM, as a controller with a stuck shutdown does")
	dial := fs.String("dial", "", "dial these addresses (comma-separated) first, and write how each went into the ConfigMap dials")
	seen := fs.Bool("seen", false, `print "seen rv N" for each Widget it reconciles, as its cache has it`)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "widget-process:", err)
		return 2
	}
	cfg.UserAgent = widgetProcessArg
	if *dial != "" {
		if err := dialAndReport(cfg, strings.Split(*dial, ",")); err != nil {
			fmt.Fprintln(os.Stderr, "widget-process:", err)
			return 2
		}
	}
	mgr, err := manager.New(cfg, manager.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{os.Getenv("KUBEPROP_NAMESPACE"): {}}},
	})
	if err == nil {
		r := &widgetReconciler{exitAt: *exitAt}
		if *seen {
			r.seen = func(w *unstructured.Unstructured) { fmt.Fprintln(os.Stderr, "seen rv", w.GetResourceVersion()) }
		}
		err = r.setup(mgr, controller.Options{})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "widget-process:", err)
		return 2
	}
	ctx := context.Background()
	if *ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	} else {
		ctx = ctrl.SetupSignalHandler()
	}
	if err := mgr.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "widget-process:", err)
		return 1
	}
	return 0
}

// dialAndReport dials each address, as an operator connecting to its
// pods or Services does, and writes the outcome of each, with how long it
// took, into the ConfigMap dials of its namespace.
func dialAndReport(cfg *rest.Config, addrs []string) error {
	data := map[string]string{}
	for i, addr := range addrs {
		start := time.Now()
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		outcome := "connected"
		if err != nil {
			outcome = err.Error()
		} else {
			conn.Close()
		}
		data[fmt.Sprintf("dial%d", i)] = outcome
		data[fmt.Sprintf("dial%d-ms", i)] = strconv.FormatInt(time.Since(start).Milliseconds(), 10)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	_, err = cs.CoreV1().ConfigMaps(os.Getenv("KUBEPROP_NAMESPACE")).Create(context.Background(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dials"}, Data: data}, metav1.CreateOptions{})
	return err
}

// TestProcessNetwork: a controller binary dials a pod address and a
// Service address, and is refused at once on this machine, without a
// packet sent (its network namespace has no route but its loopback);
// the API server it still reaches, through the proxy in its namespace.
func TestProcessNetwork(t *testing.T) {
	spec := widgetSpec(false)
	spec.Controller = widgetProcess("-dial=198.18.0.9:80,10.0.0.1:443")
	spec.Watch = []schema.GroupVersionKind{corev1.SchemeGroupVersion.WithKind("ConfigMap")}
	// Without CAP_SYS_ADMIN (not root, or a container that forbids it) the
	// binary shares the machine's network, and the timeline must say so.
	rootless := !canCreateNetworkNamespace()
	spec.Properties = []properties.Property{
		properties.NoPanics(),
		properties.Converges("widget-ready", widgetReady, properties.ConvergeOptions{Within: 30 * time.Second}),
		properties.Converges("dials-refused-at-once", func(s properties.State) error {
			u := s.Get("ConfigMap", "dials")
			if u == nil {
				return fmt.Errorf("no ConfigMap dials")
			}
			cm, err := properties.As[corev1.ConfigMap](u)
			if err != nil {
				return err
			}
			if rootless {
				return nil
			}
			for _, k := range []string{"dial0", "dial1"} {
				ms, err := strconv.Atoi(cm.Data[k+"-ms"])
				if err != nil || !strings.Contains(cm.Data[k], "network is unreachable") || ms > 1000 {
					return fmt.Errorf("%s: %s after %s ms", k, cm.Data[k], cm.Data[k+"-ms"])
				}
			}
			return nil
		}, properties.ConvergeOptions{Within: 30 * time.Second}),
	}
	rep, err := harness.Run(context.Background(), env, spec, []faults.Step{faults.ScaleChangeStep{Field: "spec.replicas", Value: 2}})
	require.NoError(t, err)
	require.False(t, rep.Failed(), "%+v", rep.Failures)
	timeline := strings.Join(rep.Timeline, "\n")
	if rootless {
		require.Contains(t, timeline, "the controller binary shares this machine's network", "no network namespace to be had here, and the timeline says so")
	} else {
		require.NotContains(t, timeline, "shares this machine's network")
	}
	requireNoControllerProcess(t)
}

func widgetProcess(args ...string) harness.Controller {
	return harness.Process(os.Args[0], append([]string{widgetProcessArg}, args...)...)
}

// controllerProcesses returns the PIDs of the processes started by
// harness.Process on this test's cluster that are still running: their
// environment names the cluster's folder. A process in the middle of its
// exec may not show yet (its environ reads empty for a moment), and one
// killed a moment ago may still show: callers wait for the count they
// expect instead of looking once.
func controllerProcesses(t *testing.T) []int {
	pids, err := controllerPIDs()
	require.NoError(t, err)
	return pids
}

func controllerPIDs() ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		environ, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && bytes.Contains(environ, []byte("KUBECONFIG="+env.Cluster().Dir()+"/")) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// requireNoControllerProcess waits (30 s at most) until no process started
// by harness.Process runs, then checks that none comes back for a second.
// It sees every test's processes: the tests that call it run alone.
func requireNoControllerProcess(t *testing.T) {
	t.Helper()
	eventually(t, 30*time.Second, "every controller process stopped", func(context.Context) (bool, string, error) {
		pids := controllerProcesses(t)
		return len(pids) == 0, fmt.Sprintf("controller processes %v", pids), nil
	})
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		time.Sleep(100 * time.Millisecond)
		require.Empty(t, controllerProcesses(t), "a controller process came back after every one had stopped")
	}
}

// sampleControllerProcesses looks for controller processes every 50 ms
// until the returned func is called, which returns the most it saw at
// once: it shows that controllerPIDs finds a running one, so that
// its count of 0 afterwards means something.
func sampleControllerProcesses() (stop func() int) {
	done := make(chan struct{})
	most := make(chan int)
	go func() {
		n := 0
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				most <- n
				return
			case <-tick.C:
				pids, _ := controllerPIDs()
				n = max(n, len(pids))
			}
		}
	}()
	return func() int { close(done); return <-most }
}

// TestProcess runs the Widget controller as a binary through every
// controller fault: the proxy in front of it answers its writes with
// errors, the crash after a write SIGKILLs it and a new one starts, its
// watches are delayed and cut; the audit log names its requests by its
// user agent; it passes every property, and no process is left.
func TestProcess(t *testing.T) {
	spec := widgetSpec(false)
	spec.Controller = widgetProcess()
	plan := []faults.Step{
		faults.APIErrorsStep{Error: faults.Conflict, Requests: 3},
		faults.ScaleChangeStep{Object: 0, Field: "spec.replicas", Value: 4},
		faults.CrashAfterWriteStep{Writes: 1},
		faults.ScaleChangeStep{Object: 0, Field: "spec.replicas", Value: 2},
		faults.ControllerRestartStep{},
		faults.StaleWatchStep{DelayMs: 1000, ForMs: 2000},
		faults.ScaleChangeStep{Object: 0, Field: "spec.replicas", Value: 5},
		faults.StaleWatchStep{Drop: true},
		faults.ScaleChangeStep{Object: 0, Field: "spec.replicas", Value: 1},
	}
	sampled := sampleControllerProcesses()
	rep, err := harness.Run(context.Background(), env, spec, plan)
	most := sampled()
	require.NoError(t, err)
	timeline := strings.Join(rep.Timeline, "\n")
	t.Logf("timeline:\n%s", timeline)
	require.False(t, rep.Failed(), "failures: %+v", rep.Failures)
	require.Contains(t, timeline, "killed right after a write")
	injected, own := 0, 0
	for _, r := range rep.Trace.Requests {
		switch {
		case r.UserAgent == harness.UserAgentInjected:
			injected++
		case r.User == harness.UserController && strings.HasPrefix(r.UserAgent, widgetProcessArg):
			own++
		}
	}
	require.Equal(t, 3, injected, "the three refused writes are in the trace")
	require.Positive(t, own, "the audit log names the binary's requests by its user and user agent")
	require.Positive(t, most, "no controller process was seen while the case ran: controllerPIDs finds none, so its 0 below would mean nothing")
	requireNoControllerProcess(t)

	// Four starts: the first, after the crash, the restart... and each
	// logged in the controller's log.
	logs, err := filepath.Glob(filepath.Join(env.Cluster().Dir(), "controller-*.log"))
	require.NoError(t, err)
	starts := 0
	for _, l := range logs {
		b, err := os.ReadFile(l)
		require.NoError(t, err)
		if bytes.Contains(b, []byte(widgetProcessArg)) {
			starts = max(starts, bytes.Count(b, []byte("--- kubeprop: starting")))
		}
	}
	require.Equal(t, 3, starts, "started, restarted after the crash, restarted by ControllerRestart")
	require.Equal(t, 3, bytes.Count(rep.ControllerLog, []byte("--- kubeprop: starting")), "the report's log holds each instance's output")
}

func TestProcessMisbehaviour(t *testing.T) {
	ctx := context.Background()
	plan := []faults.Step{faults.ScaleChangeStep{Field: "spec.replicas", Value: 2}}
	spec := widgetSpec(false)
	spec.Properties = []properties.Property{properties.NoPanics()}

	spec.Controller = harness.Process("./no-such-controller")
	_, err := harness.Run(ctx, env, spec, plan)
	require.ErrorContains(t, err, `the controller binary "./no-such-controller"`)
	require.ErrorContains(t, err, "build it first")

	spec.Controller = harness.Process("sh", "-c", "echo cannot find my config >&2; exit 3")
	_, err = harness.Run(ctx, env, spec, plan)
	require.ErrorContains(t, err, "the controller did not start: the binary exited at once (exit status 3)")
	require.ErrorContains(t, err, "cannot find my config")

	spec.Setup = 2 * time.Second
	spec.Controller = harness.Process("sleep", "600")
	_, err = harness.Run(ctx, env, spec, plan)
	require.ErrorContains(t, err, "the binary made no request to the API server within 2s: it must connect with the kubeconfig in $KUBECONFIG")
	spec.Setup = 0

	// One that gives up in the middle of a case: a crash, reported.
	spec.Controller = widgetProcess("-exit-at=4")
	rep, err := harness.Run(ctx, env, spec, []faults.Step{
		faults.ScaleChangeStep{Field: "spec.replicas", Value: 2},
		faults.ScaleChangeStep{Field: "spec.replicas", Value: 4},
	})
	require.NoError(t, err)
	require.True(t, rep.Failed())
	require.Equal(t, "no-panics: the controller panicked: the controller process exited while the case went on: exit status 1", rep.Failures[0].Message)
	requireNoControllerProcess(t)

	// One that ignores SIGTERM: killed after the bound, and reported.
	spec.Controller = widgetProcess("-ignore-sigterm")
	start := time.Now()
	rep, err = harness.Run(ctx, env, spec, plan)
	require.NoError(t, err)
	require.Less(t, time.Since(start), 2*time.Minute, "the case ends within its bounds")
	require.Len(t, rep.Teardown.Left, 1, "teardown left: %v", rep.Teardown.Left)
	require.Contains(t, rep.Teardown.Left[0], "controller: the controller process did not stop within 30s of SIGTERM and was killed")
	requireNoControllerProcess(t)
}
