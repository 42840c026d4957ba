package podset

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeprop/kubeprop/properties"
)

// Scheme has the built-in kinds and PodSet.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err) // static registrations: cannot fail
	}
	if err := AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// Fixtures is what each case starts with: PodSet web, three replicas of
// one container.
func Fixtures(namespace string) []client.Object {
	return []client.Object{&PodSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: "PodSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "web"},
		Spec: PodSetSpec{
			Replicas: ptr.To[int32](3),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/web:1"}}},
			},
		},
	}}
}

// Properties are what a PodSet controller owes: never more pods than
// replicas once it has seen the spec, convergence to all replicas ready,
// bounded back-off, no fight, quiet once converged, no panic.
func Properties() []properties.Property {
	return []properties.Property{
		properties.Always("at-most-replicas", AtMostReplicas),
		properties.Converges("converges", Converged, properties.ConvergeOptions{Within: 30 * time.Second}),
		properties.BoundedBackoff(properties.BackoffOptions{}),
		properties.NoFightLoop(properties.FightOptions{}),
		properties.Quiescent(properties.QuiesceOptions{Window: 2 * time.Second, Within: 20 * time.Second}),
		properties.NoPanics(),
	}
}

// Converged holds when every PodSet has exactly its replicas of active,
// ready pods and its status says so for its current generation.
func Converged(s properties.State) error {
	for _, ps := range podSets(s) {
		active, ready := counts(s, ps)
		want := ps.Replicas()
		switch {
		case active != int(want):
			return fmt.Errorf("PodSet %s has %d active pods for %d replicas", ps.Name, active, want)
		case ready != int(want):
			return fmt.Errorf("PodSet %s has %d ready pods for %d replicas", ps.Name, ready, want)
		case ps.Status.ObservedGeneration != ps.Generation:
			return fmt.Errorf("PodSet %s status is of an older generation", ps.Name)
		case ps.Status.Replicas != want || ps.Status.ReadyReplicas != want:
			return fmt.Errorf("PodSet %s status reports %d replicas, %d ready, for %d", ps.Name, ps.Status.Replicas, ps.Status.ReadyReplicas, want)
		}
	}
	return nil
}

// AtMostReplicas holds when no PodSet whose controller has seen its
// current generation has more active pods than replicas.
func AtMostReplicas(s properties.State) error {
	for _, ps := range podSets(s) {
		if ps.Status.ObservedGeneration != ps.Generation {
			continue
		}
		if active, _ := counts(s, ps); active > int(ps.Replicas()) {
			return fmt.Errorf("PodSet %s has more active pods than replicas", ps.Name)
		}
	}
	return nil
}

func podSets(s properties.State) []*PodSet {
	var out []*PodSet
	for _, u := range s.ByKind("PodSet") {
		if ps, err := properties.As[PodSet](u); err == nil {
			out = append(out, ps)
		}
	}
	return out
}

// counts returns how many of the PodSet's pods are active, and ready.
func counts(s properties.State, ps *PodSet) (active, ready int) {
	for _, u := range s.ByKind("Pod") {
		pod, err := properties.As[corev1.Pod](u)
		if err != nil {
			continue
		}
		if ref := metav1.GetControllerOf(pod); ref == nil || ref.UID != ps.UID || !Active(pod) {
			continue
		}
		active++
		if Ready(pod) {
			ready++
		}
	}
	return active, ready
}
