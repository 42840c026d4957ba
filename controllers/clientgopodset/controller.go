package clientgopodset

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubeprop/kubeprop/controllers/podset"
)

// FieldManager is the controller's field manager.
const FieldManager = "clientgo-podset-controller"

// Options configures Run. The zero value is the correct controller.
type Options struct {
	// Namespace limits the controller to one namespace; empty is all.
	Namespace string
	// Workers is the number of sync workers. Zero means 2.
	Workers int
	// Retry requeues a key whose sync failed. Nil means the workqueue's
	// rate-limited AddRateLimited; the seeded-bug twin replaces it.
	Retry func(queue workqueue.TypedRateLimitingInterface[string], key string)
}

// controller is one running instance.
type controller struct {
	opts    Options
	kube    kubernetes.Interface
	podSets dynamic.NamespaceableResourceInterface
	queue   workqueue.TypedRateLimitingInterface[string]
}

var podSetResource = podset.GroupVersion.WithResource("podsets")

// Run runs the controller until ctx ends: informers on PodSets and pods,
// a rate-limited workqueue of PodSet keys, workers that sync them.
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	if opts.Workers == 0 {
		opts.Workers = 2
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = FieldManager
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating the clientset: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating the dynamic client: %w", err)
	}
	podSetInformers := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, opts.Namespace, nil)
	podInformers := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(opts.Namespace))
	podSetInformer := podSetInformers.ForResource(podSetResource)
	c := &controller{
		opts: opts, kube: kube, podSets: dyn.Resource(podSetResource),
		// The default rate limiter with its per-key back-off capped.
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(podset.RateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "clientgo-podset"}),
	}
	defer c.queue.ShutDown()
	if _, err := podSetInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	}); err != nil {
		return fmt.Errorf("watching PodSets: %w", err)
	}
	if _, err := podInformers.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueOwner,
		UpdateFunc: func(_, obj any) { c.enqueueOwner(obj) },
		DeleteFunc: c.enqueueOwner,
	}); err != nil {
		return fmt.Errorf("watching pods: %w", err)
	}
	podSetInformers.Start(ctx.Done())
	podInformers.Start(ctx.Done())
	defer podSetInformers.Shutdown()
	defer podInformers.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), podSetInformer.Informer().HasSynced, podInformers.Core().V1().Pods().Informer().HasSynced) {
		return fmt.Errorf("the caches did not sync: %w", ctx.Err())
	}
	for range c.opts.Workers {
		go wait.UntilWithContext(ctx, c.work, time.Second)
	}
	<-ctx.Done()
	return nil
}

func (c *controller) enqueue(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(key)
	}
}

// enqueueOwner queues the PodSet that controls a pod.
func (c *controller) enqueueOwner(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if ref := metav1.GetControllerOf(pod); ref != nil && ref.Kind == "PodSet" {
		c.queue.Add(pod.Namespace + "/" + ref.Name)
	}
}

func (c *controller) work(ctx context.Context) {
	for c.next(ctx) {
	}
}

func (c *controller) next(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	if err := c.sync(ctx, key); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "syncing PodSet", "key", key)
		if c.opts.Retry != nil {
			c.opts.Retry(c.queue, key)
		} else {
			c.queue.AddRateLimited(key)
		}
		return true
	}
	c.queue.Forget(key)
	return true
}

// sync makes one PodSet's pods match its spec and writes its status.
func (c *controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // a malformed key never becomes valid
	}
	// The PodSet is read fresh too, not from the informer: pods sized to
	// an older spec overshoot (a restarted informer fed by a lagging API
	// server replays the PodSet's history).
	obj, err := c.podSets.Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	ps := &podset.PodSet{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.UnstructuredContent(), ps); err != nil {
		return fmt.Errorf("reading PodSet %s: %w", key, err)
	}
	if ps.DeletionTimestamp != nil {
		return nil
	}
	// Pods are listed fresh, not from the informer: the controller must
	// see its own creations to never overshoot.
	list, err := c.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{podset.LabelName: ps.Name}).String(),
	})
	if err != nil {
		return fmt.Errorf("listing the pods of PodSet %s: %w", key, err)
	}
	var active []corev1.Pod
	for _, p := range podset.OwnedPods(list.Items, ps) {
		if p.Status.Phase == corev1.PodFailed {
			if err := c.deletePod(ctx, &p); err != nil {
				return err
			}
			continue
		}
		if podset.Active(&p) {
			active = append(active, p)
		}
	}
	want := int(ps.Replicas())
	for range want - len(active) {
		pod, err := c.createPod(ctx, ps)
		if err != nil {
			return err
		}
		active = append(active, *pod)
	}
	if extra := len(active) - want; extra > 0 {
		// The unready go first.
		sort.SliceStable(active, func(i, j int) bool { return !podset.Ready(&active[i]) && podset.Ready(&active[j]) })
		for i := range extra {
			if err := c.deletePod(ctx, &active[i]); err != nil {
				return err
			}
		}
		active = active[extra:]
	}
	return c.writeStatus(ctx, ps, active)
}

func (c *controller) createPod(ctx context.Context, ps *podset.PodSet) (*corev1.Pod, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: ps.Name + "-",
			Labels:       map[string]string{podset.LabelName: ps.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ps,
				podset.GroupVersion.WithKind("PodSet"))},
		},
		Spec: *ps.Spec.Template.Spec.DeepCopy(),
	}
	for k, v := range ps.Spec.Template.Labels {
		pod.Labels[k] = v
	}
	created, err := c.kube.CoreV1().Pods(ps.Namespace).Create(ctx, pod, metav1.CreateOptions{FieldManager: FieldManager})
	if err != nil {
		return nil, fmt.Errorf("creating a pod of PodSet %s: %w", ps.Name, err)
	}
	return created, nil
}

func (c *controller) deletePod(ctx context.Context, pod *corev1.Pod) error {
	err := c.kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting pod %s: %w", pod.Name, err)
	}
	return nil
}

// writeStatus writes replicas, readyReplicas and observedGeneration, when
// they changed, as a merge patch of the status subresource.
func (c *controller) writeStatus(ctx context.Context, ps *podset.PodSet, active []corev1.Pod) error {
	ready := 0
	for i := range active {
		if podset.Ready(&active[i]) {
			ready++
		}
	}
	if ps.Status.Replicas == int32(len(active)) && ps.Status.ReadyReplicas == int32(ready) && ps.Status.ObservedGeneration == ps.Generation {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{
		"replicas": len(active), "readyReplicas": ready, "observedGeneration": ps.Generation,
	}})
	if err != nil {
		return err
	}
	if _, err := c.podSets.Namespace(ps.Namespace).Patch(ctx, ps.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: FieldManager}, "status"); err != nil {
		return fmt.Errorf("writing the status of PodSet %s: %w", ps.Name, err)
	}
	return nil
}
