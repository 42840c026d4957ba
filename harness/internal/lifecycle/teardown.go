package lifecycle

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// teardownTimeout bounds how long a case's namespace may take to go away
// once deleted; what is still there then is reported as left behind.
const teardownTimeout = 30 * time.Second

// Stuck is why a case's controller did not stop; empty when it did.
func Stuck(td Teardown) string { return td.stuck }

// StuckTeardown is the Teardown of a case whose controller did not stop,
// for why: what a stand-in of a case reports.
func StuckTeardown(why string) Teardown { return Teardown{stuck: why} }

// Teardown is what ending a case had to force, and what it left behind.
type Teardown struct {
	// Forced lists what the harness did beyond deleting the namespace:
	// finalizers it removed (a finalizer still on a live object after
	// convergence is worth knowing: only the stopped controller could
	// have removed it) and pods it force-deleted from lost nodes.
	Forced []string
	// Left lists what was still there after 30 s (teardownTimeout), by
	// kind and name, and a controller that did not stop. Empty after a
	// clean end.
	Left []string
	// Took is the teardown's wall time; Phases say when each part ended.
	Took   time.Duration
	Phases []string
	// stuck is why the controller did not stop; empty when it did.
	stuck string
}

// teardown ends a case, in this order: stop the controller, stop
// recording, remove the finalizers left in the namespace, delete the
// namespace, delete what is in it (the pods at once, those of lost nodes
// included) and finalize it, wait (bounded) until it is gone, delete the
// volumes of its claims, then remove the case's nodes. Nothing of a case may outlive it: a namespace stuck on
// a finalizer that no stopped controller will ever remove stays for good,
// and the namespace controller's retries are a load that every later case
// shares.
func (c *caseRun) teardown() Teardown {
	start := time.Now()
	var td Teardown
	c.ctlFaults.Heal()
	c.crashes.Wait()
	c.ctlMu.Lock()
	if err := c.stopController(); err != nil {
		td.stuck = err.Error()
		td.Left = append(td.Left, "controller: "+td.stuck)
	}
	c.stopController = func() error { return nil }
	c.ctlMu.Unlock()
	c.recorder.Close()
	td.Phases = append(td.Phases, fmt.Sprintf("controller stopped %.1fs", time.Since(start).Seconds()))

	ctx, cancel := context.WithTimeout(context.Background(), teardownTimeout)
	defer cancel()
	if c.userClient != nil {
		resources, err := c.namespacedResources()
		if err != nil {
			td.Left = append(td.Left, err.Error())
		}
		td.Forced = append(td.Forced, c.removeFinalizers(ctx, resources)...)
		td.Forced = append(td.Forced, c.podsOnLostNodes(ctx)...)
		err = c.userClient.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.namespace}})
		if err != nil && !apierrors.IsNotFound(err) {
			td.Left = append(td.Left, fmt.Sprintf("Namespace %s: deleting it: %v", c.namespace, err))
		}
		if left := c.emptyNamespace(ctx, resources); len(left) > 0 {
			td.Left = append(td.Left, left...)
		}
		td.Phases = append(td.Phases, fmt.Sprintf("namespace gone %.1fs", time.Since(start).Seconds()))
		if left := c.deleteVolumes(ctx); len(left) > 0 {
			td.Left = append(td.Left, left...)
		}
	}
	// The nodes go last: their kubelets confirm the deletion of the pods
	// on them.
	nodeCtx, nodeCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer nodeCancel()
	for _, n := range c.nodes {
		if err := n.Remove(nodeCtx); err != nil {
			td.Left = append(td.Left, fmt.Sprintf("Node %s: %v", n.Name(), err))
		}
	}
	c.env.nodes.release(c.namespace)
	c.env.closeIdleConnections()
	td.Took = time.Since(start)
	return td
}

// namespacedResources are the namespaced resources the API server serves
// that can be listed, patched and deleted, by discovery: a controller's
// objects may be of any kind.
func (c *caseRun) namespacedResources() ([]schema.GroupVersionResource, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(c.env.Config())
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	lists, err := dc.ServerPreferredNamespacedResources()
	if err != nil && len(lists) == 0 {
		return nil, fmt.Errorf("discovering the namespaced resources: %w", err)
	}
	var out []schema.GroupVersionResource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "patch") || !slices.Contains(r.Verbs, "delete") {
				continue
			}
			out = append(out, gv.WithResource(r.Name))
		}
	}
	return out, nil
}

// namespacedObject is one object of the case's namespace and the client
// of its resource there.
type namespacedObject struct {
	client dynamic.ResourceInterface
	obj    unstructured.Unstructured
}

// objects lists every object of the case's namespace, of every resource
// given. A resource that cannot be listed holds nothing of the case's to
// free.
func (c *caseRun) objects(ctx context.Context, resources []schema.GroupVersionResource) []namespacedObject {
	var out []namespacedObject
	for _, gvr := range resources {
		client := c.env.dynamic.Resource(gvr).Namespace(c.namespace)
		list, err := client.List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, o := range list.Items {
			out = append(out, namespacedObject{client, o})
		}
	}
	return out
}

// dropFinalizers removes an object's finalizers; gone is no error.
func (o namespacedObject) dropFinalizers(ctx context.Context) error {
	_, err := o.client.Patch(ctx, o.obj.GetName(), types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{FieldManager: ManagerFaults})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// removeFinalizers removes every finalizer from the objects of the case's
// namespace and lists what it removed. Objects whose finalizers are all
// the system's (kubernetes.io/pvc-protection, say) are left to
// emptyNamespace: their controllers still run, and listing them would
// bury the controller's own finalizers.
func (c *caseRun) removeFinalizers(ctx context.Context, resources []schema.GroupVersionResource) []string {
	var removed []string
	for _, o := range c.objects(ctx, resources) {
		finalizers := o.obj.GetFinalizers()
		if !slices.ContainsFunc(finalizers, func(f string) bool { return !strings.HasPrefix(f, "kubernetes.io/") }) {
			continue
		}
		if err := o.dropFinalizers(ctx); err != nil {
			removed = append(removed, fmt.Sprintf("finalizers %v of %s %s not removed: %v", finalizers, o.obj.GetKind(), o.obj.GetName(), err))
			continue
		}
		state := "live"
		if o.obj.GetDeletionTimestamp() != nil {
			state = "deleted"
		}
		removed = append(removed, fmt.Sprintf("removed finalizers %v of %s %s (%s)", finalizers, o.obj.GetKind(), o.obj.GetName(), state))
	}
	return removed
}

// podsOnLostNodes lists the case's pods on its lost nodes: no kubelet
// would ever confirm their deletion, so emptyNamespace's deletion with
// grace 0 is what removes them.
func (c *caseRun) podsOnLostNodes(ctx context.Context) []string {
	lost := map[string]bool{}
	for _, n := range c.nodes {
		if n.Lost() {
			lost[n.Name()] = true
		}
	}
	if len(lost) == 0 {
		return nil
	}
	var pods corev1.PodList
	if err := c.userClient.List(ctx, &pods, client.InNamespace(c.namespace)); err != nil {
		return []string{"pods on lost nodes not listed: " + err.Error()}
	}
	var out []string
	for _, p := range pods.Items {
		if lost[p.Spec.NodeName] {
			out = append(out, fmt.Sprintf("force-deleted Pod %s on lost node %s", p.Name, p.Spec.NodeName))
		}
	}
	return out
}

// emptyNamespace does what the namespace controller does for a deleted
// namespace, without its 5 s wait before it starts (kube-controller-
// manager's namespaceDeletionGracePeriod, for caches to catch up) and
// without waiting out the pods' grace periods: it deletes everything in
// it, pods with grace 0, and once nothing is left removes the namespace's
// own finalizer. It retries until ctx ends, then lists what is left.
func (c *caseRun) emptyNamespace(ctx context.Context, resources []schema.GroupVersionResource) []string {
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var ns corev1.Namespace
		if err := c.userClient.Get(ctx, types.NamespacedName{Name: c.namespace}, &ns); apierrors.IsNotFound(err) {
			return true, nil
		}
		remaining := c.objects(ctx, resources)
		for _, o := range remaining {
			if len(o.obj.GetFinalizers()) > 0 { // added since removeFinalizers
				_ = o.dropFinalizers(ctx)
			}
			_ = o.client.Delete(ctx, o.obj.GetName(), metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		}
		if len(remaining) > 0 {
			return false, nil
		}
		if ns.DeletionTimestamp != nil && len(ns.Spec.Finalizers) > 0 {
			ns.Spec.Finalizers = nil
			_ = c.userClient.SubResource("finalize").Update(ctx, &ns)
		}
		return false, nil
	})
	if err == nil {
		return nil
	}
	left := []string{fmt.Sprintf("Namespace %s: still there %v after it was deleted", c.namespace, teardownTimeout)}
	listCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, o := range c.objects(listCtx, resources) {
		left = append(left, describeLeft(&o.obj))
	}
	return left
}

func describeLeft(o *unstructured.Unstructured) string {
	s := o.GetKind() + " " + o.GetName()
	if f := o.GetFinalizers(); len(f) > 0 {
		s += fmt.Sprintf(" (finalizers %v)", f)
	}
	return s
}
