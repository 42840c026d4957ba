package harness_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness"
	"github.com/kubeprop/kubeprop/properties"
)

// What correct real operators do, which the properties must not call a
// bug: each test runs a small controller that does exactly that.

// setWidget runs a Widget's replicas as a StatefulSet of its name whose
// serviceName is the Widget's spec.service. A StatefulSet's serviceName
// is immutable: to change it, the controller deletes the StatefulSet
// (orphaning its pods) and creates it again under its name, as real
// operators do for an immutable field. Its status write retries conflicts
// with client-go's retry.RetryOnConflict(retry.DefaultRetry, ...), then
// gives the error back to its work queue.
type setWidget struct{ client.Client }

func (r *setWidget) setup(mgr ctrl.Manager, opts controller.Options) error {
	r.Client = mgr.GetClient()
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(widgetGVK)
	return ctrl.NewControllerManagedBy(mgr).For(w).Owns(&appsv1.StatefulSet{}).WithOptions(opts).Complete(r)
}

func (r *setWidget) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(widgetGVK)
	if err := r.Get(ctx, req.NamespacedName, w); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	replicas, _, _ := unstructured.NestedInt64(w.Object, "spec", "replicas")
	service, _, _ := unstructured.NestedString(w.Object, "spec", "service")
	if service == "" {
		service = "default"
	}
	var set appsv1.StatefulSet
	err := r.Get(ctx, req.NamespacedName, &set)
	switch {
	case apierrors.IsNotFound(err):
		labels := map[string]string{"widget": req.Name}
		set = appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name},
			Spec: appsv1.StatefulSetSpec{
				Replicas: ptr.To(int32(replicas)), ServiceName: service, PodManagementPolicy: appsv1.ParallelPodManagement,
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
				},
			},
		}
		if err := controllerutil.SetControllerReference(w, &set, r.Scheme()); err != nil {
			return ctrl.Result{}, err
		}
		// AlreadyExists while the old one is being deleted: requeued.
		return ctrl.Result{}, r.Create(ctx, &set)
	case err != nil:
		return ctrl.Result{}, err
	case set.DeletionTimestamp != nil:
		return ctrl.Result{RequeueAfter: 200 * time.Millisecond}, nil
	case set.Spec.ServiceName != service:
		return ctrl.Result{}, client.IgnoreNotFound(r.Delete(ctx, &set, client.PropagationPolicy(metav1.DeletePropagationOrphan), client.Preconditions{UID: &set.UID}))
	case ptr.Deref(set.Spec.Replicas, 1) != int32(replicas):
		set.Spec.Replicas = ptr.To(int32(replicas))
		return ctrl.Result{}, r.Update(ctx, &set)
	}
	return ctrl.Result{}, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := r.Get(ctx, req.NamespacedName, w); err != nil {
			return err
		}
		want := map[string]any{"readyReplicas": int64(set.Status.ReadyReplicas), "service": service}
		status, _, _ := unstructured.NestedMap(w.Object, "status")
		if status["readyReplicas"] == want["readyReplicas"] && status["service"] == want["service"] {
			return nil
		}
		_ = unstructured.SetNestedMap(w.Object, want, "status")
		return r.Status().Update(ctx, w)
	})
}

// setWidgetReady: the Widget's StatefulSet serves its service with its
// replicas ready, and the status says so.
func setWidgetReady(s properties.State) error {
	for _, w := range s.ByKind("Widget") {
		if err := widgetReady(s); err != nil {
			return err
		}
		service, _, _ := unstructured.NestedString(w.Object, "spec", "service")
		got, _, _ := unstructured.NestedString(w.Object, "status", "service")
		if service != "" && got != service {
			return fmt.Errorf("Widget %s serves %q, not %q", w.GetName(), got, service)
		}
	}
	return nil
}

func setWidgetSpec() harness.Spec {
	return harness.Spec{
		Controller: harness.Manager(func(mgr manager.Manager, opts controller.Options) error {
			return (&setWidget{}).setup(mgr, opts)
		}),
		Fixtures: func(ns string) []client.Object { return []client.Object{newWidget(ns, "web", 2)} },
		Watch:    []schema.GroupVersionKind{appsv1.SchemeGroupVersion.WithKind("StatefulSet")},
		Faults:   []faults.Fault{faults.FieldChange("ServiceChange", "spec.service", "a", "b"), faults.Recreate(), faults.APIErrors()},
		Properties: []properties.Property{
			properties.Converges("widget-ready", setWidgetReady, properties.ConvergeOptions{Within: 30 * time.Second}),
			properties.BoundedBackoff(properties.BackoffOptions{}),
			properties.NoFightLoop(properties.FightOptions{}),
			properties.Quiescent(properties.QuiesceOptions{Window: time.Second, Within: 10 * time.Second}),
			properties.NoPanics(),
		},
	}
}

func serviceChange(service string) faults.Step {
	return faults.UserChangeStep{Name: "ServiceChange", Patch: `{"spec":{"service":"` + service + `"}}`}
}

// TestRecreatedObjectsAreNewObjects: the controller re-creates its
// StatefulSet four times to change its serviceName, and the controller
// manager writes each new one's status; the user deletes and re-creates
// the Widget, at once and after a settle, and the StatefulSet's pods come
// back under their names, each scheduled by the scheduler and started by
// the kubelet. Each incarnation is another object: no fight.
func TestRecreatedObjectsAreNewObjects(t *testing.T) {
	t.Parallel()
	plan := []faults.Step{serviceChange("a"), serviceChange("b"), serviceChange("a"), serviceChange("b"),
		faults.RecreateStep{}, faults.RecreateStep{Settle: true}, faults.RecreateStep{}}
	rep, err := harness.Run(context.Background(), env, setWidgetSpec(), plan)
	require.NoError(t, err)
	require.False(t, rep.Failed(), "failures: %+v\ntimeline:\n%s", rep.Failures, strings.Join(rep.Timeline, "\n"))
	require.Empty(t, rep.NoOps, "every step applied")
	// The trace saw the incarnations.
	uids := map[string]map[string]bool{}
	for _, w := range rep.Trace.Writes {
		if uids[w.Kind] == nil {
			uids[w.Kind] = map[string]bool{}
		}
		uids[w.Kind][string(w.UID)] = true
	}
	require.GreaterOrEqual(t, len(uids["StatefulSet"]), 5+3, "a StatefulSet per service change and per Widget")
	require.GreaterOrEqual(t, len(uids["Widget"]), 4)
}

// TestRetryOnConflictIsBoundedBackoff: every status write of the
// controller is refused with a conflict for a while; each reconcile tries
// five times, 10 ms apart (client-go's DefaultRetry), and the work queue
// backs off between reconciles. That is the retry client-go recommends.
//
// Thirty refusals are six failed reconciles, whose back-offs (5 ms
// doubling to 160 ms) stay inside the settle's quiet period (500 ms), so
// the heal waits for every one of them, even with two more failures
// beside them: a re-create that meets a cache not yet showing the new
// StatefulSet fails with AlreadyExists (under load), and doubles each
// back-off after it. With forty, one such failure makes the eighth
// back-off 640 ms, the controller's own quiet: the settle ends there and
// the heal takes the last five (CI counted 35 once).
func TestRetryOnConflictIsBoundedBackoff(t *testing.T) {
	t.Parallel()
	plan := []faults.Step{faults.APIErrorsStep{Error: faults.Conflict, Requests: 30}, serviceChange("a")}
	rep, err := harness.Run(context.Background(), env, setWidgetSpec(), plan)
	require.NoError(t, err)
	require.False(t, rep.Failed(), "failures: %+v\ntimeline:\n%s", rep.Failures, strings.Join(rep.Timeline, "\n"))
	refused := 0
	for _, r := range rep.Trace.Requests {
		if r.UserAgent == harness.UserAgentInjected && r.Code == 409 {
			refused++
		}
	}
	require.Equal(t, 30, refused, "the refused writes, in bursts of five")
}

// TestStaleRestart: a restart served the view of some time back: until
// the view ends, the new instance reads the Widget no newer than the
// view's resource version, and then as it is.
func TestStaleRestart(t *testing.T) {
	t.Parallel()
	t.Run("process", testStaleRestartProcess)
	type sighting struct {
		instance int32
		at       time.Time
		rv       uint64
	}
	var mu sync.Mutex
	var sightings []sighting
	var instances atomic.Int32
	spec := widgetSpec(false)
	spec.Controller = harness.Manager(func(mgr manager.Manager, opts controller.Options) error {
		n := instances.Add(1)
		return (&widgetReconciler{seen: func(w *unstructured.Unstructured) {
			rv, _ := strconv.ParseUint(w.GetResourceVersion(), 10, 64)
			mu.Lock()
			defer mu.Unlock()
			sightings = append(sightings, sighting{n, time.Now(), rv})
		}}).setup(mgr, opts)
	})
	// Settles of 3 s of quiet: the label change (the controller writes
	// nothing for it) settles 3 s after it, so a view 5.5 s old is from
	// before it (with 2.5 s to spare on a loaded machine), and from after
	// the fixture was created (the setup took its pods' starts and 3 s of
	// quiet): the view has the Widget, without its label.
	spec.SettleQuiet = staleTestQuiet
	const stale = staleTestLag
	rep, err := harness.Run(context.Background(), env, spec, staleTestPlan)
	require.NoError(t, err)
	timeline := strings.Join(rep.Timeline, "\n")
	require.False(t, rep.Failed(), "failures: %+v\ntimeline:\n%s", rep.Failures, timeline)
	m := staleTestView.FindStringSubmatch(timeline)
	require.NotNil(t, m, timeline)
	view, _ := strconv.ParseUint(m[1], 10, 64)
	var restart time.Time
	for _, e := range rep.Trace.Events {
		if strings.HasPrefix(e.Name, "ControllerRestart") {
			restart = e.At
		}
	}
	require.False(t, restart.IsZero())
	mu.Lock()
	defer mu.Unlock()
	during, newer := 0, 0
	for _, s := range sightings {
		switch {
		case s.instance != 2:
		case s.at.Before(restart.Add(stale)):
			require.LessOrEqual(t, s.rv, view, "the new instance read a Widget newer than its view while the view lasted\n%s", timeline)
			during++
		case s.rv > view:
			newer++
		}
	}
	require.Positive(t, during, "the new instance reconciled the Widget of its view\n%s", timeline)
	require.Positive(t, newer, "the new instance caught up after the view\n%s", timeline)
}

// The stale restart's tests: a label change (the controller writes
// nothing for it), then a restart served the view of staleTestLag ago, in
// settles of staleTestQuiet (see TestStaleRestart).
const (
	staleTestQuiet = 3 * time.Second
	staleTestLag   = 5500 * time.Millisecond
)

var (
	staleTestPlan = []faults.Step{faults.UserChangeStep{Name: "LabelChange", Patch: `{"metadata":{"labels":{"tier":"gold"}}}`},
		faults.ControllerRestartStep{StaleMs: int(staleTestLag.Milliseconds())}}
	staleTestView = regexp.MustCompile(`served the cluster as it was 5.5s ago \(resource version (\d+)\)`)
)

// testStaleRestartProcess: the same through a binary's proxy: the first
// Widget the new process reconciles is its view's, a later one newer.
func testStaleRestartProcess(t *testing.T) {
	spec := widgetSpec(false)
	spec.Controller = widgetProcess("-seen")
	spec.SettleQuiet = staleTestQuiet
	rep, err := harness.Run(context.Background(), env, spec, staleTestPlan)
	require.NoError(t, err)
	timeline := strings.Join(rep.Timeline, "\n")
	require.False(t, rep.Failed(), "failures: %+v\ntimeline:\n%s", rep.Failures, timeline)
	m := staleTestView.FindStringSubmatch(timeline)
	require.NotNil(t, m, timeline)
	view, _ := strconv.ParseUint(m[1], 10, 64)
	log, err := os.ReadFile(filepath.Join(env.Cluster().Dir(), "controller-"+rep.Namespace+".log"))
	require.NoError(t, err)
	_, second, found := strings.Cut(string(log), "--- kubeprop: starting")
	_, second, found2 := strings.Cut(second, "--- kubeprop: starting")
	require.True(t, found && found2, "two starts in the log:\n%s", log)
	var rvs []uint64
	for _, m := range regexp.MustCompile(`seen rv (\d+)`).FindAllStringSubmatch(second, -1) {
		rv, _ := strconv.ParseUint(m[1], 10, 64)
		rvs = append(rvs, rv)
	}
	require.NotEmpty(t, rvs, "the restarted process reconciled:\n%s", second)
	require.LessOrEqual(t, rvs[0], view, "its first reconcile read its view's Widget:\n%s\n%s", second, timeline)
	require.Greater(t, slices.Max(rvs), view, "then a newer one:\n%s", second)
}

// TestRecreateOfAnUndeletableFixture: a fixture held by a finalizer that
// nobody removes is not created again, during the steps or after the
// heal: the step says why, and the case goes on.
func TestRecreateOfAnUndeletableFixture(t *testing.T) {
	t.Parallel()
	spec := widgetSpec(false)
	spec.Fixtures = func(ns string) []client.Object {
		w := newWidget(ns, "web", 1)
		w.SetFinalizers([]string{"test.kubeprop.dev/kept-forever"})
		return []client.Object{w}
	}
	spec.SettleCap = time.Second
	start := time.Now()
	rep, err := harness.Run(context.Background(), env, spec, []faults.Step{faults.RecreateStep{}})
	require.NoError(t, err)
	timeline := strings.Join(rep.Timeline, "\n")
	require.Empty(t, rep.NoOps, "the deletion was asked for: no no-op\n%s", timeline)
	require.Contains(t, timeline, "Recreate: web was still being deleted 3s after its deletion (finalizers [test.kubeprop.dev/kept-forever]): not created again yet")
	require.NotContains(t, timeline, "created again after the heal")
	require.Less(t, time.Since(start), time.Minute)
}

// TestRecreateHeldUntilTheHeal: a fixture whose finalizer the controller
// cannot remove while a fault refuses its updates is created again once
// the faults heal, as a user waits for the name: the reference run made
// that change, and a case without it ends with no object at all (a false
// alarm of matches-reference on the correct Database operator, [APIErrors
// {Error: Conflict, Requests: 30, Verb: update, Resource: databases}
// Recreate{Object: 0}]). A user change after the Recreate waits for it:
// made before it, it would act on the old object (a false alarm of
// matches-reference on the correct Database operator: a claim grown
// while its clean-up was refused, then deleted by it, [APIErrors{Error:
// InternalError, Requests: 30, Verb: delete, Resource:
// persistentvolumeclaims} Recreate{Object: 0, Settle: true} VolumeGrowth
// {Claim: 7, ByGi: 2}]).
func TestRecreateHeldUntilTheHeal(t *testing.T) {
	t.Parallel()
	spec := widgetSpec(false)
	spec.Fixtures = func(ns string) []client.Object {
		w := newWidget(ns, "web", 1)
		w.SetFinalizers([]string{"test.kubeprop.dev/cleanup"})
		return []client.Object{w}
	}
	// It removes its finalizer from a Widget being deleted, trying every
	// 200 ms.
	spec.Controller = harness.Func(func(ctx context.Context, cfg *rest.Config) error {
		cl, err := client.New(cfg, client.Options{})
		if err != nil {
			return err
		}
		ns, _ := harness.CaseNamespace(ctx)
		for {
			w := newWidget(ns, "web", 1)
			if cl.Get(ctx, client.ObjectKeyFromObject(w), w) == nil && w.GetDeletionTimestamp() != nil {
				w.SetFinalizers(nil)
				_ = cl.Update(ctx, w) // refused while the fault goes on
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
	spec.Ready = func(properties.State) error { return nil }
	// The judging waits until the trace has seen the new Widget.
	spec.Properties = []properties.Property{properties.Converges("widget-made-again-and-scaled", func(st properties.State) error {
		w := st.Get("Widget", "web")
		if w == nil || w.GetDeletionTimestamp() != nil {
			return fmt.Errorf("no live Widget web")
		}
		if n, _, _ := unstructured.NestedInt64(w.Object, "spec", "replicas"); n != 3 {
			return fmt.Errorf("Widget web has %d replicas", n)
		}
		return nil
	}, properties.ConvergeOptions{Within: 20 * time.Second})}
	spec.SettleCap = time.Second
	scale := faults.ScaleChangeStep{Field: "spec.replicas", Value: 3}
	rep, err := harness.Run(context.Background(), env, spec, []faults.Step{
		faults.APIErrorsStep{Error: faults.Conflict, Requests: 1000, Verb: "update", Resource: "widgets"}, faults.RecreateStep{}, scale})
	require.NoError(t, err)
	timeline := strings.Join(rep.Timeline, "\n")
	require.Contains(t, timeline, "Recreate: web was still being deleted 3s after its deletion (finalizers [test.kubeprop.dev/cleanup]): not created again yet")
	waits := strings.Index(timeline, "step "+faults.Format(scale)+": after the Recreate not done yet; made once it is")
	madeAgain := strings.Index(timeline, "Recreate: web created again after the heal")
	made := strings.LastIndex(timeline, "step "+faults.Format(scale)+"\n")
	require.True(t, waits >= 0 && madeAgain > waits && made > madeAgain, "the scale change waits for the Recreate, then is made:\n%s", timeline)
	require.Empty(t, rep.NoOps, timeline)
	require.False(t, rep.Failed(), "failures: %+v\n%s", rep.Failures, timeline)
}

// TestSetupWaitsForTheController: a controller that never writes fails
// the case's setup, saying what to check; with Spec.Ready it is set up.
func TestSetupWaitsForTheController(t *testing.T) {
	t.Parallel()
	spec := widgetSpec(false)
	spec.Controller = harness.Func(func(ctx context.Context, _ *rest.Config) error {
		<-ctx.Done()
		return nil
	})
	spec.Properties = []properties.Property{properties.NoPanics()}
	spec.Setup = 2 * time.Second
	_, err := harness.Run(context.Background(), env, spec, []faults.Step{faults.ControllerRestartStep{}})
	require.ErrorContains(t, err, "the controller did not act on the fixtures within 2s of its start: it made no write of its own kinds in namespace kp-")
	require.ErrorContains(t, err, "say when it is ready with Spec.Ready")

	spec.Ready = func(s properties.State) error {
		if len(s.ByKind("Widget")) == 0 {
			return fmt.Errorf("no Widget yet")
		}
		return nil
	}
	rep, err := harness.Run(context.Background(), env, spec, []faults.Step{faults.ControllerRestartStep{}})
	require.NoError(t, err)
	require.False(t, rep.Failed(), strings.Join(rep.Timeline, "\n"))
}
