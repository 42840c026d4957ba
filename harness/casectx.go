package harness

import (
	"context"
	"sync"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// caseKey is the context key of the case a context belongs to. Every
// context the harness hands a controller (a Manager's, a Func's) derives
// from its case's, so whatever the controller reports through one, a
// recovered panic above all, reaches that case and no other.
type caseKey struct{}

func withCase(ctx context.Context, c *caseRun) context.Context {
	return context.WithValue(ctx, caseKey{}, c)
}

func caseOf(ctx context.Context) *caseRun {
	if ctx == nil {
		return nil
	}
	c, _ := ctx.Value(caseKey{}).(*caseRun)
	return c
}

// CaseNamespace returns the namespace of the case whose controller got
// ctx (a Func controller's, or a Manager's reconcile context), and false
// for a context of no case: a controller that serves one namespace
// watches only its case's, and cases that run side by side do not see
// each other.
func CaseNamespace(ctx context.Context) (string, bool) {
	if c := caseOf(ctx); c != nil {
		return c.namespace, true
	}
	return "", false
}

// runningCases are the cases under way in this process. A panic reported
// without a case's context (a goroutine the controller started on
// context.Background) goes to the one case running, if only one is.
var runningCases = struct {
	sync.Mutex
	set map[*caseRun]bool
}{set: map[*caseRun]bool{}}

var panicHookOnce sync.Once

// trackCase installs the panic hook once and counts c as running until
// the returned func is called. controller-runtime reports recovered
// panics through the process-wide utilruntime.PanicHandlers, with the
// reconcile's context.
func trackCase(c *caseRun) (untrack func()) {
	panicHookOnce.Do(func() {
		utilruntime.PanicHandlers = append(utilruntime.PanicHandlers, func(ctx context.Context, v any) {
			if c := caseOf(ctx); c != nil {
				c.recorder.panicked(v)
				return
			}
			runningCases.Lock()
			defer runningCases.Unlock()
			if len(runningCases.set) == 1 {
				for c := range runningCases.set {
					c.recorder.panicked(v)
				}
			}
		})
	})
	runningCases.Lock()
	runningCases.set[c] = true
	runningCases.Unlock()
	return func() {
		runningCases.Lock()
		delete(runningCases.set, c)
		runningCases.Unlock()
	}
}
