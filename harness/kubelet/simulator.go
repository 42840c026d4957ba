package kubelet

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubeprop/kubeprop/harness/internal/workers"
)

// UserAgent is the simulator's user agent; the API server derives the field
// manager from it, so its writes show as the kubelet's in managedFields.
const UserAgent = "kubelet/" + kubeletVersion + " (linux/amd64) kubeprop"

// Simulator runs simulated nodes and the pods bound to them.
type Simulator struct {
	opts      Options
	client    kubernetes.Interface
	podLister corelisters.PodLister
	queue     workqueue.TypedRateLimitingInterface[string]
	backoff   *flowcontrol.Backoff
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	cert      tls.Certificate // the nodes' kubelet endpoints serve it

	mu        sync.Mutex
	nodeByKey map[string]*Node
	pods      map[string]*podState // by namespace/name
	nodeCount int
	// Crash loops that the replacements of a crash-looping pod inherit,
	// by namespace/owner UID/container.
	ownerCrashes map[string]ownerCrash
}

type ownerCrash struct {
	starts int
	exit   ExitStatus
}

// Start connects to the API server with cfg (whose user is the simulator's
// identity in the audit log) and starts the pod sync workers. It returns
// once its caches are filled. Stop ends it.
func Start(ctx context.Context, cfg *rest.Config, opts Options) (*Simulator, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if cfg == nil {
		return nil, errors.New("kubelet simulator: the rest.Config is nil; pass the connection of the simulator's user (cluster.Cluster.AddUser)")
	}
	serving, err := servingCert()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = UserAgent
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubelet simulator: creating its client: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &Simulator{
		opts:    opts,
		client:  client,
		backoff: newCrashLoopBackOff(opts),
		cancel:  cancel,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "kubelet-simulator", Clock: opts.Clock}),
		nodeByKey: map[string]*Node{},
		pods:      map[string]*podState{},
		cert:      serving,
	}
	// Only bound pods concern a kubelet.
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermNotEqualSelector("spec.nodeName", "").String()
		}))
	podInformer := factory.Core().V1().Pods()
	s.podLister = podInformer.Lister()
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    s.enqueuePod,
		UpdateFunc: func(_, obj any) { s.enqueuePod(obj) },
		DeleteFunc: s.enqueuePod,
	}); err != nil {
		cancel()
		return nil, fmt.Errorf("kubelet simulator: watching pods: %w", err)
	}
	if err := workers.Start(ctx, "kubelet simulator", factory, s.queue, opts.Workers, s.processNext, &s.wg); err != nil {
		cancel()
		return nil, err
	}
	return s, nil
}

// newCrashLoopBackOff is the kubelet's crash-loop back-off
// (pkg/kubelet/kubelet.go): client-go's Backoff, reset when a container
// ran for 600 s since its last start, in wall time.
func newCrashLoopBackOff(opts Options) *flowcontrol.Backoff {
	backoff := flowcontrol.NewFakeBackOff(opts.wall(crashLoopBackOffInitial), opts.wall(crashLoopBackOffMax), opts.Clock)
	reset := opts.wall(crashLoopBackOffReset)
	backoff.HasExpiredFunc = func(eventTime, lastUpdate time.Time, _ time.Duration) bool {
		return eventTime.Sub(lastUpdate) > reset
	}
	return backoff
}

// Stop stops every node's heartbeats and the pod workers. Nodes stay
// registered; the cluster sees them go silent.
func (s *Simulator) Stop() {
	s.cancel()
	s.mu.Lock()
	for _, n := range s.nodeByKey {
		n.closeEndpoint()
		n.stopLoop()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// Node returns the simulated node of that name.
func (s *Simulator) Node(name string) (*Node, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.nodeByKey[name]
	return n, ok
}

// Nodes returns the names of the simulated nodes, sorted.
func (s *Simulator) Nodes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.nodeByKey))
	for n := range s.nodeByKey {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (s *Simulator) enqueuePod(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	s.queue.Add(key)
}

// enqueueNodePods resyncs every pod on a node, after it recovers.
func (s *Simulator) enqueueNodePods(node string) {
	pods, err := s.podLister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, p := range pods {
		if p.Spec.NodeName == node {
			s.enqueuePod(p)
		}
	}
}

func (s *Simulator) processNext(ctx context.Context) bool {
	key, shutdown := s.queue.Get()
	if shutdown {
		return false
	}
	defer s.queue.Done(key)
	err := s.syncPod(ctx, key)
	switch {
	case err == nil:
		s.queue.Forget(key)
	case ctx.Err() != nil:
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		// The informer brings the newer object and a new sync.
		s.queue.Forget(key)
	default:
		utilruntime.HandleErrorWithContext(ctx, err, "kubelet simulator: syncing pod", "pod", key)
		s.queue.AddRateLimited(key)
	}
	return true
}

func (s *Simulator) emit(e Event) {
	if s.opts.OnEvent != nil {
		s.opts.OnEvent(e)
	}
}

// ErrNotRunning is wrapped by KillContainer's error when the container is
// not running (waiting to start, backing off, or terminated), and by the
// errors of simulator calls naming a pod that is not on a running node.
var ErrNotRunning = errors.New("not running")

// ErrUnknown is wrapped by errors of simulator calls that name a pod or
// container that the simulator does not run.
var ErrUnknown = errors.New("not simulated here")
