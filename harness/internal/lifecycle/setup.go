package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/kubeprop/kubeprop/harness/internal/record"
	"github.com/kubeprop/kubeprop/properties"
)

func (c *caseRun) setup(ctx context.Context, n int64) error {
	env := c.env
	var err error
	if c.faultClient, err = client.New(env.Config(), client.Options{Scheme: c.spec.Scheme, Mapper: env.mapper}); err != nil {
		return fmt.Errorf("creating the faults' client: %w", err)
	}
	c.faultClient = client.WithFieldOwner(c.faultClient, ManagerFaults)
	user, err := client.NewWithWatch(env.userConfig, client.Options{Scheme: c.spec.Scheme, Mapper: env.mapper})
	if err != nil {
		return fmt.Errorf("creating the user's client: %w", err)
	}
	c.userClient = client.WithFieldOwner(c.trackUserChanges(user), ManagerUser)
	if err := c.userClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.namespace}}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", c.namespace, err)
	}
	names := make([]string, c.spec.Nodes)
	for i := range names {
		names[i] = fmt.Sprintf("%s-node-%d", c.namespace, i)
	}
	env.nodes.claim(c.namespace, names...)
	for _, name := range names {
		// A zone of its own: the node lifecycle controller computes zone
		// states and eviction rates per case.
		node, err := env.Kubelets().AddNodeWithLabels(ctx, name, map[string]string{corev1.LabelTopologyZone: c.namespace})
		if err != nil {
			return err
		}
		c.nodes = append(c.nodes, node)
	}
	c.fixtures = c.spec.Fixtures(c.namespace)
	resources, err := c.watchedResources()
	if err != nil {
		return err
	}
	if c.audit, err = record.NewAuditReader(env.Cluster().AuditLogPath(), c.namespace); err != nil {
		return err
	}
	if err := c.recorder.Watch(ctx, env.dynamic, c.namespace, resources); err != nil {
		return err
	}
	for _, f := range c.fixtures {
		f.SetNamespace(c.namespace)
	}
	if err := c.keepDesired(c.fixtures); err != nil {
		return err
	}
	for _, f := range c.fixtures {
		if err := c.userClient.Create(ctx, f); err != nil {
			return fmt.Errorf("creating fixture %s: %w", f.GetName(), err)
		}
	}
	stop, err := c.spec.Controller.start(ctx, c)
	if err != nil {
		return err
	}
	c.stopController = stop
	c.recorder.Acted()
	c.logf("setup: namespace, %d nodes, %d fixtures, controller started", len(c.nodes), len(c.fixtures))
	if err := c.awaitController(ctx); err != nil {
		return err
	}
	if err := c.awaitGoals(ctx); err != nil {
		return err
	}
	// Spec.Setup bounds the whole: what the controller's start left.
	if err := c.settle(ctx, max(c.spec.Setup-time.Since(c.started), c.spec.SettleQuiet)); err != nil {
		if errors.Is(err, errDecided) {
			c.logf("a property failed before the first step: %s", c.failedSoFar())
		}
		return err
	}
	c.logf("settled")
	return nil
}

// awaitController waits, within Spec.Setup, until the controller has
// acted on the fixtures: its first write of its own kinds, or Spec.Ready
// holding; or until it panicked or exited, which NoPanics reports.
// kube-controller-manager (ControllerManager) acts as itself, not through
// the harness: its cases settle as they are.
func (c *caseRun) awaitController(ctx context.Context) error {
	if _, shared := c.spec.Controller.(controllerManager); shared {
		return nil
	}
	start := time.Now()
	var notReady error
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, c.spec.Setup, true, func(context.Context) (bool, error) {
		select {
		case <-c.ctlFaults.Acted():
			return true, nil
		default:
		}
		if c.recorder.Panics() > 0 {
			return true, nil
		}
		if c.spec.Ready == nil {
			return false, nil
		}
		notReady = c.spec.Ready(properties.State{At: time.Now(), Objects: c.recorder.Current()})
		return notReady == nil, nil
	})
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil && c.spec.Ready != nil:
		return fmt.Errorf("the controller did not act on the fixtures within %v of its start: it made no write of its own kinds in namespace %s (a lease renewal or an Event does not count), and Spec.Ready did not hold (%v): check that it watches the case's namespace and the fixtures' kinds, or raise Spec.Setup", c.spec.Setup, c.namespace, notReady)
	case err != nil:
		return fmt.Errorf("the controller did not act on the fixtures within %v of its start: it made no write of its own kinds in namespace %s (a lease renewal or an Event does not count): check that it watches the case's namespace and the fixtures' kinds (and wins its leader election), raise Spec.Setup, or, for a controller with nothing to write, say when it is ready with Spec.Ready", c.spec.Setup, c.namespace)
	}
	c.logf("the controller acted %.1fs after its start", time.Since(start).Seconds())
	return nil
}

// awaitGoals waits, within what is left of Spec.Setup, until the
// predicate of every properties.Goal holds on the fixtures: the first
// step then lands on the system the controller has brought to rest.
// Quiet alone does not tell: under load the kubelets' and the built-in
// controllers' updates (a StatefulSet's ready members) can come more than
// the settle's quiet period after the controller's last write, and the
// controller's answer to them after that. A goal that does not hold in
// time is logged and the steps go on: the properties judge the case.
func (c *caseRun) awaitGoals(ctx context.Context) error {
	var goals []properties.Goal
	for _, p := range c.spec.Properties {
		if g, ok := p.(properties.Goal); ok {
			goals = append(goals, g)
		}
	}
	if len(goals) == 0 {
		return nil
	}
	start := time.Now()
	var unmet error
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, max(c.spec.Setup-time.Since(c.started), c.spec.SettleQuiet), true, func(context.Context) (bool, error) {
		if c.recorder.Panics() > 0 {
			return true, nil // NoPanics reports it
		}
		state := properties.State{At: time.Now(), Objects: c.recorder.Current()}
		for _, g := range goals {
			if unmet = g.Goal()(state); unmet != nil {
				unmet = fmt.Errorf("%s: %w", g.Name(), unmet)
				return false, nil
			}
		}
		return true, nil
	})
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		c.logf("setup: a goal did not hold within Spec.Setup (%v); the steps go on", unmet)
	default:
		c.logf("setup: the goals held %.1fs after the controller acted", time.Since(start).Seconds())
	}
	return nil
}

// watchedResources are the fixtures' kinds, Pods and Spec.Watch.
func (c *caseRun) watchedResources() ([]schema.GroupVersionResource, error) {
	gvks := []schema.GroupVersionKind{corev1.SchemeGroupVersion.WithKind("Pod"), corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim")}
	for _, f := range c.fixtures {
		gvk, err := apiutil.GVKForObject(f, c.spec.Scheme)
		if err != nil {
			return nil, fmt.Errorf("fixture %s: %w; add its type to Spec.Scheme", f.GetName(), err)
		}
		gvks = append(gvks, gvk)
	}
	gvks = append(gvks, c.spec.Watch...)
	seen := map[schema.GroupVersionResource]bool{}
	var out []schema.GroupVersionResource
	for _, gvk := range gvks {
		m, err := c.env.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, fmt.Errorf("kind %s is not served: %w; install its CRD through EnvOptions.CRDDirectoryPaths", gvk, err)
		}
		if !seen[m.Resource] {
			seen[m.Resource] = true
			out = append(out, m.Resource)
		}
	}
	return out, nil
}
