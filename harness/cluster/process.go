package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeprop/kubeprop/harness/internal/procgroup"
)

// child is a control-plane process the harness starts itself
// (kube-controller-manager, kube-scheduler), in its own process group, with
// its output in a log file.
type child struct {
	name    string
	proc    *procgroup.Process
	logPath string
}

func startChild(name, path string, args []string, logPath string) (*child, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("starting %s: creating its log: %w", name, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	proc, err := procgroup.Start(cmd, logFile)
	if err != nil {
		return nil, fmt.Errorf("starting %s (%s): %w", name, path, err)
	}
	return &child{name: name, proc: proc, logPath: logPath}, nil
}

// waitHealthy polls the child's /healthz on its secure port until it answers
// 200, the child exits, or the context ends. The errors carry the last lines
// of the child's log, which is where the reason is.
func (c *child) waitHealthy(ctx context.Context, port int) error {
	client := &http.Client{
		Timeout: 2 * time.Second,
		// The serving certificate is self-signed; this is a liveness probe
		// on loopback, as kubeadm's probes of these components are.
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec
	}
	defer client.CloseIdleConnections()
	url := "https://127.0.0.1:" + strconv.Itoa(port) + "/healthz"
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case <-c.proc.Done():
			return false, fmt.Errorf("%s exited during start-up (%v); last lines of %s:\n%s", c.name, c.proc.Err(), c.logPath, c.tail())
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%s did not become healthy at %s in time; last lines of %s:\n%s", c.name, url, c.logPath, c.tail())
	}
	return err
}

// stop sends SIGTERM to the child's process group and SIGKILL after grace.
func (c *child) stop(grace time.Duration) error {
	if _, err := c.proc.Stop(grace); err != nil {
		return fmt.Errorf("stopping %s: %w", c.name, err)
	}
	return nil
}

func (c *child) tail() string { return fileTail(c.logPath) }

// lastLines returns the last n lines of s, indented for an error message.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ")
}

// fileTail returns the last lines of a log file, for error messages.
func fileTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("    (reading %s: %v)", path, err)
	}
	if len(b) == 0 {
		return "    (no output)"
	}
	return lastLines(string(b), 20)
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// checkPortFree returns an error naming the port when something listens on it.
func checkPortFree(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("port 127.0.0.1:%d is already in use by another process; choose another APIServerPort, or leave it 0 for a free one", port)
		}
		return fmt.Errorf("port 127.0.0.1:%d cannot be used: %w", port, err)
	}
	return l.Close()
}
