package harness_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness"
)

// TestCaseNamespace: a Func controller learns its case's namespace from
// its context, in its first run and after a restart; a context of no
// case has none.
func TestCaseNamespace(t *testing.T) {
	_, ok := harness.CaseNamespace(context.Background())
	require.False(t, ok)

	var mu sync.Mutex
	var seen []string
	spec := widgetSpec(false)
	spec.Controller = harness.Func(func(ctx context.Context, _ *rest.Config) error {
		ns, ok := harness.CaseNamespace(ctx)
		require.True(t, ok, "a Func controller's context names its case")
		mu.Lock()
		seen = append(seen, ns)
		mu.Unlock()
		<-ctx.Done()
		return nil
	})
	spec.Properties = spec.Properties[4:] // NoPanics: this controller runs no widgets
	spec.Setup, spec.SettleCap = 3*time.Second, time.Second
	spec.Ready = writesNothing
	rep, err := harness.Run(context.Background(), env, spec, []faults.Step{faults.ControllerRestartStep{}})
	require.NoError(t, err)
	require.False(t, rep.Failed(), "%+v", rep.Failures)
	ns := caseNamespace(t, rep)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{ns, ns}, seen, "the first run and the restart")
}
