package database

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"golang.org/x/time/rate"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Manager is the operator's field manager.
const Manager = "database-operator"

// Finalizer holds a Database until the operator has reclaimed its
// volumes: claims made from a StatefulSet's volumeClaimTemplates outlive
// the StatefulSet.
const Finalizer = "apps.kubeprop.dev/database-storage"

// Labels of the operator's objects. LabelInstanceUID ties a pod and a
// claim to one incarnation of a Database: a Database deleted and created
// again under its name has the same instance label and another UID.
const (
	LabelName        = "app.kubernetes.io/name"
	LabelInstance    = "app.kubernetes.io/instance"
	LabelInstanceUID = "db.kubeprop.dev/instance-uid"
)

// ClaimTemplate names the StatefulSet's volume claim template: member i
// of Database x has claim data-x-i.
const ClaimTemplate = "data"

// Port is the database's port, which the readiness probe dials.
const Port = 5432

// Condition types.
const (
	// ConditionReady is True when every member is ready on the volume
	// size asked for.
	ConditionReady = "Ready"
	// ConditionStorageShrinkRefused is True while spec.storage asks for
	// less than the volumes have: volumes never shrink.
	ConditionStorageShrinkRefused = "StorageShrinkRefused"
)

// waitForGone is how soon the operator looks again while something it
// waits for goes away (a StatefulSet being deleted, a Database's claims):
// the watch events come first, this is the safety net.
const waitForGone = time.Second

// Reconciler is the Database operator. Its zero Flaws make it correct.
type Reconciler struct {
	// Client writes, and reads from the manager's cache.
	Client client.Client
	// Reader reads fresh from the API server: what a deleted Database
	// still has is listed from it, so that no claim made meanwhile is
	// left behind.
	Reader client.Reader
	Scheme *runtime.Scheme
	// Flaws are the seams the seeded-bug variants (controllers/bugs/...)
	// put their bugs in. Leave it zero.
	Flaws Flaws
}

// Flaws replace single decisions of the correct operator; each nil field
// keeps the correct one. They exist so that each seeded-bug variant
// differs from the correct operator in its bug only.
type Flaws struct {
	// Grow reports whether the volumes must grow to target, the
	// StatefulSet's template asking for applied. Correct: applied is less
	// than target, from the template as observed.
	Grow func(ctx context.Context, r *Reconciler, db *Database, applied, target resource.Quantity) (bool, error)
	// SyncSpec reports whether to bring the StatefulSet's replicas and
	// image to the Database's. Correct: always.
	SyncSpec func(ctx context.Context, r *Reconciler, db *Database) (bool, error)
	// ObservedGeneration is the generation the status reports as
	// observed. Correct: that of the Database the reconcile acted on.
	ObservedGeneration func(ctx context.Context, r *Reconciler, db *Database) (int64, error)
	// Cleanup reclaims a deleted Database's StatefulSet and claims and
	// reports whether they are gone. Correct: by UID, every delete with a
	// UID precondition.
	Cleanup func(ctx context.Context, r *Reconciler, db *Database) (bool, error)
	// Release removes the finalizer. Correct: an Update carrying the
	// resourceVersion read.
	Release func(ctx context.Context, r *Reconciler, db *Database) error
}

// SetupWithManager registers the operator with mgr; opts are passed on
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
		Named("database").
		For(&Database{}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		// Claims have no owner: the StatefulSet controller makes them from
		// the template, with the template's labels.
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(claimDatabase)).
		WithOptions(opts).
		Complete(r)
}

// claimDatabase maps a claim to its Database by the instance label.
func claimDatabase(_ context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[LabelInstance]
	if name == "" || o.GetLabels()[LabelInstanceUID] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}

// MaxRetryDelay caps how long the operator waits before it retries a
// Database whose reconcile failed.
const MaxRetryDelay = 10 * time.Second

// RateLimiter is controller-runtime's default rate limiter with its
// per-object back-off capped at MaxRetryDelay instead of 1000 s: a few
// seconds of refused writes must not make the operator wait minutes
// after the API server is back.
func RateLimiter[T comparable]() workqueue.TypedRateLimiter[T] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[T](5*time.Millisecond, MaxRetryDelay),
		&workqueue.TypedBucketRateLimiter[T]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

// Reconcile makes a Database's Service, ConfigMap and StatefulSet match
// its spec, grows its volumes, reclaims them once it is deleted, and
// reports its status. Every decision is taken from what it observes, so
// the next reconcile repairs a crash at any point.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	db := &Database{}
	if err := r.Client.Get(ctx, req.NamespacedName, db); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if db.DeletionTimestamp != nil {
		return r.finalize(ctx, db)
	}
	if !controllerutil.ContainsFinalizer(db, Finalizer) {
		controllerutil.AddFinalizer(db, Finalizer)
		// An Update: a stale copy gets a 409, never overwrites a newer one.
		if err := r.Client.Update(ctx, db); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding the finalizer of Database %s: %w", db.Name, err)
		}
	}
	want, err := db.StorageSize()
	if err != nil {
		// The CRD's pattern lets no such value in; nothing to retry.
		return ctrl.Result{}, r.UpdateStatus(ctx, db, func(s *DatabaseStatus) {
			meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse,
				Reason: "InvalidStorage", Message: err.Error(), ObservedGeneration: db.Generation})
		})
	}

	sts := &appsv1.StatefulSet{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(db), sts); apierrors.IsNotFound(err) {
		sts = nil
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading StatefulSet %s: %w", db.Name, err)
	}
	if sts != nil && !metav1.IsControlledBy(sts, db) {
		// An earlier incarnation's, which the garbage collector is
		// deleting (or someone else's): never adopt or touch it.
		return ctrl.Result{RequeueAfter: waitForGone}, nil
	}
	if sts != nil && sts.DeletionTimestamp != nil {
		// Ours, being deleted to grow the volumes (or by someone else):
		// it is created again once gone.
		return ctrl.Result{RequeueAfter: waitForGone}, nil
	}
	if foreign, err := r.ensureService(ctx, db); err != nil {
		return ctrl.Result{}, err
	} else if foreign {
		return ctrl.Result{RequeueAfter: waitForGone}, nil // an earlier incarnation's, as above
	}

	// Volumes never shrink: the size to apply is at least what the
	// StatefulSet's template asks for, or, with no StatefulSet, what the
	// status says was applied last.
	applied, hasApplied := resource.Quantity{}, false
	if sts != nil {
		applied, hasApplied = TemplateStorage(sts)
	} else if db.Status.Storage != "" {
		if q, err := resource.ParseQuantity(db.Status.Storage); err == nil {
			applied, hasApplied = q, true
		}
	}
	target := want
	refused := hasApplied && applied.Cmp(want) > 0
	if refused {
		target = applied
	}

	if sts == nil {
		sts, err = r.createStatefulSet(ctx, db, target)
		if err != nil {
			return ctrl.Result{}, err
		}
	} else {
		grow, err := r.grow(ctx, db, applied, target)
		if err != nil {
			return ctrl.Result{}, err
		}
		if grow {
			// volumeClaimTemplates are immutable: grow the claims, then
			// delete the StatefulSet leaving its pods running, and create
			// it again with the new template; it adopts the pods.
			if err := r.growClaims(ctx, db, target); err != nil {
				return ctrl.Result{}, err
			}
			err := r.Client.Delete(ctx, sts, client.PropagationPolicy(metav1.DeletePropagationOrphan), client.Preconditions{UID: &sts.UID})
			if err != nil && !apierrors.IsNotFound(err) {
				return ctrl.Result{}, fmt.Errorf("deleting StatefulSet %s to grow its volumes to %s: %w", sts.Name, target.String(), err)
			}
			return ctrl.Result{RequeueAfter: waitForGone}, nil
		}
		// Claims smaller than the template: made before it changed, or
		// missed by a stale view at the growth.
		if hasApplied {
			if err := r.growClaims(ctx, db, applied); err != nil {
				return ctrl.Result{}, err
			}
		}
		if sync, err := r.syncSpec(ctx, db); err != nil {
			return ctrl.Result{}, err
		} else if sync {
			if err := r.syncStatefulSet(ctx, db, sts); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	if foreign, err := r.ensureConfigMap(ctx, db, target); err != nil {
		return ctrl.Result{}, err
	} else if foreign {
		return ctrl.Result{RequeueAfter: waitForGone}, nil // an earlier incarnation's, as above
	}

	observed, err := r.observedGeneration(ctx, db)
	if err != nil {
		return ctrl.Result{}, err
	}
	size, _ := TemplateStorage(sts)
	ready := sts.Status.ReadyReplicas
	return ctrl.Result{}, r.UpdateStatus(ctx, db, func(s *DatabaseStatus) {
		s.ObservedGeneration, s.ReadyReplicas, s.Storage = observed, ready, target.String()
		readyCond := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse, Reason: "Progressing",
			Message: fmt.Sprintf("%d of %d members ready", ready, db.Replicas()), ObservedGeneration: db.Generation}
		if ready == db.Replicas() && ptr.Deref(sts.Spec.Replicas, 1) == db.Replicas() && size.Cmp(want) >= 0 {
			readyCond.Status, readyCond.Reason = metav1.ConditionTrue, "MembersReady"
		}
		meta.SetStatusCondition(&s.Conditions, readyCond)
		if refused {
			meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: ConditionStorageShrinkRefused, Status: metav1.ConditionTrue,
				Reason: "VolumesNeverShrink", ObservedGeneration: db.Generation,
				Message: fmt.Sprintf("spec.storage %s is less than the %s applied; the volumes keep their size", db.Spec.Storage, applied.String())})
		} else {
			meta.RemoveStatusCondition(&s.Conditions, ConditionStorageShrinkRefused)
		}
	})
}

func (r *Reconciler) grow(ctx context.Context, db *Database, applied, target resource.Quantity) (bool, error) {
	if r.Flaws.Grow != nil {
		return r.Flaws.Grow(ctx, r, db, applied, target)
	}
	return applied.Cmp(target) < 0, nil
}

func (r *Reconciler) syncSpec(ctx context.Context, db *Database) (bool, error) {
	if r.Flaws.SyncSpec != nil {
		return r.Flaws.SyncSpec(ctx, r, db)
	}
	return true, nil
}

func (r *Reconciler) observedGeneration(ctx context.Context, db *Database) (int64, error) {
	if r.Flaws.ObservedGeneration != nil {
		return r.Flaws.ObservedGeneration(ctx, r, db)
	}
	return db.Generation, nil
}

// UpdateStatus sets the Database's status with set and writes it, when
// that changes it, through the status subresource: client-go's standard
// conflict retry, each try on a copy read again.
func (r *Reconciler) UpdateStatus(ctx context.Context, db *Database, set func(*DatabaseStatus)) error {
	status := *db.DeepCopy()
	set(&status.Status)
	if apiequality.Semantic.DeepEqual(status.Status, db.Status) {
		return nil
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fresh := &Database{}
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(db), fresh); err != nil {
			return err
		}
		if fresh.UID != db.UID {
			return nil // another incarnation: its own reconcile reports it
		}
		var before DatabaseStatus
		fresh.Status.DeepCopyInto(&before)
		set(&fresh.Status)
		if apiequality.Semantic.DeepEqual(fresh.Status, before) {
			return nil
		}
		return r.Client.Status().Update(ctx, fresh)
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("writing the status of Database %s: %w", db.Name, err)
	}
	return nil
}

// Labels are the labels of a Database's pods and claims, and its
// StatefulSet's selector.
func Labels(db *Database) map[string]string {
	return map[string]string{LabelName: "database", LabelInstance: db.Name, LabelInstanceUID: string(db.UID)}
}

// templateStorage is what the StatefulSet's claim template asks for.
func TemplateStorage(sts *appsv1.StatefulSet) (resource.Quantity, bool) {
	for _, t := range sts.Spec.VolumeClaimTemplates {
		if t.Name == ClaimTemplate {
			q, ok := t.Spec.Resources.Requests[corev1.ResourceStorage]
			return q, ok
		}
	}
	return resource.Quantity{}, false
}

// StatefulSet is the StatefulSet a Database asks for, its volumes of
// storage.
func StatefulSet(db *Database, storage resource.Quantity) *appsv1.StatefulSet {
	labels := Labels(db)
	tcp := corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(Port)}}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: db.Namespace, Name: db.Name,
			Labels: map[string]string{LabelName: "database", LabelInstance: db.Name}},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(db.Replicas()),
			ServiceName:         db.Name,
			PodManagementPolicy: appsv1.ParallelPodManagement,
			// With the UID: a later incarnation never adopts an earlier
			// one's pods.
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				// A database's clean shutdown (flush, leave the ensemble)
				// takes its time.
				Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](60), Containers: []corev1.Container{{
					Name: "db", Image: db.Spec.Image,
					Ports:          []corev1.ContainerPort{{Name: "db", ContainerPort: Port}},
					VolumeMounts:   []corev1.VolumeMount{{Name: ClaimTemplate, MountPath: "/var/lib/db"}},
					ReadinessProbe: &corev1.Probe{ProbeHandler: tcp, PeriodSeconds: 10},
				}}},
			},
			// No storage class: the cluster's default one, which resizes.
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: ClaimTemplate, Labels: labels},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: storage}},
				},
			}},
		},
	}
}

func (r *Reconciler) createStatefulSet(ctx context.Context, db *Database, storage resource.Quantity) (*appsv1.StatefulSet, error) {
	sts := StatefulSet(db, storage)
	if err := controllerutil.SetControllerReference(db, sts, r.Scheme); err != nil {
		return nil, fmt.Errorf("owning StatefulSet %s: %w", sts.Name, err)
	}
	if err := r.Client.Create(ctx, sts); err != nil {
		// AlreadyExists: the old one is still being deleted, or the view
		// is stale; the back-off retries.
		return nil, fmt.Errorf("creating StatefulSet %s: %w", sts.Name, err)
	}
	return sts, nil
}

// syncStatefulSet brings the StatefulSet's replicas and image to the
// Database's.
func (r *Reconciler) syncStatefulSet(ctx context.Context, db *Database, sts *appsv1.StatefulSet) error {
	spec := map[string]any{}
	if ptr.Deref(sts.Spec.Replicas, 1) != db.Replicas() {
		spec["replicas"] = db.Replicas()
	}
	for _, c := range sts.Spec.Template.Spec.Containers {
		if c.Name == "db" && c.Image != db.Spec.Image {
			// A strategic merge patch: the container by its name.
			spec["template"] = map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "db", "image": db.Spec.Image}}}}
		}
	}
	if len(spec) == 0 {
		return nil
	}
	if err := r.patch(ctx, sts, types.StrategicMergePatchType, map[string]any{"spec": spec}); err != nil {
		return fmt.Errorf("updating StatefulSet %s: %w", sts.Name, err)
	}
	return nil
}

// patch patches obj, with its UID in the patch as a precondition: the
// object of that name in a stale view may be another incarnation's by
// now (the API server refuses the patch then).
func (r *Reconciler) patch(ctx context.Context, obj client.Object, pt types.PatchType, patch map[string]any) error {
	patch["metadata"] = map[string]any{"uid": obj.GetUID()}
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	return r.Client.Patch(ctx, obj, client.RawPatch(pt, body))
}

// growClaims raises the request of every claim of this incarnation that
// asks for less than size. Only a bound claim may grow: the others are
// grown once bound (their change brings the Database back).
func (r *Reconciler) growClaims(ctx context.Context, db *Database, size resource.Quantity) error {
	var claims corev1.PersistentVolumeClaimList
	if err := r.Client.List(ctx, &claims, client.InNamespace(db.Namespace), client.MatchingLabels{LabelInstanceUID: string(db.UID)}); err != nil {
		return fmt.Errorf("listing the claims of Database %s: %w", db.Name, err)
	}
	for i := range claims.Items {
		claim := &claims.Items[i]
		req := claim.Spec.Resources.Requests[corev1.ResourceStorage]
		if claim.DeletionTimestamp != nil || claim.Status.Phase != corev1.ClaimBound || req.Cmp(size) >= 0 {
			continue
		}
		patch := map[string]any{"spec": map[string]any{"resources": map[string]any{"requests": map[string]any{"storage": size.String()}}}}
		if err := r.patch(ctx, claim, types.MergePatchType, patch); err != nil && !gone(err) {
			return fmt.Errorf("growing claim %s to %s: %w", claim.Name, size.String(), err)
		}
	}
	return nil
}

func (r *Reconciler) ensureService(ctx context.Context, db *Database) (foreign bool, err error) {
	svc := &corev1.Service{}
	err = r.Client.Get(ctx, client.ObjectKeyFromObject(db), svc)
	switch {
	case apierrors.IsNotFound(err):
		svc = &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: db.Namespace, Name: db.Name,
				Labels: map[string]string{LabelName: "database", LabelInstance: db.Name}},
			Spec: corev1.ServiceSpec{
				ClusterIP: corev1.ClusterIPNone,
				Selector:  map[string]string{LabelInstance: db.Name},
				Ports:     []corev1.ServicePort{{Name: "db", Port: Port, TargetPort: intstr.FromInt32(Port)}},
				// Members find each other before they are ready.
				PublishNotReadyAddresses: true,
			},
		}
		if err := controllerutil.SetControllerReference(db, svc, r.Scheme); err != nil {
			return false, fmt.Errorf("owning Service %s: %w", svc.Name, err)
		}
		if err := r.Client.Create(ctx, svc); err != nil {
			return false, fmt.Errorf("creating Service %s: %w", svc.Name, err)
		}
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading Service %s: %w", db.Name, err)
	case !metav1.IsControlledBy(svc, db):
		return true, nil
	}
	return false, nil
}

// Members is the ConfigMap's member list: x-0.x,x-1.x,...
func Members(db *Database) string {
	members := make([]string, db.Replicas())
	for i := range members {
		members[i] = fmt.Sprintf("%s-%d.%s", db.Name, i, db.Name)
	}
	return strings.Join(members, ",")
}

// ConfigMapName is the name of a Database's ConfigMap.
func ConfigMapName(db string) string { return db + "-config" }

func (r *Reconciler) ensureConfigMap(ctx context.Context, db *Database, storage resource.Quantity) (foreign bool, err error) {
	data := map[string]string{"members": Members(db), "storage": storage.String()}
	cm := &corev1.ConfigMap{}
	err = r.Client.Get(ctx, types.NamespacedName{Namespace: db.Namespace, Name: ConfigMapName(db.Name)}, cm)
	switch {
	case apierrors.IsNotFound(err):
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: db.Namespace, Name: ConfigMapName(db.Name),
				Labels: map[string]string{LabelName: "database", LabelInstance: db.Name}},
			Data: data,
		}
		if err := controllerutil.SetControllerReference(db, cm, r.Scheme); err != nil {
			return false, fmt.Errorf("owning ConfigMap %s: %w", cm.Name, err)
		}
		if err := r.Client.Create(ctx, cm); err != nil {
			return false, fmt.Errorf("creating ConfigMap %s: %w", cm.Name, err)
		}
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading ConfigMap %s: %w", ConfigMapName(db.Name), err)
	case !metav1.IsControlledBy(cm, db):
		return true, nil
	case apiequality.Semantic.DeepEqual(cm.Data, data):
		return false, nil
	}
	if err := r.patch(ctx, cm, types.MergePatchType, map[string]any{"data": data}); err != nil {
		return false, fmt.Errorf("updating ConfigMap %s: %w", cm.Name, err)
	}
	return false, nil
}

// finalize reclaims a deleted Database's storage, then lets it go.
func (r *Reconciler) finalize(ctx context.Context, db *Database) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(db, Finalizer) {
		return ctrl.Result{}, nil
	}
	cleanup := r.cleanup
	if r.Flaws.Cleanup != nil {
		cleanup = func(ctx context.Context, db *Database) (bool, error) { return r.Flaws.Cleanup(ctx, r, db) }
	}
	done, err := cleanup(ctx, db)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !done {
		return ctrl.Result{RequeueAfter: waitForGone}, nil
	}
	if r.Flaws.Release != nil {
		return ctrl.Result{}, r.Flaws.Release(ctx, r, db)
	}
	controllerutil.RemoveFinalizer(db, Finalizer)
	// The resourceVersion read goes with it: a stale copy (an earlier
	// incarnation's) gets a 409 and cannot strip a later one's finalizer.
	if err := r.Client.Update(ctx, db); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("removing the finalizer of Database %s: %w", db.Name, err)
	}
	return ctrl.Result{}, nil
}

// cleanup deletes what this incarnation of the Database has, known by its
// UID, each delete with a UID precondition: a stale view that still shows
// an earlier incarnation harms nothing of a later one. It reports whether
// the StatefulSet and the claims are gone.
func (r *Reconciler) cleanup(ctx context.Context, db *Database) (bool, error) {
	sts := &appsv1.StatefulSet{}
	err := r.Reader.Get(ctx, client.ObjectKeyFromObject(db), sts)
	switch {
	case apierrors.IsNotFound(err):
		sts = nil
	case err != nil:
		return false, fmt.Errorf("reading StatefulSet %s: %w", db.Name, err)
	case !metav1.IsControlledBy(sts, db):
		sts = nil // another incarnation's
	case sts.DeletionTimestamp == nil:
		err := r.Client.Delete(ctx, sts, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &sts.UID})
		if err != nil && !gone(err) {
			return false, fmt.Errorf("deleting StatefulSet %s: %w", sts.Name, err)
		}
	}
	mine := client.MatchingLabels{LabelInstanceUID: string(db.UID)}
	// Pods a growth left without their StatefulSet: no garbage collector
	// deletes them, and their claims stay in use while they run.
	var pods corev1.PodList
	if err := r.Reader.List(ctx, &pods, client.InNamespace(db.Namespace), mine); err != nil {
		return false, fmt.Errorf("listing the pods of Database %s: %w", db.Name, err)
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if metav1.GetControllerOf(pod) != nil || pod.DeletionTimestamp != nil {
			continue
		}
		if err := r.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); err != nil && !gone(err) {
			return false, fmt.Errorf("deleting pod %s: %w", pod.Name, err)
		}
	}
	var claims corev1.PersistentVolumeClaimList
	if err := r.Reader.List(ctx, &claims, client.InNamespace(db.Namespace), mine); err != nil {
		return false, fmt.Errorf("listing the claims of Database %s: %w", db.Name, err)
	}
	for i := range claims.Items {
		claim := &claims.Items[i]
		if claim.DeletionTimestamp != nil {
			continue
		}
		if err := r.Client.Delete(ctx, claim, client.Preconditions{UID: &claim.UID}); err != nil && !gone(err) {
			return false, fmt.Errorf("deleting claim %s: %w", claim.Name, err)
		}
	}
	return sts == nil && len(claims.Items) == 0, nil
}

// gone reports whether a delete with a UID precondition found its object
// gone: not found, or another object under its name (a conflict).
func gone(err error) bool { return apierrors.IsNotFound(err) || apierrors.IsConflict(err) }
