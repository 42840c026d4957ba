package cluster

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// reaperEnv names the cluster folder to a re-executed test binary that is
// to act as the watchdog.
const reaperEnv = "KUBEPROP_REAPER_DIR"

func init() {
	if dir := os.Getenv(reaperEnv); dir != "" {
		runReaper(dir, os.Stdin)
		os.Exit(0)
	}
}

// startReaper starts the watchdog for the cluster in dir. It waits for its
// standard input to close, which happens when Stop closes the returned pipe
// or when the test binary dies in any way, and then kills every process whose
// command line names a file in dir and removes dir. Every cluster process names dir in
// its flags (data dir, cert dir, kubeconfig), so no PID has to be handed over
// and none can be missed, even one started a moment before the binary died.
func startReaper(dir string) (*os.File, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("starting the process watchdog: finding the test binary: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("starting the process watchdog: %w", err)
	}
	defer r.Close()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), reaperEnv+"="+dir)
	cmd.Stdin = r
	// Its own process group keeps a terminal's ^C, which goes to the whole
	// foreground group, from killing the watchdog with the test binary.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("starting the process watchdog %s: %w", exe, err)
	}
	// Reap it in the background so it leaves no zombie when it exits first.
	go func() { _ = cmd.Wait() }()
	return w, nil
}

func runReaper(dir string, stdin io.Reader) {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	_, _ = io.Copy(io.Discard, stdin)
	// A process caught starting shows an empty command line and
	// environment for a moment: scan until two scans in a row find
	// nothing (bounded).
	for quiet, deadline := 0, time.Now().Add(5*time.Second); quiet < 2 && time.Now().Before(deadline); {
		pids := processesUnder(dir)
		for _, pid := range pids {
			// The cluster's processes lead their own groups; kill the group
			// so that anything they started goes too.
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if len(pids) == 0 {
			quiet++
		} else {
			quiet = 0
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = os.RemoveAll(dir)
}

// processesUnder returns the PIDs of the processes, other than this one,
// whose command line or environment names a file in dir (a controller
// binary gets its kubeconfig there through KUBECONFIG). The separator keeps one cluster's
// folder from matching another whose name it prefixes. It reads /proc, so
// it finds nothing on systems without one.
func processesUnder(dir string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	needle := []byte(filepath.Clean(dir) + string(filepath.Separator))
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		environ, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if !bytes.Contains(cmdline, needle) && !bytes.Contains(environ, needle) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}
