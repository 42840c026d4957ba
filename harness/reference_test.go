package harness_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness"
	"github.com/kubeprop/kubeprop/properties"
)

// referenceSpec is the Widget controller judged only against its
// reference runs: no predicate of its own.
func referenceSpec(blindToPods bool, more ...properties.Property) harness.Spec {
	return harness.Spec{
		Controller: harness.Manager(func(mgr manager.Manager, opts controller.Options) error {
			return (&widgetReconciler{blindToPods: blindToPods}).setup(mgr, opts)
		}),
		Fixtures:   func(ns string) []client.Object { return []client.Object{newWidget(ns, "web", 3)} },
		Properties: append([]properties.Property{properties.MatchesReference(properties.ReferenceOptions{Within: 10 * time.Second})}, more...),
	}
}

// TestMatchesReference: a correct controller comes, after the faults, to
// the end state of the same user changes (and the same lasting node loss)
// without the other faults; a controller that does not watch its pods never
// replaces one deleted, and the reference run shows it with no predicate
// written for it. A second case with the same user changes reuses the
// reference run.
func TestMatchesReference(t *testing.T) {
	t.Parallel()
	scale := faults.ScaleChangeStep{Object: 0, Field: "spec.replicas", Value: 4}
	timeline := func(rep *harness.Report) string { return strings.Join(rep.Timeline, "\n") }
	t.Run("correct", func(t *testing.T) {
		t.Parallel()
		spec := referenceSpec(false)
		rep, err := harness.Run(context.Background(), env, spec, []faults.Step{faults.NodeLossStep{Node: 0}, scale, faults.ChildDeleteStep{Child: 1}, faults.ControllerRestartStep{}})
		require.NoError(t, err)
		require.False(t, rep.Failed(), "failures: %+v\ntimeline:\n%s", rep.Failures, timeline(rep))
		require.Positive(t, rep.Times.Reference, "the first case ran its reference")
		require.Contains(t, timeline(rep), "reference run: kp-")

		// The node loss no step recovers is part of the reference run too.
		rep, err = harness.Run(context.Background(), env, spec, []faults.Step{faults.NodeLossStep{Node: 0}, scale, faults.ContainerKillStep{Pod: 0, ExitCode: 137}})
		require.NoError(t, err)
		require.False(t, rep.Failed(), "failures: %+v\ntimeline:\n%s", rep.Failures, timeline(rep))
		require.Zero(t, rep.Times.Reference, "the same user changes: the reference is reused")
		require.Contains(t, timeline(rep), "reference run: the one of an earlier case")
	})
	t.Run("blind to its pods", func(t *testing.T) {
		t.Parallel()
		rep, err := harness.Run(context.Background(), env, referenceSpec(true), []faults.Step{faults.ChildDeleteStep{Child: 0}})
		require.NoError(t, err)
		require.True(t, rep.Failed(), "timeline:\n%s", timeline(rep))
		f := rep.Failures[0]
		require.Equal(t, properties.MatchesReferenceName, f.Property)
		// Its status, written before the pods were all ready, may lag too.
		require.Contains(t, f.Message, "matches-reference: the end state differs from the reference run's: Pod web-*: 2 objects, the reference 3")
		require.Contains(t, f.Detail, "-reference +case")
	})
	t.Run("reference fails", func(t *testing.T) {
		t.Parallel()
		never := properties.Func("never", func(*properties.Trace) error { return errors.New("never holds") })
		rep, err := harness.Run(context.Background(), env, referenceSpec(false, never), []faults.Step{faults.ContainerKillStep{Pod: 0, ExitCode: 137}})
		require.NoError(t, err)
		require.True(t, rep.Failed())
		require.Equal(t, "matches-reference: the reference run failed: never: never holds", rep.Failures[0].Message)
	})
}
