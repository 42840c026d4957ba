package harness_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/utils/exec"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness"
	"github.com/kubeprop/kubeprop/harness/kubelet"
	"github.com/kubeprop/kubeprop/properties"
)

// testExec is the test Env's exec hook: "echo ARGS" prints its arguments,
// "exit N" exits N; anything else exits 0 with no output (the default).
func testExec(_ context.Context, req kubelet.ExecRequest) kubelet.ExecResult {
	switch {
	case len(req.Command) > 0 && req.Command[0] == "echo":
		return kubelet.ExecResult{Stdout: []byte(strings.Join(req.Command[1:], " ") + "\n")}
	case len(req.Command) == 2 && req.Command[0] == "exit":
		code, _ := strconv.Atoi(req.Command[1])
		return kubelet.ExecResult{Stderr: []byte("exiting\n"), ExitCode: code}
	}
	return kubelet.ExecResult{}
}

// execIn runs a command in a pod's container through the API server, as
// kubectl exec does (WebSocket, falling back to SPDY).
func execIn(ctx context.Context, cfg *rest.Config, ns, pod, container string, cmd ...string) (stdout, stderr string, err error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", "", err
	}
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: cmd, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	spdy, err := remotecommand.NewSPDYExecutor(cfg, http.MethodPost, req.URL())
	if err != nil {
		return "", "", err
	}
	ws, err := remotecommand.NewWebSocketExecutor(cfg, http.MethodGet, req.URL().String())
	if err != nil {
		return "", "", err
	}
	executor, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return "", "", err
	}
	var out, errOut bytes.Buffer
	err = executor.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut})
	return out.String(), errOut.String(), err
}

// TestExec: pods/exec through the API server reaches the simulated node's
// kubelet endpoint, which answers through the Exec hook; a container that
// is not running, a pod with no node, a lost node get the real errors.
func TestExec(t *testing.T) {
	cs := clientset(t)
	ctx := context.Background()
	ns := namespace(t, cs)
	nodes := addNodes(t, 1)
	pods := deploy(t, cs, ns, "web", 1)
	pod := pods[0].Name

	out, _, err := execIn(ctx, env.Config(), ns, pod, "app", "echo", "hello", "world")
	require.NoError(t, err)
	require.Equal(t, "hello world\n", out)

	_, errOut, err := execIn(ctx, env.Config(), ns, pod, "app", "exit", "3")
	var exitErr exec.ExitError
	require.ErrorAs(t, err, &exitErr, "a non-zero exit is an ExitError: %v", err)
	require.Equal(t, 3, exitErr.ExitStatus())
	require.Equal(t, "exiting\n", errOut)

	// The API server's own errors.
	_, _, err = execIn(ctx, env.Config(), ns, pod, "sidecar", "true")
	require.ErrorContains(t, err, "container sidecar is not valid for pod "+pod)
	unscheduled := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nowhere"}, Spec: corev1.PodSpec{
		NodeSelector: map[string]string{"kubeprop.dev/none": "true"},
		Containers:   []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}
	_, err = cs.CoreV1().Pods(ns).Create(ctx, unscheduled, metav1.CreateOptions{})
	require.NoError(t, err)
	_, _, err = execIn(ctx, env.Config(), ns, "nowhere", "app", "true")
	require.ErrorContains(t, err, "does not have a host assigned")

	// A lost node's kubelet does not answer.
	nodes[0].Lose()
	lostCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, _, err = execIn(lostCtx, env.Config(), ns, pod, "app", "true")
	require.Error(t, err)
	require.False(t, errors.Is(lostCtx.Err(), context.DeadlineExceeded), "refused at once, not hung: %v", err)
	nodes[0].Recover()
	out, _, err = execIn(ctx, env.Config(), ns, pod, "app", "echo", "back")
	require.NoError(t, err)
	require.Equal(t, "back\n", out)
}

// TestCaseRecordsExecs: a case's trace has each exec into its pods, with
// who asked for it (the controller, here), the pod, the container, the
// command and its exit code; so does its timeline.
func TestCaseRecordsExecs(t *testing.T) {
	spec := harness.Spec{
		Fixtures: func(ns string) []client.Object { return []client.Object{deployment(ns, "web", 1)} },
		// Once its pod runs, the controller runs "exit 2" in it, once.
		Controller: harness.Func(func(ctx context.Context, cfg *rest.Config) error {
			ns, _ := harness.CaseNamespace(ctx)
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
				pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
				if err != nil || len(pods.Items) != 1 || pods.Items[0].Status.Phase != corev1.PodRunning {
					return false, nil
				}
				_, _, err = execIn(ctx, cfg, ns, pods.Items[0].Name, "app", "exit", "2")
				var exitErr exec.ExitError
				return errors.As(err, &exitErr), nil
			})
			<-ctx.Done()
			return nil
		}),
		Properties: []properties.Property{properties.NoPanics()},
		Setup:      30 * time.Second, SettleCap: 5 * time.Second,
		Ready: writesNothing,
	}
	rep, err := harness.Run(context.Background(), env, spec, []faults.Step{faults.ScaleChangeStep{Field: "spec.replicas", Value: 1}})
	require.NoError(t, err)
	timeline := strings.Join(rep.Timeline, "\n")
	require.Len(t, rep.Trace.Execs, 1, timeline)
	e := rep.Trace.Execs[0]
	require.Equal(t, harness.UserController, e.User)
	require.Equal(t, []string{"exit", "2"}, e.Command)
	require.Equal(t, 2, e.ExitCode)
	require.Equal(t, "app", e.Container)
	require.True(t, strings.HasPrefix(e.Pod, "web-"), e.Pod)
	require.Contains(t, timeline, `container app: ["exit" "2"] exited 2`)
}
