package lifecycle

import (
	"errors"
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// inOwnNetwork runs f on an OS thread moved into a new network namespace,
// whose loopback is up and which has no other interface: a socket that f
// opens lives there (and keeps working from any thread once f returns), a
// process f starts is born there. The thread is never handed back to the
// scheduler: it ends with f's goroutine, and the namespace lives on while
// a socket or a process holds it. The runtime creates new threads from a
// clean template thread while one is locked (runtime.newm), so none
// inherits the namespace.
//
// isolated is false, and f has run in the machine's namespace, when a
// namespace cannot be created: that needs CAP_SYS_ADMIN (root, in a
// container that allows it).
func inOwnNetwork(f func() error) (isolated bool, err error) {
	type result struct {
		isolated bool
		err      error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			// Still the machine's namespace: the thread may go back.
			runtime.UnlockOSThread()
			if errors.Is(err, unix.EPERM) {
				done <- result{false, f()}
				return
			}
			done <- result{false, fmt.Errorf("creating a network namespace: %w", err)}
			return
		}
		if err := loopbackUp(); err != nil {
			done <- result{false, err}
			return
		}
		done <- result{true, f()}
	}()
	r := <-done
	return r.isolated, r.err
}

// loopbackUp brings up the calling thread's loopback interface, which a
// new network namespace has down; up, it answers on 127.0.0.0/8.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bringing up the loopback of the controller's network namespace: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("bringing up the loopback of the controller's network namespace: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bringing up the loopback of the controller's network namespace: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bringing up the loopback of the controller's network namespace: %w", err)
	}
	return nil
}
