package harness_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness"
	"github.com/kubeprop/kubeprop/properties"
)

// probedDeployment is deployment with a startup probe (20 s) and a
// liveness probe (3 failures 10 s apart) on its container.
func probedDeployment(ns, name string, replicas int32) *appsv1.Deployment {
	d := deployment(ns, name, replicas)
	tcp := corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}
	c := &d.Spec.Template.Spec.Containers[0]
	c.StartupProbe = &corev1.Probe{ProbeHandler: tcp, InitialDelaySeconds: 20, PeriodSeconds: 10, FailureThreshold: 3}
	c.LivenessProbe = &corev1.Probe{ProbeHandler: tcp, PeriodSeconds: 10, FailureThreshold: 3}
	return d
}

// TestLivenessFailure: a pod's liveness probe failing long enough gets its
// container killed and restarted by the simulated kubelet; the
// LivenessFailure fault does it in a case.
func TestLivenessFailure(t *testing.T) {
	spec := harness.Spec{
		Fixtures: func(ns string) []client.Object { return []client.Object{probedDeployment(ns, "web", 1)} },
		// kube-controller-manager's Deployment controller is the controller.
		Controller: harness.Func(func(ctx context.Context, _ *rest.Config) error {
			<-ctx.Done()
			return nil
		}),
		Properties: []properties.Property{properties.Converges("restarted once and ready", func(s properties.State) error {
			pods := s.ByKind("Pod")
			if len(pods) != 1 {
				return fmt.Errorf("%d pods", len(pods))
			}
			pod, err := properties.As[corev1.Pod](pods[0])
			if err != nil {
				return err
			}
			for _, c := range pod.Status.ContainerStatuses {
				if c.RestartCount != 1 || !c.Ready || c.LastTerminationState.Terminated == nil || c.LastTerminationState.Terminated.ExitCode != 137 {
					return fmt.Errorf("container %s: %d restarts, ready %v", c.Name, c.RestartCount, c.Ready)
				}
			}
			return nil
		}, properties.ConvergeOptions{Within: 30 * time.Second})},
		Setup: 30 * time.Second, SettleCap: 5 * time.Second,
		Ready: writesNothing,
	}
	// Three failed probes 10 s apart at time scale 20: 1.5 s.
	rep, err := harness.Run(context.Background(), env, spec, []faults.Step{faults.LivenessFailureStep{Pod: 0, ForMs: 4000}})
	require.NoError(t, err)
	require.Empty(t, rep.NoOps)
	require.False(t, rep.Failed(), "%+v", rep.Failures)

	// A hang shorter than three probes passes unnoticed.
	cs := clientset(t)
	ctx := context.Background()
	ns := namespace(t, cs)
	addNodes(t, 1)
	_, err = cs.AppsV1().Deployments(ns).Create(ctx, probedDeployment(ns, "db", 1), metav1.CreateOptions{})
	require.NoError(t, err)
	pod := waitReady(t, cs, ns, "db", 1)[0]
	require.NoError(t, env.Kubelets().FailLiveness(ctx, ns, pod.Name, "app", time.Second))
	// Three failed probes would take 1.5 s: twice that, no restart.
	require.Never(t, func() bool {
		got, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return err != nil || got.Status.ContainerStatuses[0].RestartCount != 0 || !*got.Status.ContainerStatuses[0].Started
	}, 3*time.Second, 100*time.Millisecond, "a hang shorter than three probes restarted the container (or the pod could not be read)")
}
