package harness_test

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// canCreateNetworkNamespace tries what the harness does for a binary, on
// a thread of its own that ends with its goroutine.
func canCreateNetworkNamespace() bool {
	ok := make(chan bool)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends here
		ok <- unix.Unshare(unix.CLONE_NEWNET) == nil
	}()
	return <-ok
}
