package procgroup_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubeprop/kubeprop/harness/internal/procgroup"
)

// TestStopReachesTheGroup: a process that ignores SIGTERM is killed after
// the grace, and so is the child it started; its log is closed.
func TestStopReachesTheGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	log, err := os.Create(filepath.Join(dir, "log"))
	require.NoError(t, err)
	cmd := exec.Command("sh", "-c", `trap '' TERM; sleep 300 & echo $! > `+pidFile+`.tmp; mv `+pidFile+`.tmp `+pidFile+`; echo started; wait`)
	cmd.Stdout = log
	p, err := procgroup.Start(cmd, log)
	require.NoError(t, err)
	// The shell writes the PID beside the file and renames it: the file
	// appears whole.
	require.Eventually(t, func() bool { _, err := os.Stat(pidFile); return err == nil }, 5*time.Second, 10*time.Millisecond)
	b, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	child, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)

	killed, err := p.Stop(200 * time.Millisecond)
	require.NoError(t, err)
	require.True(t, killed, "the shell ignores SIGTERM: only SIGKILL stops it")
	<-p.Done()
	require.Error(t, p.Err())
	require.Eventually(t, func() bool { return !alive(child) }, 5*time.Second, 10*time.Millisecond, "the group's child %d outlived the stop", child)
	_, err = log.Write([]byte("x"))
	require.ErrorIs(t, err, os.ErrClosed, "the log is closed once the process has exited")
}

// TestStopGentle: a process that exits on SIGTERM needs no SIGKILL, and a
// stop after the exit is a no-op.
func TestStopGentle(t *testing.T) {
	p, err := procgroup.Start(exec.Command("sleep", "300"))
	require.NoError(t, err)
	killed, err := p.Stop(10 * time.Second)
	require.NoError(t, err)
	require.False(t, killed)
	killed, err = p.Stop(time.Second)
	require.NoError(t, err)
	require.False(t, killed)

	_, err = procgroup.Start(exec.Command(filepath.Join(t.TempDir(), "missing")))
	require.Error(t, err)
}

// alive: the process exists and is not a zombie (one whose new parent has
// not reaped it yet is gone all the same).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(rest, "Z")
}
