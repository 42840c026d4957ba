package harness_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeprop/kubeprop/properties"
)

// The tests' controller under test: a Widget (testdata/crds) runs
// spec.replicas pods and reports status.readyReplicas. churn is a seeded
// bug: it writes status.lastReconcileTime on every reconcile, which
// triggers the next reconcile, forever.
var widgetGVK = schema.GroupVersionKind{Group: "test.kubeprop.dev", Version: "v1", Kind: "Widget"}

type widgetReconciler struct {
	client.Client
	churn bool
	// exitAt, when set, ends the process when a Widget asks for that many
	// replicas: a controller binary that crashes mid-case.
	exitAt int64
	// finalizer puts widgetFinalizer on every pod it creates and removes it
	// from its pods being deleted, as controllers that clean up after
	// their pods do: once the controller is stopped, nothing removes it.
	finalizer bool
	// stripLabel, when set, is a label the controller removes from its
	// pods on every reconcile: it fights any other writer that sets it.
	stripLabel string
	// seen, when set, is told of each Widget the controller reconciles,
	// as its informer's cache has it (the client reads unstructured
	// objects from the API server).
	seen  func(*unstructured.Unstructured)
	cache client.Reader
	// blindToPods: the controller does not watch its pods, so it does not
	// replace one deleted until the Widget changes (a seeded bug).
	blindToPods bool
}

const widgetFinalizer = "test.kubeprop.dev/cleanup"

func newWidget(ns, name string, replicas int64) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(widgetGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	_ = unstructured.SetNestedField(u.Object, replicas, "spec", "replicas")
	return u
}

func (r *widgetReconciler) setup(mgr ctrl.Manager, opts controller.Options) error {
	r.Client, r.cache = mgr.GetClient(), mgr.GetCache()
	// Its back-off is capped at 5 s, not controller-runtime's 1000 s: the
	// default per-item limiter doubles at every failure, those of reconciles
	// that events started included, so 4 s of refused status writes while
	// its pods start (each pod's status an event) put its next try past the
	// 30 s convergence deadline (an aimed plan found it: [APIErrors{Error:
	// TooManyRequests, ForMs: 4000, Verb: update, Resource: widgets/status}
	// Recreate{Object: 0}]).
	opts.RateLimiter = workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, 5*time.Second)
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(widgetGVK)
	b := ctrl.NewControllerManagedBy(mgr).For(w).WithOptions(opts)
	if !r.blindToPods {
		b = b.Owns(&corev1.Pod{})
	}
	return b.Complete(r)
}

func (r *widgetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(widgetGVK)
	if err := r.Get(ctx, req.NamespacedName, w); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.seen != nil {
		cached := &unstructured.Unstructured{}
		cached.SetGroupVersionKind(widgetGVK)
		if err := r.cache.Get(ctx, req.NamespacedName, cached); err == nil {
			r.seen(cached)
		}
	}
	replicas, _, _ := unstructured.NestedInt64(w.Object, "spec", "replicas")
	if r.exitAt > 0 && replicas == r.exitAt {
		fmt.Fprintln(os.Stderr, "widget-process: giving up")
		os.Exit(1)
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(req.Namespace), client.MatchingLabels{"widget": req.Name}); err != nil {
		return ctrl.Result{}, err
	}
	var active []corev1.Pod
	ready := int64(0)
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil && controllerutil.RemoveFinalizer(&p, widgetFinalizer) {
			if err := r.Update(ctx, &p); err != nil && !apierrors.IsNotFound(err) {
				return ctrl.Result{}, err
			}
		}
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			continue
		}
		if _, set := p.Labels[r.stripLabel]; set && r.stripLabel != "" {
			delete(p.Labels, r.stripLabel)
			if err := r.Update(ctx, &p); err != nil {
				return ctrl.Result{}, client.IgnoreNotFound(err)
			}
		}
		active = append(active, p)
		if podReady(&p) {
			ready++
		}
	}
	sort.Slice(active, func(i, j int) bool { return active[i].Name < active[j].Name })
	for i := int64(len(active)); i < replicas; i++ {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, GenerateName: req.Name + "-", Labels: map[string]string{"widget": req.Name}},
			Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To[int64](30),
				Containers:                    []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
			},
		}
		if r.finalizer {
			controllerutil.AddFinalizer(pod, widgetFinalizer)
		}
		if err := controllerutil.SetControllerReference(w, pod, r.Scheme()); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Create(ctx, pod); err != nil {
			return ctrl.Result{}, err
		}
	}
	for i := replicas; i < int64(len(active)); i++ {
		if err := r.Delete(ctx, &active[i]); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
	}
	want := map[string]any{"replicas": min(int64(len(active)), replicas), "readyReplicas": ready}
	if r.churn {
		want["lastReconcileTime"] = time.Now().Format(time.RFC3339Nano)
	}
	status, _, _ := unstructured.NestedMap(w.Object, "status")
	if fmt.Sprint(status) == fmt.Sprint(want) {
		return ctrl.Result{}, nil
	}
	_ = unstructured.SetNestedMap(w.Object, want, "status")
	return ctrl.Result{}, r.Status().Update(ctx, w)
}

// widgetReady: every Widget has as many ready pods as replicas.
func widgetReady(s properties.State) error {
	for _, w := range s.ByKind("Widget") {
		want, _, _ := unstructured.NestedInt64(w.Object, "spec", "replicas")
		got, _, _ := unstructured.NestedInt64(w.Object, "status", "readyReplicas")
		if got != want {
			return fmt.Errorf("Widget %s has %d of %d replicas ready", w.GetName(), got, want)
		}
	}
	return nil
}

// writesNothing is Spec.Ready for a test controller that writes nothing
// of its own: the case's setup goes on once the fixtures are there,
// without waiting for its first write.
func writesNothing(properties.State) error { return nil }
