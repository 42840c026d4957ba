package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeprop/kubeprop/harness/internal/inject"
	"github.com/kubeprop/kubeprop/harness/internal/record"
)

// Controller is harness.Controller: see its documentation there.
type Controller interface {
	start(ctx context.Context, c *caseRun) (stop func() error, err error)
}

// UserController is the API user the controller under test runs as, as
// the audit log shows it.
const UserController = "kubeprop:controller"

// UserAgentInjected is the user agent of the requests the harness refused
// on the controller's behalf (APIErrors): they never reach the API server,
// so the trace gets them from the harness instead of the audit log.
const UserAgentInjected = inject.UserAgentInjected

// controllerStopTimeout bounds how long a stopping controller may take.
const controllerStopTimeout = 30 * time.Second

// Manager is harness.Manager: see its documentation there.
func Manager(setup func(mgr manager.Manager, opts controller.Options) error) Controller {
	return managerController{setup: setup}
}

// SetupWithManager is harness.SetupWithManager: see its documentation there.
func SetupWithManager(r interface{ SetupWithManager(manager.Manager) error }) Controller {
	return managerController{setup: func(mgr manager.Manager, _ controller.Options) error { return r.SetupWithManager(mgr) }}
}

// ControllerManager is harness.ControllerManager: see its documentation there.
func ControllerManager() Controller { return controllerManager{} }

type controllerManager struct{}

func (controllerManager) start(context.Context, *caseRun) (func() error, error) {
	return func() error { return nil }, nil
}

type managerController struct {
	setup func(manager.Manager, controller.Options) error
}

func (m managerController) start(ctx context.Context, c *caseRun) (func() error, error) {
	c.reachable.Store(true)
	inst := c.newInstance(nil)
	// Its client injects the write faults (NewClient below).
	cfg := c.instanceConfig(inst, false)
	mgr, err := manager.New(cfg, manager.Options{
		Scheme:                 c.spec.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{c.namespace: {}}},
		Controller:             config.Controller{SkipNameValidation: ptr.To(true), RecoverPanic: ptr.To(true)},
		Logger:                 c.logger,
		// The controller's client is where API errors and crashes between
		// writes are injected.
		NewClient: func(cfg *rest.Config, opts client.Options) (client.Client, error) {
			cl, err := client.NewWithWatch(cfg, opts)
			if err != nil {
				return nil, err
			}
			return c.ctlFaults.Client(inst, cl), nil
		},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the controller's manager: %w", err)
	}
	opts := controller.Options{
		SkipNameValidation: ptr.To(true),
		NewQueue: func(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
			return newRecordingQueue(c.recorder, inst, name, rl, c.spec.SettleQuiet)
		},
	}
	if err := callSetup(m.setup, mgr, opts); err != nil {
		return nil, fmt.Errorf("setting up the controller: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	c.goLabelled(ctx, func(ctx context.Context) { done <- mgr.Start(ctx) })
	stop := func() error {
		cancel()
		select {
		case err := <-done:
			inst.CloseConnections()
			if err != nil {
				return fmt.Errorf("the controller's manager ended with: %w", err)
			}
			return nil
		case <-time.After(controllerStopTimeout):
			return fmt.Errorf("the controller did not stop within %v of its context ending: a Runnable or reconcile ignores ctx; its goroutines still running: %s",
				controllerStopTimeout, goroutinesOf(c.namespace))
		}
	}
	syncCtx, syncCancel := context.WithTimeout(ctx, c.spec.Setup)
	defer syncCancel()
	synced := make(chan bool, 1)
	go func() { synced <- mgr.GetCache().WaitForCacheSync(syncCtx) }()
	select {
	case err := <-done:
		cancel()
		if err == nil {
			err = errors.New("it returned at once")
		}
		return nil, fmt.Errorf("the controller did not start: %w", err)
	case ok := <-synced:
		if !ok {
			return nil, errors.Join(fmt.Errorf("the controller's cache did not sync within %v", c.spec.Setup), stop())
		}
	}
	return stop, nil
}

// newInstance is one start of the case's controller: its transports are
// closed again by the Env's ticker once it stops (Linger); kill ends its
// process at a crash (nil in process). A restart with a stale view (see
// RestartController) serves it that view.
func (c *caseRun) newInstance(kill func()) *inject.Instance {
	inst := &inject.Instance{Linger: c.env.linger, Kill: kill}
	if v := c.nextView; v.lag > 0 {
		inst.ServeStale(v.rv, time.Now().Add(v.lag), func(msg string) { c.logf("%s", msg) })
		c.logf("the new instance is served the cluster as it was %v ago (resource version %d) until %v from now", v.lag, v.rv, v.lag)
	}
	return inst
}

// instanceConfig is the controller user's connection for one instance:
// its transport tracked (CloseConnections), its watch streams through the
// watch faults, and, with writes, its writes through the API errors and
// the crash after a write at the HTTP level (for the controllers whose
// client the harness does not build).
func (c *caseRun) instanceConfig(inst *inject.Instance, writes bool) *rest.Config {
	cfg := rest.CopyConfig(c.env.controllerConfig)
	cfg.Wrap(inst.Track)
	cfg.Wrap(c.ctlFaults.WrapTransport(inst))
	if writes {
		cfg.Wrap(c.ctlFaults.WrapWrites(inst))
	}
	return cfg
}

// recordingQueue is a controller's workqueue that tells the recorder when
// a reconcile starts and how it ends: a rate-limited requeue (an error, or
// Requeue), a requeue after a delay, or done.
// The reconciles of an instance killed by CrashAfterWrite are not
// recorded: what it did after its death is an artefact of running in
// process, where the reconcile goes on with a client that refuses all.
//
// An item whose back-off brings it back within the settle's quiet period
// (a back-off's first steps) is pending too while it waits: the
// controller has its next attempt in hand, and a settle that ended in the
// gap only because a loaded machine stretched it would heal the faults a
// retry sooner than on an idle machine (a speed-dependent verdict). A
// longer back-off is the controller's own quiet; so is a RequeueAfter, a
// poll that may go on for ever.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	rec   *record.Recorder
	inst  *inject.Instance
	name  string
	quiet time.Duration
	shut  atomic.Bool // a stopped controller's queue keeps its items; idle ignores them

	mu   sync.Mutex
	soon map[reconcile.Request]bool // requeued within quiet, not yet taken
}

func newRecordingQueue(rec *record.Recorder, inst *inject.Instance, name string, rl workqueue.TypedRateLimiter[reconcile.Request], quiet time.Duration) *recordingQueue {
	rq := &recordingQueue{rec: rec, inst: inst, name: name, quiet: quiet, soon: map[reconcile.Request]bool{}}
	rq.TypedRateLimitingInterface = workqueue.NewTypedRateLimitingQueueWithConfig[reconcile.Request](
		recordingLimiter{TypedRateLimiter: rl, q: rq},
		workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Name: name})
	rec.AddQueue(rq)
	return rq
}

// recordingLimiter tells its queue each back-off it hands out.
type recordingLimiter struct {
	workqueue.TypedRateLimiter[reconcile.Request]
	q *recordingQueue
}

func (l recordingLimiter) When(item reconcile.Request) time.Duration {
	d := l.TypedRateLimiter.When(item)
	l.q.requeued(item, d)
	return d
}

// requeued notes an item's back-off of d: in the trace, as its reconcile's
// outcome (AddRateLimited asks the limiter, and only then, while the
// reconcile is under way: the one place a requeue with back-off shows).
func (q *recordingQueue) requeued(item reconcile.Request, d time.Duration) {
	q.rec.ReconcileOutcome(q.name, item.String(), record.OutcomeRateLimited, d)
	if d > q.quiet {
		return
	}
	q.mu.Lock()
	q.soon[item] = true
	q.mu.Unlock()
}

// Pending: items wait, or come back within the quiet period, and the
// controller still runs.
func (q *recordingQueue) Pending() bool {
	if q.shut.Load() {
		return false
	}
	q.mu.Lock()
	soon := len(q.soon) > 0
	q.mu.Unlock()
	return soon || q.Len() > 0
}

func (q *recordingQueue) Get() (reconcile.Request, bool) {
	item, shutdown := q.TypedRateLimitingInterface.Get()
	if !shutdown {
		q.mu.Lock()
		delete(q.soon, item)
		q.mu.Unlock()
		q.rec.ReconcileStarted(q.name, item.String())
	}
	return item, shutdown
}

// Add is an event's: the next reconcile of item answers news.
func (q *recordingQueue) Add(item reconcile.Request) {
	q.rec.Added(q.name, item.String())
	q.TypedRateLimitingInterface.Add(item)
}

func (q *recordingQueue) AddAfter(item reconcile.Request, d time.Duration) {
	q.rec.ReconcileOutcome(q.name, item.String(), record.OutcomeRequeueAfter, d)
	q.TypedRateLimitingInterface.AddAfter(item, d)
}

func (q *recordingQueue) Done(item reconcile.Request) {
	q.rec.ReconcileDone(q.name, item.String(), !q.inst.Dead.Load())
	q.TypedRateLimitingInterface.Done(item)
}

func (q *recordingQueue) ShutDown() {
	q.shut.Store(true)
	q.TypedRateLimitingInterface.ShutDown()
}

func (q *recordingQueue) ShutDownWithDrain() {
	q.shut.Store(true)
	q.TypedRateLimitingInterface.ShutDownWithDrain()
}

// callSetup runs the user's setup, turning a panic into an error.
func callSetup(setup func(manager.Manager, controller.Options) error, mgr manager.Manager, opts controller.Options) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("it panicked: %v", r)
		}
	}()
	return setup(mgr, opts)
}
