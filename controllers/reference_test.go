package controllers_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubeprop/kubeprop/controllers/database"
	"github.com/kubeprop/kubeprop/controllers/suite"
	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness"
	"github.com/kubeprop/kubeprop/properties"
)

// TestStorageChangeSetAgainBeforeCarriedOut: the false alarm of the
// 100-plan run of 2026-12-05. The operator's patches of its claims are
// refused while the user asks for 3Gi and then 2Gi: it never gets to grow
// them to 3Gi, and grows them to 2Gi once the faults heal. Its reference
// run grew them to 3Gi and refused the shrink to 2Gi. Both are correct:
// the case matches the reference run of the plan without the 3Gi, which
// it never carried out.
func TestStorageChangeSetAgainBeforeCarriedOut(t *testing.T) {
	t.Parallel()
	spec := suite.DatabaseSpec(func() *database.Reconciler { return &database.Reconciler{} })
	spec.Properties = append(slices.Clip(spec.Properties), properties.MatchesReference(properties.ReferenceOptions{}))
	storage := func(size string) faults.Step {
		return faults.UserChangeStep{Name: "StorageChange", Patch: `{"spec":{"storage":"` + size + `"}}`}
	}
	plan := []faults.Step{
		faults.APIErrorsStep{Error: faults.Timeout, Requests: 30, Verb: "patch", Resource: "persistentvolumeclaims"},
		storage("3Gi"), storage("2Gi"),
	}
	rep, err := harness.Run(context.Background(), env, spec, plan)
	require.NoError(t, err)
	timeline := strings.Join(rep.Timeline, "\n")
	require.False(t, rep.Failed(), "failures: %+v\ntimeline:\n%s", rep.Failures, timeline)
	require.Contains(t, timeline, "reference run without the user changes set again before the case carried them out (step 2)",
		"the case ended where the plan's own reference run did not")
}
