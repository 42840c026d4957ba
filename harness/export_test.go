package harness

import (
	"context"
	"runtime"
	"strings"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness/internal/search"
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

// ProbeWrites is the search's probe of the controller's writes, and the
// resources it watched.
func ProbeWrites(ctx context.Context, env *Env, spec Spec) ([]faults.WriteMatch, map[faults.WriteMatch][]string, []string, error) {
	return search.ProbeWrites(ctx, env, spec)
}

// ReplayCount is Replay with -kubeprop.replay.count=count.
func ReplayCount(t TB, env *Env, spec Spec, file string, count int) {
	t.Helper()
	replay(t, env, spec, file, false, count)
}

// ReproduceReplays is how many times the shrink's end replays the plan
// drawn and the shrunk one.
const ReproduceReplays = search.ReproduceReplays
