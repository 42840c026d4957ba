package suite

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness"
	"github.com/kubeprop/kubeprop/properties"
)

// StatefulSetSpec checks kube-controller-manager's real StatefulSet
// controller, the reference a stateful operator is measured against: a
// StatefulSet of three with a volume claim template, under node loss,
// container kills, crash loops, readiness flaps, hung processes, deleted
// pods, scale changes and volume growth, converges (every ordinal below
// the replicas has its pod ready and its claim bound at the size asked),
// does not fight and goes quiet.
//
// Its pods are managed in parallel (podManagementPolicy Parallel): with
// the default OrderedReady, one pod that cannot be replaced holds up every
// ordinal after it, and convergence would say little. A StatefulSet never
// replaces a pod it cannot prove gone (at most one pod per identity), so a
// pod left Terminating on a lost node stays, and its ordinal with it: the
// convergence predicate accepts it.
func StatefulSetSpec() harness.Spec {
	spec := controllerManagerSpec(statefulSetFixtures, appsv1.SchemeGroupVersion.WithKind("ControllerRevision"),
		properties.Converges("converges", statefulSetConverged, properties.ConvergeOptions{Within: 30 * time.Second}),
		faults.NodeLoss(), faults.NodeRecover(), faults.ContainerKill(faults.ContainerKillOptions{}), faults.CrashLoop(),
		faults.ReadinessFlap(), faults.LivenessFailure(), faults.ChildDelete(), faults.ScaleChange(faults.ScaleOptions{}), faults.VolumeGrowth())
	// Claims bind before the pods schedule.
	spec.Setup = 20 * time.Second
	return spec
}

func statefulSetFixtures(namespace string) []client.Object {
	labels := map[string]string{"app": "db"}
	tcp := corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(5432)}}
	return []client.Object{&appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To[int32](3),
			ServiceName:         "db",
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "db", Image: "registry.example/db:1",
					VolumeMounts:   []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/db"}},
					ReadinessProbe: &corev1.Probe{ProbeHandler: tcp, PeriodSeconds: 10},
					LivenessProbe:  &corev1.Probe{ProbeHandler: tcp, PeriodSeconds: 10, FailureThreshold: 3},
				}}},
			},
			// No storage class named: the cluster's default one.
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
		},
	}}
}

// statefulSetConverged: the StatefulSet's status is of its generation;
// each ordinal below its replicas has a running, ready pod, or a pod left
// Terminating where the StatefulSet cannot replace it (see
// StatefulSetSpec), and a bound claim per template whose capacity is at
// least its request; no other pod of it is active.
func statefulSetConverged(s properties.State) error {
	for _, u := range s.ByKind("StatefulSet") {
		set, err := properties.As[appsv1.StatefulSet](u)
		if err != nil {
			return err
		}
		if set.Status.ObservedGeneration != set.Generation {
			return fmt.Errorf("StatefulSet %s status is of an older generation", set.Name)
		}
		want := int(ptr.Deref(set.Spec.Replicas, 1))
		pods := map[int]*corev1.Pod{}
		for _, p := range s.ByKind("Pod") {
			pod, err := properties.As[corev1.Pod](p)
			if err != nil {
				return err
			}
			if i, ok := ordinal(set.Name, pod.Name); ok {
				pods[i] = pod
			}
		}
		blocked := blockedByEarlier(set, pods)
		for i := range want {
			pod := pods[i]
			switch {
			case pod == nil && blocked:
				continue
			case pod == nil:
				return fmt.Errorf("StatefulSet %s: no pod of ordinal %d", set.Name, i)
			case leftTerminating(pod):
				continue
			case pod.DeletionTimestamp != nil:
				return fmt.Errorf("StatefulSet %s: pod of ordinal %d is terminating", set.Name, i)
			case pod.Status.Phase != corev1.PodRunning || !podReady(pod):
				return fmt.Errorf("StatefulSet %s: pod of ordinal %d is %s and not ready", set.Name, i, pod.Status.Phase)
			}
			for _, tmpl := range set.Spec.VolumeClaimTemplates {
				if err := claimReady(s, fmt.Sprintf("%s-%s-%d", tmpl.Name, set.Name, i)); err != nil {
					return fmt.Errorf("StatefulSet %s: ordinal %d: %w", set.Name, i, err)
				}
			}
		}
		for i, pod := range pods {
			if i >= want && activePod(pod) {
				return fmt.Errorf("StatefulSet %s: pod of ordinal %d is active beyond %d replicas", set.Name, i, want)
			}
		}
	}
	return nil
}

// blockedByEarlier: a pod of set's name left Terminating on a lost node
// belongs to an earlier StatefulSet of the name (deleted, and created
// again). The StatefulSet controller cannot create that ordinal (the name
// is taken), and a failed create ends its whole sync (kube-controller-
// manager v1.37, even with Parallel pods): the set's other missing
// ordinals wait for the lost node's pod to go, which only an admin's
// force-deletion does.
func blockedByEarlier(set *appsv1.StatefulSet, pods map[int]*corev1.Pod) bool {
	for _, pod := range pods {
		if leftTerminating(pod) && !metav1.IsControlledBy(pod, set) {
			return true
		}
	}
	return false
}

// leftTerminating: a pod being deleted that is no longer ready, as the
// node lifecycle controller leaves the pods of a lost node. A pod on a
// live node goes once its grace period is out.
func leftTerminating(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp != nil && !podReady(pod)
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// claimReady: the claim is bound and has at least the storage it asks for.
func claimReady(s properties.State, name string) error {
	u := s.Get("PersistentVolumeClaim", name)
	if u == nil {
		return fmt.Errorf("no claim %s", name)
	}
	claim, err := properties.As[corev1.PersistentVolumeClaim](u)
	if err != nil {
		return err
	}
	if claim.Status.Phase != corev1.ClaimBound {
		return fmt.Errorf("claim %s is %s", name, claim.Status.Phase)
	}
	want, got := claim.Spec.Resources.Requests[corev1.ResourceStorage], claim.Status.Capacity[corev1.ResourceStorage]
	if got.Cmp(want) < 0 {
		return fmt.Errorf("claim %s has %s of the %s it asks for", name, got.String(), want.String())
	}
	return nil
}

// ordinal is the ordinal of a pod of the StatefulSet set, by its name.
func ordinal(set, pod string) (int, bool) {
	rest, ok := strings.CutPrefix(pod, set+"-")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	return i, err == nil && i >= 0
}
