package suite

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness"
	"github.com/kubeprop/kubeprop/properties"
)

// DeploymentSpec checks the real Deployment and ReplicaSet controllers of
// kube-controller-manager, the reference a pod controller is measured
// against: a Deployment of three replicas under node loss, container kills
// and scale changes converges, never runs more pods than replicas plus its
// surge, does not fight and goes quiet.
func DeploymentSpec() harness.Spec {
	spec := controllerManagerSpec(deploymentFixtures, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"),
		properties.Converges("converges", deploymentConverged, properties.ConvergeOptions{Within: 30 * time.Second}),
		faults.NodeLoss(), faults.NodeRecover(), faults.ContainerKill(faults.ContainerKillOptions{}), faults.CrashLoop(),
		faults.ReadinessFlap(), faults.ScaleChange(faults.ScaleOptions{}), faults.ChildDelete())
	spec.Properties = append([]properties.Property{properties.Always("at-most-replicas-plus-surge", deploymentWithinSurge)}, spec.Properties...)
	return spec
}

// controllerManagerSpec is the spec of a kube-controller-manager
// controller as a reference target: its objects are the fixtures (and the
// kind it makes, watched), it converges, does not fight and goes quiet.
func controllerManagerSpec(fixtures func(string) []client.Object, made schema.GroupVersionKind, converges properties.Property, fs ...faults.Fault) harness.Spec {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err) // static registrations: cannot fail
	}
	return harness.Spec{
		Controller: harness.ControllerManager(),
		Scheme:     scheme,
		Fixtures:   fixtures,
		Watch:      []schema.GroupVersionKind{made},
		Faults:     fs,
		Properties: []properties.Property{
			converges,
			properties.NoFightLoop(properties.FightOptions{}),
			properties.Quiescent(properties.QuiesceOptions{Window: 2 * time.Second, Within: 20 * time.Second}),
		},
		Setup: 10 * time.Second, SettleCap: 3 * time.Second,
	}
}

func deploymentFixtures(namespace string) []client.Object {
	labels := map[string]string{"app": "web"}
	return []client.Object{&appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/web:1"}}},
			},
		},
	}}
}

// deploymentPods counts the active and ready pods of the namespace (a
// case has one Deployment).
func deploymentPods(s properties.State) (active, ready int) {
	for _, u := range s.ByKind("Pod") {
		pod, err := properties.As[corev1.Pod](u)
		if err != nil || !activePod(pod) {
			continue
		}
		active++
		if podReady(pod) {
			ready++
		}
	}
	return active, ready
}

func deployments(s properties.State) []*appsv1.Deployment {
	var out []*appsv1.Deployment
	for _, u := range s.ByKind("Deployment") {
		if d, err := properties.As[appsv1.Deployment](u); err == nil {
			out = append(out, d)
		}
	}
	return out
}

func deploymentConverged(s properties.State) error {
	for _, d := range deployments(s) {
		want := ptr.Deref(d.Spec.Replicas, 1)
		active, ready := deploymentPods(s)
		switch {
		case d.Status.ObservedGeneration != d.Generation:
			return fmt.Errorf("Deployment %s status is of an older generation", d.Name)
		case d.Status.AvailableReplicas != want || d.Status.UpdatedReplicas != want || d.Status.Replicas != want:
			return fmt.Errorf("Deployment %s reports %d available, %d updated of %d", d.Name, d.Status.AvailableReplicas, d.Status.UpdatedReplicas, want)
		case active != int(want) || ready != int(want):
			return fmt.Errorf("Deployment %s has %d active, %d ready pods for %d replicas", d.Name, active, ready, want)
		}
	}
	return nil
}

// deploymentWithinSurge: each ReplicaSet whose controller has seen its
// current generation has at most its replicas of active pods, and the
// ReplicaSets of a Deployment that its controller has seen ask for at
// most its replicas plus the default surge (25%, rounded up). The limits
// apply per level: the Deployment controller sets the ReplicaSets'
// replicas, the ReplicaSet controller their pods.
func deploymentWithinSurge(s properties.State) error {
	var wanted int32
	for _, u := range s.ByKind("ReplicaSet") {
		rs, err := properties.As[appsv1.ReplicaSet](u)
		if err != nil {
			continue
		}
		wanted += ptr.Deref(rs.Spec.Replicas, 1)
		if rs.Status.ObservedGeneration != rs.Generation {
			continue
		}
		active := 0
		for _, p := range s.ByKind("Pod") {
			pod, err := properties.As[corev1.Pod](p)
			if err != nil || !activePod(pod) {
				continue
			}
			if ref := metav1.GetControllerOf(pod); ref != nil && ref.UID == rs.UID {
				active++
			}
		}
		if active > int(ptr.Deref(rs.Spec.Replicas, 1)) {
			return fmt.Errorf("ReplicaSet of Deployment has more pods than replicas")
		}
	}
	for _, d := range deployments(s) {
		want := ptr.Deref(d.Spec.Replicas, 1)
		if d.Status.ObservedGeneration == d.Generation && wanted > want+(want+3)/4 {
			return fmt.Errorf("Deployment %s's ReplicaSets ask for more than replicas plus surge", d.Name)
		}
	}
	return nil
}

func activePod(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil && pod.Status.Phase != corev1.PodFailed && pod.Status.Phase != corev1.PodSucceeded
}
