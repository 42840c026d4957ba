package lifecycle

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/kubeprop/kubeprop/harness/kubelet"
	"github.com/kubeprop/kubeprop/properties"
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

// CaseNamespace is harness.CaseNamespace: see its documentation there.
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
				c.recorder.Panicked(v)
				return
			}
			runningCases.Lock()
			defer runningCases.Unlock()
			if len(runningCases.set) == 1 {
				for c := range runningCases.set {
					c.recorder.Panicked(v)
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

// caseLabel is the profiler label on the goroutines of a case's
// controller (goroutines inherit their creator's labels): those that are
// still running after the controller was told to stop can be named.
const caseLabel = "kubeprop-case"

// goLabelled runs f in a new goroutine that carries c's label.
func (c *caseRun) goLabelled(ctx context.Context, f func(context.Context)) {
	go pprof.Do(ctx, pprof.Labels(caseLabel, c.namespace), f)
}

// goroutinesOf names the goroutines of case namespace still running, by
// the first function of each stack outside the Go runtime, most first:
// "2 in example.com/ctl.(*R).loop (loop.go:40)".
func goroutinesOf(namespace string) string {
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		return "(the goroutine profile could not be read: " + err.Error() + ")"
	}
	label := fmt.Sprintf("%q:%q", caseLabel, namespace)
	counts := map[string]int{} // by where they are
	// The profile is blocks of "N @ addresses", "# labels: {...}" and
	// "#\taddress\tfunction+offset\tfile:line", one per stack.
	for block := range strings.SplitSeq(buf.String(), "\n\n") {
		lines := strings.Split(block, "\n")
		if len(lines) < 3 || !strings.HasPrefix(lines[1], "# labels: ") || !strings.Contains(lines[1], label) {
			continue
		}
		count, _ := strconv.Atoi(strings.Fields(lines[0])[0])
		for _, l := range lines[2:] {
			f := strings.Fields(strings.TrimPrefix(l, "#"))
			if len(f) < 3 || strings.HasPrefix(f[1], "runtime.") || strings.HasPrefix(f[1], "internal/") {
				continue
			}
			fn, _, _ := strings.Cut(f[1], "+0x")
			counts[fmt.Sprintf("%s (%s)", fn, filepath.Base(f[2]))] += count
			break
		}
	}
	if len(counts) == 0 {
		return "none"
	}
	wheres := slices.Sorted(maps.Keys(counts))
	slices.SortStableFunc(wheres, func(a, b string) int { return counts[b] - counts[a] })
	var named []string
	for i, w := range wheres {
		if i == maxNamedGoroutines {
			named = append(named, fmt.Sprintf("and %d more places", len(wheres)-i))
			break
		}
		named = append(named, fmt.Sprintf("%d in %s", counts[w], w))
	}
	return strings.Join(named, ", ")
}

// maxNamedGoroutines bounds the places goroutinesOf names.
const maxNamedGoroutines = 5

// caseInNamespace is the running case of that namespace, if any.
func caseInNamespace(ns string) *caseRun {
	runningCases.Lock()
	defer runningCases.Unlock()
	for c := range runningCases.set {
		if c.namespace == ns {
			return c
		}
	}
	return nil
}

// kubeletEvent hands the simulated kubelets' events that belong to a case
// to it: the commands run in its containers, and the terminations whose
// grace period the simulator cut.
func kubeletEvent(e kubelet.Event) {
	switch e.Kind {
	case kubelet.ContainerExec, kubelet.ContainerPreStop, kubelet.PodTerminating:
	default:
		return
	}
	c := caseInNamespace(e.Namespace)
	if c == nil {
		return
	}
	switch e.Kind {
	case kubelet.ContainerExec:
		c.recorder.Execed(properties.Exec{At: e.Time, Pod: e.Pod, Container: e.Container, Command: e.Command, ExitCode: int(e.Exit.Code)})
		c.logf("exec in Pod %s, container %s: %q exited %d", e.Pod, e.Container, e.Command, e.Exit.Code)
	case kubelet.ContainerPreStop:
		c.logf("preStop hook of Pod %s, container %s: %q exited %d", e.Pod, e.Container, e.Command, e.Exit.Code)
	case kubelet.PodTerminating:
		if e.GraceUsed < e.Grace {
			c.logf("Pod %s terminating: its grace period %v is cut to the simulated kubelets' cap of %v (kubelet.Options.MaxGracePeriod)", e.Pod, e.Grace, e.GraceUsed)
		}
	}
}
