package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/kubeprop/kubeprop/harness/cluster"
	"github.com/kubeprop/kubeprop/harness/kubelet"
	"github.com/kubeprop/kubeprop/harness/storage"
)

// EnvOptions is harness.EnvOptions: see its documentation there.
type EnvOptions struct {
	// CRDDirectoryPaths are folders or files of CustomResourceDefinitions
	// to install, relative to the test's package folder.
	CRDDirectoryPaths []string

	// TimeScale is cluster seconds per wall second. It scales every timing
	// kubeprop controls, consistently: the kubelets' heartbeats and
	// back-offs, the node monitor's grace period and period, and the API
	// server's default not-ready and unreachable tolerations. Zero means
	// 10: a node lost is marked Unknown after 5 s and its pods are evicted
	// 30 s later. The controller under test always runs on wall time.
	TimeScale float64

	// AssetsDir is the folder with the cluster binaries. Empty:
	// $KUBEPROP_ASSETS, $KUBEBUILDER_ASSETS, or bin/k8s/<version> found
	// walking up from the working directory.
	AssetsDir string

	// APIServerPort is the API server's loopback port; zero picks a free one.
	APIServerPort int

	// Kubelet configures the simulated kubelets; its TimeScale is ignored
	// (the cluster's applies).
	Kubelet kubelet.Options
}

// defaultTimeScale is the TimeScale of an Env whose options leave it zero.
const defaultTimeScale = 10

// Identities of the actors kubeprop itself runs, as the audit log shows
// them (harness.UserKubelet, ...).
const (
	UserKubelet = "kubeprop:kubelet"
	// UserUser makes the user's changes: fixtures and ScaleChange.
	UserUser = "kubeprop:user"
	// UserProvisioner provisions, resizes and deletes volumes (package
	// storage).
	UserProvisioner = "kubeprop:provisioner"
)

// Env is a running hollow cluster.
type Env struct {
	cluster  *cluster.Cluster
	kubelets *kubelet.Simulator

	controllerConfig *rest.Config // UserController's connection
	userConfig       *rest.Config // UserUser's connection
	mapper           meta.RESTMapper
	dynamic          dynamic.Interface
	timeScale        float64
	nodes            *caseNodes
	kubeletConfig    *rest.Config // the kubelet simulator's connection
	storage          *storage.Provisioner

	stopIdleCloser chan struct{} // ends the ticker of closeIdleConnections
	lingering      struct {
		sync.Mutex
		transports map[http.RoundTripper]int // ticks left
	}
	stopOnce sync.Once
	// references are the reference runs of MatchesReference.
	references references
}

// Start is harness.Start, which starts none with -kubeprop.list.
func Start(opts EnvOptions) (*Env, error) {
	if opts.TimeScale == 0 {
		opts.TimeScale = defaultTimeScale
	}
	ctx := context.Background()
	nodes := newCaseNodes()
	c, err := cluster.Start(ctx, cluster.Options{
		AssetsDir:         opts.AssetsDir,
		CRDDirectoryPaths: opts.CRDDirectoryPaths,
		TimeScale:         opts.TimeScale,
		APIServerPort:     opts.APIServerPort,
		NodeFilter:        nodes.filter,
		NodePicker:        nodes.pick,
	})
	if err != nil {
		return nil, fmt.Errorf("starting the hollow cluster: %w", err)
	}
	kubeletCfg, err := c.AddUser(UserKubelet)
	if err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	kopts := opts.Kubelet
	kopts.TimeScale = opts.TimeScale
	userOnEvent := kopts.OnEvent
	kopts.OnEvent = func(e kubelet.Event) {
		kubeletEvent(e)
		if userOnEvent != nil {
			userOnEvent(e)
		}
	}
	sim, err := kubelet.Start(ctx, kubeletCfg, kopts)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("starting the kubelet simulator: %w", err), c.Stop())
	}
	e := &Env{cluster: c, kubelets: sim, timeScale: opts.TimeScale, nodes: nodes, kubeletConfig: kubeletCfg}
	if err := e.connect(); err != nil {
		return nil, errors.Join(err, e.Stop())
	}
	provisionerCfg, err := c.AddUser(UserProvisioner)
	if err != nil {
		return nil, errors.Join(err, e.Stop())
	}
	if e.storage, err = storage.Start(ctx, provisionerCfg, storage.Options{}); err != nil {
		return nil, errors.Join(err, e.Stop())
	}
	e.stopIdleCloser = make(chan struct{})
	go wait.Until(func() {
		e.closeLingering()
		e.closeIdleConnections()
	}, idleConnectionsEvery, e.stopIdleCloser)
	return e, nil
}

// connect provisions the identities and clients the cases share.
func (e *Env) connect() error {
	var err error
	if e.controllerConfig, err = e.cluster.AddUser(UserController); err != nil {
		return err
	}
	if e.userConfig, err = e.cluster.AddUser(UserUser); err != nil {
		return err
	}
	cfg := rest.CopyConfig(e.Config())
	// Teardown lists every namespaced resource, deprecated ones (v1
	// Endpoints) too: the API server's deprecation warnings are not news
	// to a test's output.
	cfg.WarningHandler = rest.NoWarnings{}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("connecting to the API server: %w", err)
	}
	if e.mapper, err = apiutil.NewDynamicRESTMapper(cfg, httpClient); err != nil {
		return fmt.Errorf("discovering the API server's resources: %w", err)
	}
	if e.dynamic, err = dynamic.NewForConfigAndClient(cfg, httpClient); err != nil {
		return fmt.Errorf("connecting to the API server: %w", err)
	}
	return nil
}

// running is the error of an Env that started no cluster.
func (e *Env) running() error {
	if e == nil || e.cluster == nil {
		return errors.New("the hollow cluster is not running: start one with harness.Start (with -kubeprop.list, Start starts none: Check lists plans and runs none)")
	}
	return nil
}

// Config returns an administrator's connection to the API server.
func (e *Env) Config() *rest.Config { return e.cluster.Config() }

// Cluster is the control plane: its folder, audit log and users.
func (e *Env) Cluster() *cluster.Cluster { return e.cluster }

// Kubelets runs the simulated nodes: add a node, kill a container.
func (e *Env) Kubelets() *kubelet.Simulator { return e.kubelets }

// ClusterDuration converts a wall duration to cluster time.
func (e *Env) ClusterDuration(wall time.Duration) time.Duration {
	return time.Duration(float64(wall) * e.cluster.TimeScale())
}

// WallDuration converts a cluster duration to wall time.
func (e *Env) WallDuration(clusterTime time.Duration) time.Duration {
	return e.cluster.Scaled(clusterTime)
}

// idleConnectionsEvery is how often the Env closes the idle connections of
// the connections the cases share.
const idleConnectionsEvery = 5 * time.Second

// closeIdleConnections closes the idle connections of the connections the
// cases share. Many cases' watches at once open more HTTP/2 connections
// than one (the API server allows 100 streams on each); once those cases
// are over, the extra connections would stay open, idle, for 90 s
// (client-go's idle timeout). A case's teardown calls it, and so does a
// ticker: a connection whose last stream was still closing at a teardown
// goes idle only after it.
func (e *Env) closeIdleConnections() {
	for _, cfg := range []*rest.Config{e.Config(), e.userConfig, e.kubeletConfig, e.controllerConfig} {
		if cfg == nil {
			continue
		}
		// Configs of the same credentials share one transport: this is it.
		if rt, err := rest.TransportFor(cfg); err == nil {
			utilnet.CloseIdleConnectionsFor(rt)
		}
	}
}

// closeLingering closes the idle connections of the transports of stopped
// controller instances (linger), on the ticker's next two ticks only: a
// teardown's call of closeIdleConnections must not use up their ticks
// (with cases side by side, teardowns come every second or so).
func (e *Env) closeLingering() {
	e.lingering.Lock()
	defer e.lingering.Unlock()
	for rt, left := range e.lingering.transports {
		utilnet.CloseIdleConnectionsFor(rt)
		if left <= 1 {
			delete(e.lingering.transports, rt)
		} else {
			e.lingering.transports[rt] = left - 1
		}
	}
}

// linger keeps a stopped controller instance's transports for the
// ticker's closeLingering (inject.Instance.Linger).
func (e *Env) linger(transports []http.RoundTripper) {
	e.lingering.Lock()
	defer e.lingering.Unlock()
	if e.lingering.transports == nil {
		e.lingering.transports = map[http.RoundTripper]int{}
	}
	for _, rt := range transports {
		e.lingering.transports[rt] = 2
	}
}

// Stop stops the kubelets and every process of the cluster. It is safe to
// call more than once.
func (e *Env) Stop() error {
	if e == nil {
		return nil
	}
	e.stopOnce.Do(func() {
		if e.stopIdleCloser != nil {
			close(e.stopIdleCloser)
		}
	})
	if e.cluster == nil {
		return nil // started none (-kubeprop.list)
	}
	e.storage.Stop()
	e.kubelets.Stop()
	return e.cluster.Stop()
}

// caseNodes keeps each case's pods on the case's own nodes, through the
// scheduler's NodeFilter, so that cases can run side by side on one
// cluster without a change to their pods (the controller under test
// compares its pods with its template): a pod of a case's namespace may
// go only to that case's nodes; any other pod (a test's own, in a
// namespace of its own) only to nodes of no case.
type caseNodes struct {
	mu    sync.Mutex
	nodes map[string][]string // a case's namespace → its nodes
	owner map[string]string   // a case's node → its case's namespace
	// placed are the nodes pick gave each pod of a case (by UID), and
	// placements how many it gave each node: a case's pods go round its
	// nodes.
	placed     map[string]map[types.UID]string
	placements map[string]int
}

func newCaseNodes() *caseNodes {
	return &caseNodes{nodes: map[string][]string{}, owner: map[string]string{},
		placed: map[string]map[types.UID]string{}, placements: map[string]int{}}
}

// pick is the cluster's NodePicker: a case's pod goes to the offered node
// of its case that it has placed the fewest pods on so far, the first
// node on a tie: the first three pods of a case of three nodes go to
// nodes 0, 1 and 2, on every run, so that a replayed NodeLoss{Node: 1}
// loses the same share of pods. A pod tried again keeps its node while
// that is offered. Pods of no case are left to the scheduler.
func (r *caseNodes) pick(pod *corev1.Pod, offered []string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	nodes, isCase := r.nodes[pod.Namespace]
	if !isCase {
		return ""
	}
	if n, ok := r.placed[pod.Namespace][pod.UID]; ok && slices.Contains(offered, n) {
		return n
	}
	best := ""
	for _, n := range nodes { // in the case's order: node 0 first
		if slices.Contains(offered, n) && (best == "" || r.placements[n] < r.placements[best]) {
			best = n
		}
	}
	if best == "" {
		return ""
	}
	if r.placed[pod.Namespace] == nil {
		r.placed[pod.Namespace] = map[types.UID]string{}
	}
	r.placed[pod.Namespace][pod.UID] = best
	r.placements[best]++
	return best
}

// claim gives the nodes to the case of that namespace. A case claims its
// nodes before it creates them, so that no other pod lands on them
// meanwhile, and its namespace before it has pods, even with no node.
func (r *caseNodes) claim(namespace string, nodes ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nodes[namespace] = append(r.nodes[namespace], nodes...)
	for _, n := range nodes {
		r.owner[n] = namespace
	}
}

// release forgets the case of that namespace and its nodes, once they are
// gone.
func (r *caseNodes) release(namespace string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.nodes[namespace] {
		delete(r.owner, n)
		delete(r.placements, n)
	}
	delete(r.nodes, namespace)
	delete(r.placed, namespace)
}

// filter is the cluster's NodeFilter.
func (r *caseNodes) filter(podNamespace string, nodes []string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, isCase := r.nodes[podNamespace]
	var keep []string
	for _, n := range nodes {
		owner, owned := r.owner[n]
		if (isCase && owner == podNamespace) || (!isCase && !owned) {
			keep = append(keep, n)
		}
	}
	return keep
}
