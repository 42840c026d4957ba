package procgroup

import (
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"time"
)

// killWait bounds the wait for a process to exit after SIGKILL.
const killWait = 10 * time.Second

// Process is a started process, the leader of its own group.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // set before done closes
}

// Start starts cmd in a process group of its own and waits for it in the
// background; closers (its log file) are closed once it has exited.
func Start(cmd *exec.Cmd, closers ...io.Closer) (*Process, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		for _, c := range closers {
			c.Close()
		}
		return nil, err
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		for _, c := range closers {
			c.Close()
		}
		close(p.done)
	}()
	return p, nil
}

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is how the process exited (exec.Cmd.Wait's error); read it after
// Done is closed.
func (p *Process) Err() error { return p.err }

// Pid is the process's PID, which is also its group's ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Kill sends SIGKILL to the process's group.
func (p *Process) Kill() { _ = syscall.Kill(-p.Pid(), syscall.SIGKILL) }

// Stop sends SIGTERM to the process's group, and SIGKILL once grace has
// passed; killed says the SIGKILL was needed. The error says the process
// outlived the SIGKILL too (by killWait).
func (p *Process) Stop(grace time.Duration) (killed bool, err error) {
	select {
	case <-p.done:
		return false, nil
	default:
	}
	_ = syscall.Kill(-p.Pid(), syscall.SIGTERM)
	select {
	case <-p.done:
		return false, nil
	case <-time.After(grace):
	}
	p.Kill()
	select {
	case <-p.done:
		return true, nil
	case <-time.After(killWait):
		return true, fmt.Errorf("pid %d did not exit %v after SIGKILL", p.Pid(), killWait)
	}
}
