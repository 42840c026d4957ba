package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ServiceNetwork is the hollow cluster's Service range (the API server's
// --service-cluster-ip-range): ClusterIPs that nothing answers on.
const ServiceNetwork = "10.0.0.0/24"

// Options configures a cluster. The zero value is a cluster on real time with
// the binaries from `make bins` and no CRDs.
type Options struct {
	// AssetsDir is the folder with etcd, kube-apiserver,
	// kube-controller-manager and kube-scheduler. Empty: $KUBEPROP_ASSETS,
	// else $KUBEBUILDER_ASSETS, else bin/k8s/<KubernetesVersion> in the
	// working directory or a folder above it.
	AssetsDir string

	// CRDDirectoryPaths are folders (or files) of CustomResourceDefinitions
	// to install. A path that does not exist is an error.
	CRDDirectoryPaths []string

	// TimeScale is cluster seconds per wall second: 10 makes the node
	// monitor grace period of 50 s pass in 5 s. Zero means 1.
	TimeScale float64

	// APIServerPort is the API server's port on 127.0.0.1. Zero picks a
	// free one.
	APIServerPort int

	// StartTimeout bounds the start of each component. Zero means 60 s.
	StartTimeout time.Duration

	// NodeFilter is asked, for every pod the scheduler places, which of the
	// nodes that fit it the pod may go to (through a scheduler extender the
	// cluster serves on loopback). Nil keeps every node.
	NodeFilter NodeFilter

	// NodePicker, when set, places each pod on the node it names among
	// those that fit (through the extender's prioritize call, weighted to
	// outweigh the scheduler's own scores). The extender turns off the
	// scheduler's batching of like pods, and with it the placement that
	// made a plan's NodeLoss{Node: 0} hit the same pods on every run: a
	// picker makes placement a function of the order pods are scheduled in.
	NodePicker NodePicker
}

// maxTimeScale bounds TimeScale: beyond it the scaled node-monitor period
// falls under 10 ms of wall time and the control plane spends its time on
// heartbeats.
const maxTimeScale = 500

func (o Options) withDefaults() Options {
	if o.TimeScale == 0 {
		o.TimeScale = 1
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 60 * time.Second
	}
	return o
}

func (o Options) validate() error {
	if !(o.TimeScale >= 1 && o.TimeScale <= maxTimeScale) { // also catches NaN
		return fmt.Errorf("TimeScale %v is out of range: it is cluster seconds per wall second, from 1 (real time) up to %d", o.TimeScale, maxTimeScale)
	}
	if o.APIServerPort < 0 || o.APIServerPort > 65535 {
		return fmt.Errorf("APIServerPort %d is not a TCP port; use 1-65535, or 0 for a free one", o.APIServerPort)
	}
	for _, p := range o.CRDDirectoryPaths {
		if _, err := os.Stat(p); err != nil {
			abs, _ := filepath.Abs(p)
			return fmt.Errorf("CRD path %q (%s) does not exist: CRDDirectoryPaths takes folders or files of CustomResourceDefinition YAML, relative to the test's package folder: %w", p, abs, err)
		}
	}
	return nil
}

// Identities of the actors the harness runs. Each has its own user so that
// the audit log attributes every request.
const (
	UserControllerManager = "system:kube-controller-manager"
	UserScheduler         = "system:kube-scheduler"
)

// Cluster is a running control plane.
type Cluster struct {
	opts     Options
	dir      string
	assets   string
	env      *envtest.Environment
	kcm      *child
	sched    *child
	ext      *extender
	reaper   *os.File
	stopOnce sync.Once
	stopErr  error
}

// Start starts etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler and returns when all four are healthy. On error nothing is
// left running.
func Start(ctx context.Context, opts Options) (_ *Cluster, retErr error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	assets, err := findAssets(opts.AssetsDir)
	if err != nil {
		return nil, err
	}
	if err := checkVersions(assets); err != nil {
		return nil, err
	}
	if opts.APIServerPort != 0 {
		if err := checkPortFree(opts.APIServerPort); err != nil {
			return nil, fmt.Errorf("starting kube-apiserver: %w", err)
		}
	}
	dir, err := os.MkdirTemp("", "kubeprop-cluster-")
	if err != nil {
		return nil, fmt.Errorf("creating the cluster folder: %w", err)
	}
	c := &Cluster{opts: opts, dir: dir, assets: assets}
	c.reaper, err = startReaper(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer func() {
		if retErr != nil {
			_ = c.Stop()
		}
	}()
	if err := c.startControlPlane(); err != nil {
		return nil, err
	}
	// envtest returned once the CRDs were established.
	crdsEstablished := time.Now()
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	if err := c.startControllerManager(ctx); err != nil {
		return nil, err
	}
	if err := c.startScheduler(ctx); err != nil {
		return nil, err
	}
	// The API server holds each create of a custom resource for 2 s while
	// its CRD was established less than 2 s before (so that another server
	// of an HA control plane can catch up; customresource_handler.go): the
	// first case's fixtures waited that long, and every case setting up
	// beside it waited behind them. What is left of the 2 s after the
	// controller manager and the scheduler started.
	if len(c.env.CRDs) > 0 {
		select {
		case <-time.After(time.Until(crdsEstablished.Add(crdCreateHold))):
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting out the API server's hold on creates of new CRDs' objects: %w", ctx.Err())
		}
	}
	return c, nil
}

func (c *Cluster) startControlPlane() error {
	etcdLog, err := os.Create(filepath.Join(c.dir, "etcd.log"))
	if err != nil {
		return fmt.Errorf("creating the etcd log: %w", err)
	}
	defer etcdLog.Close()
	apiLog, err := os.Create(filepath.Join(c.dir, "kube-apiserver.log"))
	if err != nil {
		return fmt.Errorf("creating the kube-apiserver log: %w", err)
	}
	defer apiLog.Close()
	if err := os.WriteFile(c.auditPolicyPath(), []byte(auditPolicy), 0o600); err != nil {
		return fmt.Errorf("writing the audit policy: %w", err)
	}

	// The binaries' paths are given, not left to envtest, which would take
	// $KUBEBUILDER_ASSETS over them, set or empty (then it runs whatever
	// etcd is on PATH).
	apiServer := &envtest.APIServer{
		Path:         filepath.Join(c.assets, binAPIServer),
		CertDir:      filepath.Join(c.dir, "apiserver"),
		Out:          apiLog,
		Err:          apiLog,
		StartTimeout: c.opts.StartTimeout,
	}
	if c.opts.APIServerPort != 0 {
		apiServer.SecureServing.Address = "127.0.0.1"
		apiServer.SecureServing.Port = strconv.Itoa(c.opts.APIServerPort)
	}
	if err := os.MkdirAll(apiServer.CertDir, 0o700); err != nil {
		return fmt.Errorf("creating the kube-apiserver folder: %w", err)
	}
	toleration := strconv.Itoa(c.scaledSeconds(300 * time.Second))
	apiServer.Configure().
		Set("audit-policy-file", c.auditPolicyPath()).
		Set("audit-log-path", c.AuditLogPath()).
		Set("audit-log-mode", "blocking").
		Set("audit-log-format", "json").
		Set("default-not-ready-toleration-seconds", toleration).
		Set("default-unreachable-toleration-seconds", toleration).
		// A simulated node's hostname resolves nowhere: the API server
		// reaches its kubelet endpoint (pods/exec) at its InternalIP.
		Set("kubelet-preferred-address-types", "InternalIP").
		Set("service-cluster-ip-range", ServiceNetwork).
		// On SIGTERM, end the open watches: a stop while cases run (^C
		// in a search) otherwise waits for their informers, whose watches
		// hold the HTTP server's graceful shutdown until the stop's
		// timeout (30 s), and then kills it.
		Set("shutdown-watch-termination-grace-period", "2s")

	c.env = &envtest.Environment{
		ControlPlane: envtest.ControlPlane{
			Etcd: &envtest.Etcd{
				Path:         filepath.Join(c.assets, binEtcd),
				DataDir:      filepath.Join(c.dir, "etcd"),
				Out:          etcdLog,
				Err:          etcdLog,
				StartTimeout: c.opts.StartTimeout,
			},
			APIServer: apiServer,
		},
		BinaryAssetsDirectory:    c.assets,
		CRDDirectoryPaths:        c.opts.CRDDirectoryPaths,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: c.opts.StartTimeout,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	if err := os.MkdirAll(c.env.ControlPlane.Etcd.DataDir, 0o700); err != nil {
		return fmt.Errorf("creating the etcd folder: %w", err)
	}
	if _, err := c.env.Start(); err != nil {
		return fmt.Errorf("starting etcd and kube-apiserver: %w\nlast lines of kube-apiserver's log:\n%s\nlast lines of etcd's log:\n%s",
			err, fileTail(filepath.Join(c.dir, "kube-apiserver.log")), fileTail(filepath.Join(c.dir, "etcd.log")))
	}
	// envtest writes webhook serving certificates into a folder of its own
	// under $TMPDIR, which only its Stop removes: a process killed before
	// then (a test's timeout, SIGKILL) left one behind every time, out of
	// the watchdog's reach. The cluster serves no webhooks.
	if dir := c.env.WebhookInstallOptions.LocalServingCertDir; dir != "" {
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("removing envtest's webhook certificates: %w", err)
		}
		c.env.WebhookInstallOptions.LocalServingCertDir = ""
	}
	return nil
}

// crdCreateHold is how long after a CRD was established the API server
// holds a create of its objects (for that long).
const crdCreateHold = 2 * time.Second

func (c *Cluster) startControllerManager(ctx context.Context) error {
	kubeconfig, err := c.writeKubeconfig(UserControllerManager, binControllerManager+".kubeconfig")
	if err != nil {
		return err
	}
	c.kcm, err = c.startComponent(ctx, binControllerManager, kubeconfig,
		"--kubeconfig="+kubeconfig,
		"--leader-elect=false",
		// Every controller but the token controller, which needs the
		// service-account signing key; envtest's API server does not mount
		// tokens (its ServiceAccount admission plugin is off).
		"--controllers=*,-serviceaccount-token",
		"--use-service-account-credentials=false",
		"--node-monitor-grace-period="+c.scaled(50*time.Second).String(),
		"--node-monitor-period="+c.scaled(5*time.Second).String(),
		"--node-startup-grace-period="+c.scaled(60*time.Second).String(),
		"--kube-api-qps="+strconv.Itoa(clientQPS),
		"--kube-api-burst="+strconv.Itoa(clientBurst),
	)
	return err
}

// The client rate limits of kube-controller-manager and kube-scheduler
// (defaults 20 and 50 requests/s) are raised: cases share the control
// plane, and a controller that churns thousands of pods in one case would
// otherwise leave it throttled for minutes (binding, evicting and deleting
// that case's debris) while the next case runs.
const (
	clientQPS   = 500
	clientBurst = 1000
)

// startScheduler starts the extender, then kube-scheduler with a
// configuration file: the extender can only be given there.
func (c *Cluster) startScheduler(ctx context.Context) error {
	kubeconfig, err := c.writeKubeconfig(UserScheduler, binScheduler+".kubeconfig")
	if err != nil {
		return err
	}
	if c.ext, err = startExtender(c.opts.NodeFilter, c.opts.NodePicker); err != nil {
		return err
	}
	config, err := c.writeSchedulerConfig(kubeconfig)
	if err != nil {
		return err
	}
	c.sched, err = c.startComponent(ctx, binScheduler, kubeconfig, "--config="+config)
	return err
}

// writeSchedulerConfig writes kube-scheduler's configuration into the
// cluster folder. With --config, the scheduler ignores --kubeconfig,
// --kube-api-qps and --kube-api-burst: the connection is configured here,
// and leader election too, to keep the whole configuration in one place.
func (c *Cluster) writeSchedulerConfig(kubeconfig string) (string, error) {
	config := map[string]any{
		"apiVersion": "kubescheduler.config.k8s.io/v1",
		"kind":       "KubeSchedulerConfiguration",
		"clientConnection": map[string]any{
			"kubeconfig": kubeconfig,
			"qps":        clientQPS,
			"burst":      clientBurst,
		},
		"leaderElection": map[string]any{"leaderElect": false},
		// Every node is a candidate, however many there are: by default a
		// cluster of more than 100 nodes stops looking once it has found
		// enough that fit, before the extender keeps only a case's few.
		"percentageOfNodesToScore": 100,
		"extenders": []map[string]any{{
			"urlPrefix":        c.ext.urlPrefix(),
			"filterVerb":       extenderVerb,
			"prioritizeVerb":   extenderPrioritizeVerb,
			"nodeCacheCapable": true,
			"weight":           extenderWeight,
			"enableHTTPS":      false,
			// A filter call that fails fails the pod's scheduling
			// attempt: an ignored one would let the pod go anywhere.
			"ignorable": false,
			// The default 5 s, on a loaded machine, would fail attempts
			// that are merely slow.
			"httpTimeout": "30s",
		}},
	}
	// JSON is YAML: the scheduler reads either.
	b, err := json.MarshalIndent(config, "", "  ")
	if err != nil {
		return "", fmt.Errorf("writing the kube-scheduler configuration: %w", err)
	}
	path := filepath.Join(c.dir, binScheduler+".config.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return "", fmt.Errorf("writing the kube-scheduler configuration: %w", err)
	}
	return path, nil
}

// startComponent starts kube-controller-manager or kube-scheduler, its
// clients authenticated by kubeconfig, serving /healthz on a free loopback
// port, and waits until it is healthy. It returns the child even on error,
// so that Stop can end it.
func (c *Cluster) startComponent(ctx context.Context, binary, kubeconfig string, extraArgs ...string) (*child, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	args := append([]string{
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
	}, extraArgs...)
	ch, err := startChild(binary, filepath.Join(c.assets, binary), args, filepath.Join(c.dir, binary+".log"))
	if err != nil {
		return nil, err
	}
	return ch, ch.waitHealthy(ctx, port)
}

// writeKubeconfig provisions a user in the system:masters group and writes
// its kubeconfig into the cluster folder.
func (c *Cluster) writeKubeconfig(user, file string) (string, error) {
	u, err := c.env.ControlPlane.AddUser(envtest.User{Name: user, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", fmt.Errorf("provisioning user %s: %w", user, err)
	}
	b, err := u.KubeConfig()
	if err != nil {
		return "", fmt.Errorf("writing the kubeconfig of %s: %w", user, err)
	}
	path := filepath.Join(c.dir, file)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return "", fmt.Errorf("writing the kubeconfig of %s: %w", user, err)
	}
	return path, nil
}

// Config returns an administrator's connection to the API server.
func (c *Cluster) Config() *rest.Config { return rest.CopyConfig(c.env.Config) }

// AddUser provisions a user in the system:masters group, so that an actor's
// requests carry its own name in the audit log, and returns its connection.
func (c *Cluster) AddUser(name string) (*rest.Config, error) {
	u, err := c.env.ControlPlane.AddUser(envtest.User{Name: name, Groups: []string{"system:masters"}},
		&rest.Config{QPS: 1000, Burst: 2000})
	if err != nil {
		return nil, fmt.Errorf("provisioning user %s: %w", name, err)
	}
	return rest.CopyConfig(u.Config()), nil
}

// TimeScale returns cluster seconds per wall second.
func (c *Cluster) TimeScale() float64 { return c.opts.TimeScale }

// Scaled converts a cluster duration to wall time.
func (c *Cluster) Scaled(d time.Duration) time.Duration { return c.scaled(d) }

func (c *Cluster) scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.opts.TimeScale)
}

// scaledSeconds converts a cluster duration to whole wall seconds, at least
// 1, for flags that take seconds.
func (c *Cluster) scaledSeconds(d time.Duration) int {
	return max(1, int(math.Round(c.scaled(d).Seconds())))
}

// Dir is the folder with the cluster's logs, kubeconfigs and audit log. It
// is removed by Stop.
func (c *Cluster) Dir() string { return c.dir }

// Stop stops every process of the cluster and removes its folder. It is safe
// to call more than once.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		var errs []error
		for _, ch := range []*child{c.sched, c.kcm} {
			if ch != nil {
				errs = append(errs, ch.stop(10*time.Second))
			}
		}
		// After the scheduler: it must never find the extender gone.
		if c.ext != nil {
			errs = append(errs, c.ext.stop())
		}
		if c.env != nil {
			if err := c.env.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stopping etcd and kube-apiserver: %w", err))
			}
		}
		// Closing the pipe lets the watchdog kill anything left and remove
		// the folder.
		if c.reaper != nil {
			c.reaper.Close()
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}
