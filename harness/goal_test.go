package harness_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness"
	"github.com/kubeprop/kubeprop/properties"
)

// lateConfigMapSpec's controller makes the ConfigMap "late" after a pause
// longer than the settle's quiet period: quiet alone would start the steps
// before it is done. Its goal is that ConfigMap.
func lateConfigMapSpec(pause time.Duration) harness.Spec {
	spec := widgetSpec(false)
	spec.Controller = harness.Func(func(ctx context.Context, cfg *rest.Config) error {
		ns, _ := harness.CaseNamespace(ctx)
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return nil
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late"}}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) && ctx.Err() == nil {
			return err
		}
		<-ctx.Done()
		return nil
	})
	spec.Watch = append(spec.Watch, corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	spec.Ready = writesNothing
	spec.Setup, spec.SettleCap = 6*time.Second, time.Second
	spec.Properties = []properties.Property{
		properties.Converges("late-made", func(s properties.State) error {
			if s.Get("ConfigMap", "late") == nil {
				return errors.New("no ConfigMap late")
			}
			return nil
		}, properties.ConvergeOptions{Within: 3 * time.Second}),
	}
	return spec
}

// TestSetupWaitsForGoals: the first step waits until Converges's predicate
// holds on the fixtures, not only for the settle's quiet; a goal that
// does not hold within Spec.Setup is logged and the steps go on.
func TestSetupWaitsForGoals(t *testing.T) {
	t.Parallel()
	t.Run("held", func(t *testing.T) {
		t.Parallel()
		rep, err := harness.Run(context.Background(), env, lateConfigMapSpec(2*time.Second), []faults.Step{faults.ControllerRestartStep{}})
		require.NoError(t, err)
		timeline := strings.Join(rep.Timeline, "\n")
		require.False(t, rep.Failed(), "%+v\n%s", rep.Failures, timeline)
		require.GreaterOrEqual(t, rep.Times.Setup, 2*time.Second, "the steps began before the goal held:\n%s", timeline)
		require.Contains(t, timeline, "setup: the goals held")
	})
	t.Run("not in time", func(t *testing.T) {
		t.Parallel()
		rep, err := harness.Run(context.Background(), env, lateConfigMapSpec(time.Hour), []faults.Step{faults.ControllerRestartStep{}})
		require.NoError(t, err)
		timeline := strings.Join(rep.Timeline, "\n")
		require.Contains(t, timeline, "setup: a goal did not hold within Spec.Setup (late-made: no ConfigMap late); the steps go on")
		require.True(t, rep.Failed(), "the steps went on and converges judged the case:\n%s", timeline)
		require.Equal(t, "late-made", rep.Failures[0].Property)
	})
}
