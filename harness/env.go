package harness

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/kubeprop/kubeprop/harness/cluster"
	"github.com/kubeprop/kubeprop/harness/kubelet"
)

// EnvOptions configures a hollow cluster. The zero value is a cluster at
// TimeScale 10 with the binaries from `make bins` and no CRDs.
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

// DefaultTimeScale is the TimeScale of an Env whose options leave it zero.
const DefaultTimeScale = 10

// Identities of the actors kubeprop itself runs, as the audit log shows them.
const (
	UserKubelet = "kubeprop:kubelet"
	// UserUser makes the user's changes: fixtures and ScaleChange.
	UserUser = "kubeprop:user"
)

// Env is a running hollow cluster.
type Env struct {
	// Cluster is the control plane.
	Cluster *cluster.Cluster
	// Kubelets runs the simulated nodes.
	Kubelets *kubelet.Simulator

	controllerConfig *rest.Config // UserController's connection
	userConfig       *rest.Config // UserUser's connection
	mapper           meta.RESTMapper
	dynamic          dynamic.Interface
	timeScale        float64
}

// Start starts a hollow cluster and returns when it can schedule and run
// pods (once nodes are added). On error nothing is left running.
func Start(opts EnvOptions) (*Env, error) {
	if opts.TimeScale == 0 {
		opts.TimeScale = DefaultTimeScale
	}
	ctx := context.Background()
	c, err := cluster.Start(ctx, cluster.Options{
		AssetsDir:         opts.AssetsDir,
		CRDDirectoryPaths: opts.CRDDirectoryPaths,
		TimeScale:         opts.TimeScale,
		APIServerPort:     opts.APIServerPort,
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
	sim, err := kubelet.Start(ctx, kubeletCfg, kopts)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("starting the kubelet simulator: %w", err), c.Stop())
	}
	e := &Env{Cluster: c, Kubelets: sim, timeScale: opts.TimeScale}
	if err := e.connect(); err != nil {
		return nil, errors.Join(err, e.Stop())
	}
	return e, nil
}

// connect provisions the identities and clients the cases share.
func (e *Env) connect() error {
	var err error
	if e.controllerConfig, err = e.Cluster.AddUser(UserController); err != nil {
		return err
	}
	if e.userConfig, err = e.Cluster.AddUser(UserUser); err != nil {
		return err
	}
	cfg := e.Config()
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

// MustStart is Start for TestMain: it panics with Start's error, which says
// what is wrong and how to fix it.
func MustStart(opts EnvOptions) *Env {
	env, err := Start(opts)
	if err != nil {
		panic("kubeprop: " + err.Error())
	}
	return env
}

// Config returns an administrator's connection to the API server.
func (e *Env) Config() *rest.Config { return e.Cluster.Config() }

// ClusterDuration converts a wall duration to cluster time.
func (e *Env) ClusterDuration(wall time.Duration) time.Duration {
	return time.Duration(float64(wall) * e.Cluster.TimeScale())
}

// WallDuration converts a cluster duration to wall time.
func (e *Env) WallDuration(clusterTime time.Duration) time.Duration {
	return e.Cluster.Scaled(clusterTime)
}

// Stop stops the kubelets and every process of the cluster. It is safe to
// call more than once.
func (e *Env) Stop() error {
	if e == nil {
		return nil
	}
	e.Kubelets.Stop()
	return e.Cluster.Stop()
}
