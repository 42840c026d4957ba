package podset

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Manager is the controller's field manager.
const Manager = "podset-controller"

// Labels and annotations the controller puts on its pods.
const (
	LabelName          = "apps.kubeprop.dev/podset"
	AnnotationTemplate = "apps.kubeprop.dev/template-hash"
)

// ConditionAvailable is True when every replica is ready.
const ConditionAvailable = "Available"

// progressCheck is how soon the controller looks again after it created or
// deleted pods: its reads are fresh, so it sees its own writes.
const progressCheck = 100 * time.Millisecond

// Reconciler is the PodSet controller. Its zero Flaws make it correct.
type Reconciler struct {
	Client client.Client
	// Reader is read for the PodSet and its pods: fresh from the API
	// server, so the controller never acts on a cache that has not seen
	// its own writes, nor sizes the pods it sees now to an older spec (a
	// restarted instance's cache, filled from a lagging API server,
	// replays the PodSet's history: a scale from 3 to 1 read as 3 beside
	// the one pod there is made two pods too many).
	Reader client.Reader
	Scheme *runtime.Scheme
	// Flaws are the seams the seeded-bug variants (controllers/bugs/...)
	// put their bugs in. Leave it zero.
	Flaws Flaws
}

// Flaws replace single decisions of the correct controller; each nil
// field keeps the correct one. They exist so that each seeded-bug variant
// differs from the correct controller in its bug only.
type Flaws struct {
	// Counts reports whether a pod counts toward the replicas. Correct:
	// neither terminating nor finished.
	Counts func(pod *corev1.Pod) bool
	// ListPods lists the PodSet's pods. Correct: a fresh list by label.
	ListPods func(ctx context.Context, r *Reconciler, ps *PodSet) ([]corev1.Pod, error)
	// Created follows a pod's creation. Correct: nothing.
	Created func(ctx context.Context, r *Reconciler, ps *PodSet, pod *corev1.Pod) error
	// Excess picks the pods to delete when there are too many. Correct:
	// the unready first, then by name.
	Excess func(active []corev1.Pod, n int) []corev1.Pod
	// Replace reports whether a pod must be deleted and replaced.
	// Correct: a finished pod, or one of an older template.
	Replace func(pod *corev1.Pod, ps *PodSet) bool
	// Status finishes the status to write. Correct: nothing.
	Status func(status *PodSetStatus)
	// After runs at the end of a successful reconcile. Correct: nothing.
	After func(ctx context.Context, r *Reconciler, ps *PodSet) error
	// OnError turns a reconcile's error into its result. Correct: return
	// it, and the workqueue backs off.
	OnError func(err error) (ctrl.Result, error)
}

// SetupWithManager registers the controller with mgr; opts are passed on
// (kubeprop's harness records reconciles through them).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.Client == nil {
		r.Client = client.WithFieldOwner(mgr.GetClient(), Manager)
	}
	if r.Reader == nil {
		r.Reader = mgr.GetAPIReader()
	}
	if r.Scheme == nil {
		r.Scheme = mgr.GetScheme()
	}
	if opts.RateLimiter == nil {
		opts.RateLimiter = RateLimiter[reconcile.Request]()
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("podset").
		For(&PodSet{}).
		Owns(&corev1.Pod{}).
		WithOptions(opts).
		Complete(r)
}

// MaxRetryDelay caps how long the controller waits before it retries a
// PodSet whose reconcile failed.
const MaxRetryDelay = 10 * time.Second

// RateLimiter is controller-runtime's default rate limiter with its
// per-object back-off capped at MaxRetryDelay instead of 1000 s. The
// default counts every failure, those of reconciles that events
// triggered too: a few seconds of refused writes while pods change make
// it wait minutes before it tries that PodSet again, long after the API
// server is back.
// T is the queue's item: reconcile.Request, or a client-go controller's
// key.
func RateLimiter[T comparable]() workqueue.TypedRateLimiter[T] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[T](5*time.Millisecond, MaxRetryDelay),
		&workqueue.TypedBucketRateLimiter[T]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

// Reconcile makes a PodSet's pods match its spec and reports them.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := r.reconcile(ctx, req)
	if err != nil && r.Flaws.OnError != nil {
		return r.Flaws.OnError(err)
	}
	return res, err
}

func (r *Reconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ps := &PodSet{}
	if err := r.Reader.Get(ctx, req.NamespacedName, ps); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if ps.DeletionTimestamp != nil {
		return ctrl.Result{}, nil // the garbage collector deletes the pods
	}
	pods, err := r.listPods(ctx, ps)
	if err != nil {
		return ctrl.Result{}, err
	}
	hash := templateHash(ps)
	var active []corev1.Pod
	changed := false
	for i := range pods {
		pod := &pods[i]
		if !r.counts(pod) {
			continue
		}
		if r.replace(pod, ps, hash) {
			if err := r.deletePod(ctx, pod); err != nil {
				return ctrl.Result{}, err
			}
			changed = true
			continue
		}
		active = append(active, *pod)
	}
	want := int(ps.Replicas())
	for range want - len(active) {
		pod, err := r.createPod(ctx, ps, hash)
		if err != nil {
			return ctrl.Result{}, err
		}
		active = append(active, *pod)
		changed = true
	}
	if len(active) > want {
		for _, pod := range r.excess(active, len(active)-want) {
			if err := r.deletePod(ctx, &pod); err != nil {
				return ctrl.Result{}, err
			}
			active = removePod(active, pod.Name)
			changed = true
		}
	}
	if err := r.writeStatus(ctx, ps, active); err != nil {
		return ctrl.Result{}, err
	}
	if r.Flaws.After != nil {
		if err := r.Flaws.After(ctx, r, ps); err != nil {
			return ctrl.Result{}, err
		}
	}
	if changed {
		return ctrl.Result{RequeueAfter: progressCheck}, nil
	}
	return ctrl.Result{}, nil
}

func (r *Reconciler) listPods(ctx context.Context, ps *PodSet) ([]corev1.Pod, error) {
	if r.Flaws.ListPods != nil {
		return r.Flaws.ListPods(ctx, r, ps)
	}
	var pods corev1.PodList
	if err := r.Reader.List(ctx, &pods, client.InNamespace(ps.Namespace), client.MatchingLabels{LabelName: ps.Name}); err != nil {
		return nil, fmt.Errorf("listing the pods of PodSet %s: %w", ps.Name, err)
	}
	return OwnedPods(pods.Items, ps), nil
}

// OwnedPods keeps the pods that ps controls, sorted by name.
func OwnedPods(pods []corev1.Pod, ps *PodSet) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == ps.UID {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (r *Reconciler) counts(pod *corev1.Pod) bool {
	if r.Flaws.Counts != nil {
		return r.Flaws.Counts(pod)
	}
	return Active(pod)
}

// Active reports whether a pod counts toward a PodSet's replicas: it is
// not being deleted and has not finished.
func Active(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil && pod.Status.Phase != corev1.PodFailed && pod.Status.Phase != corev1.PodSucceeded
}

func (r *Reconciler) replace(pod *corev1.Pod, ps *PodSet, hash string) bool {
	if r.Flaws.Replace != nil {
		return r.Flaws.Replace(pod, ps)
	}
	return pod.Status.Phase == corev1.PodFailed || pod.Annotations[AnnotationTemplate] != hash
}

func (r *Reconciler) excess(active []corev1.Pod, n int) []corev1.Pod {
	if r.Flaws.Excess != nil {
		return r.Flaws.Excess(active, n)
	}
	sorted := append([]corev1.Pod(nil), active...)
	sort.SliceStable(sorted, func(i, j int) bool { return !Ready(&sorted[i]) && Ready(&sorted[j]) })
	return sorted[:n]
}

// Ready reports whether a pod's Ready condition is True.
func Ready(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (r *Reconciler) createPod(ctx context.Context, ps *PodSet, hash string) (*corev1.Pod, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:    ps.Namespace,
			GenerateName: ps.Name + "-",
			Labels:       map[string]string{LabelName: ps.Name},
			Annotations:  map[string]string{AnnotationTemplate: hash},
		},
		Spec: *ps.Spec.Template.Spec.DeepCopy(),
	}
	for k, v := range ps.Spec.Template.Labels {
		pod.Labels[k] = v
	}
	if err := controllerutil.SetControllerReference(ps, pod, r.Scheme); err != nil {
		return nil, fmt.Errorf("owning a pod of PodSet %s: %w", ps.Name, err)
	}
	if err := r.Client.Create(ctx, pod); err != nil {
		return nil, fmt.Errorf("creating a pod of PodSet %s: %w", ps.Name, err)
	}
	if r.Flaws.Created != nil {
		if err := r.Flaws.Created(ctx, r, ps, pod); err != nil {
			return nil, err
		}
	}
	return pod, nil
}

func (r *Reconciler) deletePod(ctx context.Context, pod *corev1.Pod) error {
	err := r.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting pod %s: %w", pod.Name, err)
	}
	return nil
}

func removePod(pods []corev1.Pod, name string) []corev1.Pod {
	out := pods[:0]
	for _, p := range pods {
		if p.Name != name {
			out = append(out, p)
		}
	}
	return out
}

// writeStatus applies the status, under the controller's field manager,
// when it changed.
func (r *Reconciler) writeStatus(ctx context.Context, ps *PodSet, active []corev1.Pod) error {
	status := PodSetStatus{Replicas: int32(len(active)), ObservedGeneration: ps.Generation,
		Conditions: append([]metav1.Condition(nil), ps.Status.Conditions...)}
	for i := range active {
		if Ready(&active[i]) {
			status.ReadyReplicas++
		}
	}
	available := metav1.Condition{Type: ConditionAvailable, Status: metav1.ConditionFalse, Reason: "Progressing",
		Message: fmt.Sprintf("%d of %d replicas ready", status.ReadyReplicas, ps.Replicas()), ObservedGeneration: ps.Generation}
	if status.ReadyReplicas == ps.Replicas() && status.Replicas == ps.Replicas() {
		available.Status, available.Reason = metav1.ConditionTrue, "ReplicasReady"
	}
	meta.SetStatusCondition(&status.Conditions, available)
	if r.Flaws.Status != nil {
		r.Flaws.Status(&status)
	}
	if apiequality.Semantic.DeepEqual(status, ps.Status) {
		return nil
	}
	body, err := json.Marshal(map[string]any{
		"apiVersion": GroupVersion.String(), "kind": "PodSet",
		"metadata": map[string]any{"name": ps.Name, "namespace": ps.Namespace},
		"status":   status,
	})
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(body); err != nil {
		return err
	}
	if err := r.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(Manager), client.ForceOwnership); err != nil {
		return fmt.Errorf("writing the status of PodSet %s: %w", ps.Name, err)
	}
	return nil
}

// templateHash names a template version: pods of another are replaced.
func templateHash(ps *PodSet) string {
	b, _ := json.Marshal(ps.Spec.Template)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:10]
}
