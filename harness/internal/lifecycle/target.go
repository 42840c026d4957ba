package lifecycle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness/kubelet"
	"github.com/kubeprop/kubeprop/properties"
)

// The caseRun is the faults' Target.
var _ faults.Target = (*caseRun)(nil)

func (c *caseRun) Namespace() string         { return c.namespace }
func (c *caseRun) Client() client.Client     { return c.faultClient }
func (c *caseRun) UserClient() client.Client { return c.userClient }
func (c *caseRun) Fixtures() []client.Object { return c.fixtures }

func (c *caseRun) node(i int) *kubelet.Node {
	return c.nodes[((i%len(c.nodes))+len(c.nodes))%len(c.nodes)]
}

func (c *caseRun) LoseNode(ctx context.Context, i int) error {
	n := c.node(i)
	if n.Lost() {
		return fmt.Errorf("%w: node %d is already lost", faults.ErrNoOp, i)
	}
	up := 0
	for _, other := range c.nodes {
		if !other.Lost() {
			up++
		}
	}
	// With every node lost no controller could converge: a plan that
	// would do it is not a fault of the controller's.
	if up == 1 {
		return fmt.Errorf("%w: node %d is the last node up", faults.ErrNoOp, i)
	}
	n.Lose()
	c.awaitEviction(ctx, n.Name())
	return nil
}

// lossReaction is how long, in cluster time, the control plane takes to
// evict a lost node's pods: the node monitor's 50 s grace period, then
// the default 300 s unreachable toleration.
const lossReaction = 350 * time.Second

// awaitEviction waits until a lost node is tainted unreachable and its
// evictable pods of the case are being deleted, with room for a loaded
// machine. A node loss is what follows it: a case that healed before the
// eviction would never see it. Not coming in time is not an error; the
// properties judge what happened.
func (c *caseRun) awaitEviction(ctx context.Context, node string) {
	limit := c.env.WallDuration(lossReaction)*3/2 + 5*time.Second
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, limit, true, func(ctx context.Context) (bool, error) {
		var n corev1.Node
		if err := c.faultClient.Get(ctx, client.ObjectKey{Name: node}, &n); err != nil {
			return false, nil
		}
		if !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
			return t.Key == corev1.TaintNodeUnreachable && t.Effect == corev1.TaintEffectNoExecute
		}) {
			return false, nil
		}
		var pods corev1.PodList
		if err := c.faultClient.List(ctx, &pods, client.InNamespace(c.namespace)); err != nil {
			return false, nil
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName == node && p.DeletionTimestamp == nil && evictable(&p) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil && ctx.Err() == nil {
		c.logf("the lost node's pods were not evicted within %v", limit)
	}
}

// evictable reports whether the taint manager evicts a pod from an
// unreachable node: it runs, and does not tolerate the taint forever.
func evictable(pod *corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	for _, t := range pod.Spec.Tolerations {
		forever := t.TolerationSeconds == nil && (t.Effect == "" || t.Effect == corev1.TaintEffectNoExecute)
		if forever && (t.Key == corev1.TaintNodeUnreachable || t.Key == "" && t.Operator == corev1.TolerationOpExists) {
			return false
		}
	}
	return true
}

func (c *caseRun) RecoverNode(i int) error {
	n := c.node(i)
	if !n.Lost() {
		return fmt.Errorf("%w: node %d is not lost", faults.ErrNoOp, i)
	}
	n.Recover()
	return nil
}

func (c *caseRun) Pods(ctx context.Context) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := c.faultClient.List(ctx, &pods, client.InNamespace(c.namespace)); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
	return pods.Items, nil
}

func (c *caseRun) KillContainer(ctx context.Context, pod, container string, exitCode int32, reason string) error {
	return noOpIfAbsent(c.env.Kubelets().KillContainer(ctx, c.namespace, pod, container, kubelet.ExitStatus{Code: exitCode, Reason: reason}))
}

func (c *caseRun) CrashLoop(ctx context.Context, pod, container string, starts int, exitCode int32) error {
	return noOpIfAbsent(c.env.Kubelets().CrashLoop(ctx, c.namespace, pod, container, starts, kubelet.Failed(exitCode)))
}

func (c *caseRun) SetReady(ctx context.Context, pod, container string, ready bool) error {
	return noOpIfAbsent(c.env.Kubelets().SetReady(ctx, c.namespace, pod, container, ready))
}

func (c *caseRun) FailLiveness(ctx context.Context, pod, container string, window time.Duration) error {
	return noOpIfAbsent(c.env.Kubelets().FailLiveness(ctx, c.namespace, pod, container, window))
}

// noOpIfAbsent turns the simulator's "not running here" errors into no-ops:
// the step's container is not there to act on.
func noOpIfAbsent(err error) error {
	if errors.Is(err, kubelet.ErrNotRunning) || errors.Is(err, kubelet.ErrUnknown) || errors.Is(err, kubelet.ErrNoProbe) {
		return fmt.Errorf("%w: %v", faults.ErrNoOp, err)
	}
	return err
}

func (c *caseRun) Children(context.Context) ([]client.Object, error) {
	owners := map[string]bool{}
	for _, f := range c.fixtures {
		owners[string(f.GetUID())] = true
	}
	var out []client.Object
	for _, o := range c.recorder.Current() {
		for _, ref := range o.GetOwnerReferences() {
			if owners[string(ref.UID)] {
				out = append(out, o.DeepCopy())
				break
			}
		}
	}
	return out, nil
}

// staleView is the view a restarted instance is served: the cluster at
// resource version rv, for lag from its start.
type staleView struct {
	rv  uint64
	lag time.Duration
}

func (c *caseRun) RestartController(ctx context.Context, stale time.Duration) error {
	if _, shared := c.spec.Controller.(controllerManager); shared {
		return fmt.Errorf("%w: kube-controller-manager is shared by the cases", faults.ErrNoOp)
	}
	c.ctlMu.Lock()
	defer c.ctlMu.Unlock()
	if err := c.stopController(); err != nil {
		return fmt.Errorf("stopping the controller for a restart: %w", err)
	}
	// Before its start: the new instance's first requests come after it.
	c.recorder.Event(properties.Event{At: time.Now(), Kind: properties.StartEvent, Name: "the controller started anew"})
	if stale > 0 {
		// The view of stale ago: the last resource version the case's
		// watches had seen then. This start's only, whether it starts or
		// not.
		c.nextView = staleView{rv: c.recorder.ResourceVersionAt(time.Now().Add(-stale)), lag: stale}
		defer func() { c.nextView = staleView{} }()
	}
	stop, err := c.spec.Controller.start(ctx, c)
	if err != nil {
		c.stopController = func() error { return nil }
		return fmt.Errorf("restarting the controller: %w", err)
	}
	c.stopController = stop
	c.recorder.Acted()
	return nil
}

func (c *caseRun) SinceLastStep() time.Duration { return time.Since(c.lastStepAt) }

// crashed restarts the controller after CrashAfterWrite killed it; the
// dead instance's client already refuses every call.
func (c *caseRun) crashed() {
	c.recorder.Restart(1)
	c.crashes.Add(1)
	go func() {
		defer c.crashes.Done()
		defer c.recorder.Restart(-1)
		c.logf("the controller was killed right after a write")
		if err := c.RestartController(c.ctx, 0); err != nil {
			c.ctlMu.Lock()
			c.crashErr = errors.Join(c.crashErr, err)
			c.ctlMu.Unlock()
		}
	}()
}

func (c *caseRun) takeCrashErr() error {
	c.ctlMu.Lock()
	defer c.ctlMu.Unlock()
	err := c.crashErr
	c.crashErr = nil
	return err
}

// errUnreachable is the no-op of a controller fault on a controller that
// does not talk to the API server through the harness.
func (c *caseRun) errUnreachable() error {
	if c.reachable.Load() {
		return nil
	}
	return fmt.Errorf("%w: the controller's requests do not go through the harness", faults.ErrNoOp)
}

func (c *caseRun) FailWrites(e faults.APIError, match faults.WriteMatch, requests int, window time.Duration) error {
	if err := c.errUnreachable(); err != nil {
		return err
	}
	c.ctlFaults.FailWrites(e, match, requests, window)
	return nil
}

func (c *caseRun) NameStep(named faults.Step) {
	c.logMu.Lock()
	c.named[c.step] = named
	c.logMu.Unlock()
}

func (c *caseRun) CrashAfterWrites(match faults.WriteMatch, writes int) error {
	if err := c.errUnreachable(); err != nil {
		return err
	}
	step := c.step
	c.ctlFaults.CrashAfter(match, writes, func(named faults.CrashAfterWriteStep) {
		c.logMu.Lock()
		c.named[step] = named
		c.logMu.Unlock()
	})
	return nil
}

func (c *caseRun) DelayWatches(resource string, delay, window time.Duration) error {
	if err := c.errUnreachable(); err != nil {
		return err
	}
	c.ctlFaults.DelayWatches(resource, delay, window)
	return nil
}

func (c *caseRun) DropWatches(resource string) error {
	if err := c.errUnreachable(); err != nil {
		return err
	}
	if !c.ctlFaults.DropWatches(resource) {
		if resource != "" {
			return fmt.Errorf("%w: the controller has no open watch of %s", faults.ErrNoOp, resource)
		}
		return fmt.Errorf("%w: the controller has no open watch", faults.ErrNoOp)
	}
	return nil
}

// Settle waits until the namespace has seen no write for SettleQuiet, the
// controller is idle and no pod of the case is in its grace period on a
// live node, or SettleCap passes (not an error: a system that
// never settles is for the properties to judge).
func (c *caseRun) Settle(ctx context.Context) error {
	return c.settle(ctx, c.spec.SettleCap)
}

func (c *caseRun) settle(ctx context.Context, limit time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, limit, false, func(context.Context) (bool, error) {
		if err := c.backgroundVerdict(); err != nil {
			return false, err
		}
		c.checkInBackground()
		// A controller with watch events held back (StaleWatch) has work
		// coming: it is not settled until they are delivered, and it has
		// had the quiet period to act on them (an event just delivered
		// is still on its way through the informer to the queue).
		// A pod in its grace period on a live node is still to go, and
		// its going wakes the controller: a heal or the next step before
		// then would land in the middle of it.
		return c.recorder.SinceLastWrite() >= c.spec.SettleQuiet && c.recorder.Idle() &&
			c.ctlFaults.Undelivered() == 0 && c.ctlFaults.SinceHeldDelivery() >= c.spec.SettleQuiet &&
			c.env.Kubelets().Terminating(c.namespace) == 0, nil
	})
	switch {
	case err != nil && ctx.Err() != nil:
		return ctx.Err()
	case wait.Interrupted(err):
		return nil // the settle's cap: the steps go on
	case err != nil:
		return err // a failure found in the background, or its check's error
	}
	// Settled, every change is in: the properties judge the trace so far
	// (see caseRun.check). Not once an armed step ran: its window (API
	// errors for a while, a crash after the k-th write) is timed for the
	// steps after it, and a check (which parses the audit log written
	// since the last) would push them later.
	if c.armedRan {
		return nil
	}
	if _, _, decided, err := c.check(false, time.Time{}); err != nil || decided {
		return cmp.Or(err, errDecided)
	}
	return nil
}
