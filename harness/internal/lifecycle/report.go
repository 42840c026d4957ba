package lifecycle

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/properties"
)

// Field managers of the harness's own writers.
const (
	ManagerFaults = "kubeprop-faults"
	ManagerUser   = "kubeprop-user"
)

// Report is the outcome of one case.
type Report struct {
	// Namespace is the case's (kp-N): its objects' namespace, and the
	// zone of its nodes.
	Namespace string
	Plan      []faults.Step
	// Failures are the properties that failed, in the Spec's order. A
	// failure found while a step settles that more trace cannot change (a
	// safety property violated, a retry streak beyond its budget, a fight)
	// ends the case; after the heal, the first failure in the Spec's order
	// does, once the properties before it are decided. The properties
	// still undecided then are not among them.
	Failures []Failure
	// NotJudged are the properties that held for want of a judgement
	// (properties.Verdict.NotJudged), each with its detail as Message: a
	// pass that says less than it seems.
	NotJudged []Failure
	// Timeline is the case, step by step, for the log.
	Timeline []string
	// Trace is everything recorded.
	Trace *properties.Trace
	// NoOps are the indices in Plan of the steps that no longer applied
	// (a NodeRecover of a node never lost): the shrinker drops them first.
	NoOps []int
	// Unrun are the indices in Plan of the steps not run because a
	// property had failed before them: the shrinker drops them first too.
	Unrun []int
	// ForeignWrites are the controller's writes into other cases'
	// namespaces ("create pods in kp-7"), each once: such a controller
	// cannot share the cluster with cases running beside it.
	ForeignWrites []string
	// Teardown is what ending the case had to force or left behind.
	Teardown Teardown
	// Times is where the case's wall time went.
	Times Times
	// ControllerLog is the controller's own log for the case (a Manager's
	// or a Func's logr output, a Process's stdout and stderr), its last
	// 5 MiB (evidenceLimit); complete once Run returns.
	ControllerLog []byte
	// Events are the case namespace's Events when a failed case was
	// judged, oldest first (none for a pass).
	Events []corev1.Event
	// Shrinking: in a search, the case ran a candidate of the shrink, not
	// a plan drawn.
	Shrinking bool
	// watched are the resources an in-process controller watched: where
	// the search's probe aims its stale views.
	watched []string
}

// Times is harness.Times: see its documentation there.
type Times struct {
	// Reference is the reference run's, when the case ran one (zero when
	// an earlier case's was reused).
	Reference              time.Duration
	Setup, Judge, Teardown time.Duration
	Steps                  []time.Duration
}

// Total is the case's wall time.
func (t Times) Total() time.Duration {
	total := t.Reference + t.Setup + t.Judge + t.Teardown
	for _, s := range t.Steps {
		total += s
	}
	return total
}

func (t Times) String() string {
	steps := make([]string, len(t.Steps))
	for i, s := range t.Steps {
		steps[i] = fmt.Sprintf("%.1fs", s.Seconds())
	}
	reference := ""
	if t.Reference > 0 {
		reference = fmt.Sprintf("reference %.1fs, ", t.Reference.Seconds())
	}
	return fmt.Sprintf("%ssetup %.1fs, steps [%s], judge %.1fs, teardown %.1fs", reference, t.Setup.Seconds(), strings.Join(steps, " "), t.Judge.Seconds(), t.Teardown.Seconds())
}

// Failure is one property that did not hold.
type Failure struct {
	Property string
	index    int
	// Message is deterministic: what rapid compares while shrinking.
	Message string
	// Detail has the times and counts.
	Detail string
	// Evidence is what the failure rests on: the timeline page draws it.
	Evidence properties.Evidence
}

// Failed reports whether any property failed.
func (r *Report) Failed() bool { return len(r.Failures) > 0 }

// FailedOn reports whether the named property failed; with the name empty,
// whether any did.
func (r *Report) FailedOn(property string) bool {
	return slices.ContainsFunc(r.Failures, func(f Failure) bool { return property == "" || f.Property == property })
}

// Watched are the resources the case's controller watched, as StaleWatch
// names them.
func Watched(r *Report) []string { return r.watched }
