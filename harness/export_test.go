package harness

import (
	"runtime"
	"strings"
)

// GoroutineStacks returns the stack of every goroutine, one per string:
// for the tests that check that cases leave none behind.
func GoroutineStacks() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(string(buf[:n]), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}
