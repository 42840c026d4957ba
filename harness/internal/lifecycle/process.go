package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubeprop/kubeprop/harness/internal/inject"
	"github.com/kubeprop/kubeprop/harness/internal/procgroup"
)

// processStartGrace is how long a controller binary must keep running
// after its first request to count as started.
const processStartGrace = time.Second

// Process is harness.Process: see its documentation there.
func Process(cmd string, args ...string) Controller {
	return processController{ProcessOptions{Command: cmd, Args: args}}
}

// ProcessOptions are a controller binary's command line and environment.
type ProcessOptions struct {
	// Command is the binary: a path, or a name on PATH.
	Command string
	// Args are its arguments.
	Args []string
	// Env are variables set for it besides the harness's own KUBECONFIG
	// and KUBEPROP_NAMESPACE (and the harness's environment): an operator
	// that reads its namespace from OPERATOR_NAMESPACE gets
	// {"OPERATOR_NAMESPACE": "$(KUBEPROP_NAMESPACE)"}.
	Env map[string]string
}

// ProcessWith is harness.ProcessWith: see its documentation there.
func ProcessWith(opts ProcessOptions) Controller { return processController{opts} }

type processController struct{ opts ProcessOptions }

func (p processController) validate() error { return p.opts.Validate() }

// Validate checks the command and the environment's names.
func (o ProcessOptions) Validate() error {
	var errs []error
	if o.Command == "" {
		errs = append(errs, errors.New("the controller binary's command is empty: give its path"))
	}
	for k := range o.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			errs = append(errs, fmt.Errorf("the controller binary's environment: %q is no variable name", k))
		}
	}
	return errors.Join(errs...)
}

func (p processController) start(ctx context.Context, c *caseRun) (func() error, error) {
	path, err := exec.LookPath(p.opts.Command)
	if err != nil {
		return nil, fmt.Errorf("the controller binary %q: %w; build it first, or give its path", p.opts.Command, err)
	}
	c.reachable.Store(true)
	// The proxy's handlers read kill; it is set before any of them runs.
	var running atomic.Pointer[controllerProcess]
	inst := c.newInstance(func() {
		if p := running.Load(); p != nil {
			p.Kill()
		}
	})
	dir := c.env.Cluster().Dir()
	kubeconfig := filepath.Join(dir, fmt.Sprintf("controller-%s-%d.kubeconfig", c.namespace, caseSeq.Add(1)))
	logPath := filepath.Join(dir, "controller-"+c.namespace+".log")
	var proxy *inject.Proxy
	var proc *controllerProcess
	// The proxy listens in the binary's network namespace, where its
	// loopback is the binary's own; the proxy's side dials the API server
	// from the machine's.
	isolated, err := inOwnNetwork(func() error {
		var err error
		if proxy, err = inject.StartProxy(c.instanceConfig(inst, true), inst); err != nil {
			return err
		}
		if err := writeProxyKubeconfig(kubeconfig, proxy.URL, c.namespace); err != nil {
			proxy.Close()
			return err
		}
		expand := expander(kubeconfig, c.namespace)
		args := make([]string, len(p.opts.Args))
		for i, a := range p.opts.Args {
			args[i] = expand.Replace(a)
		}
		env := []string{"KUBECONFIG=" + kubeconfig, "KUBEPROP_NAMESPACE=" + c.namespace}
		for _, k := range slices.Sorted(maps.Keys(p.opts.Env)) {
			env = append(env, k+"="+expand.Replace(p.opts.Env[k]))
		}
		proc, err = startProcess(path, args, logPath, c.ctlLog, env...)
		if err != nil {
			proxy.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !isolated {
		c.logf("the controller binary shares this machine's network: a network namespace of its own needs CAP_SYS_ADMIN (root, in a container that allows it), so its dials to pod and Service addresses leave the machine")
	}
	running.Store(proc)
	stopping := &atomic.Bool{}
	go func() {
		<-proc.Done()
		if !stopping.Load() && !inst.Dead.Load() {
			c.recorder.Exited(fmt.Sprintf("the controller process exited while the case went on: %v", proc.Err()), proc.tail())
		}
	}()
	stop := func() error {
		stopping.Store(true)
		defer os.Remove(kubeconfig)
		defer proxy.Close()
		if err := proc.stop(controllerStopTimeout); err != nil {
			return fmt.Errorf("the controller process did not stop within %v of SIGTERM and was killed; last lines of %s:\n%s", controllerStopTimeout, logPath, proc.tail())
		}
		return nil
	}
	if err := proc.awaitStart(ctx, proxy, c.spec.Setup); err != nil {
		return nil, errors.Join(fmt.Errorf("the controller did not start: %w; last lines of %s:\n%s", err, logPath, proc.tail()), stop())
	}
	return stop, nil
}

// expander replaces the harness's variables in a binary's arguments and
// environment, in both the shell's ${X} and Kubernetes' $(X) forms.
func expander(kubeconfig, namespace string) *strings.Replacer {
	return strings.NewReplacer("${KUBECONFIG}", kubeconfig, "$(KUBECONFIG)", kubeconfig,
		"${KUBEPROP_NAMESPACE}", namespace, "$(KUBEPROP_NAMESPACE)", namespace)
}

func writeProxyKubeconfig(path, server, namespace string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubeprop"] = &clientcmdapi.Cluster{Server: server}
	cfg.AuthInfos["controller"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["kubeprop"] = &clientcmdapi.Context{Cluster: "kubeprop", AuthInfo: "controller", Namespace: namespace}
	cfg.CurrentContext = "kubeprop"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing the controller's kubeconfig: %w", err)
	}
	return nil
}

// controllerProcess is one run of the binary, in its own process group
// (a terminal's ^C reaches the harness, which stops it in order; a kill
// reaches whatever it started too). The cluster's watchdog kills it if the
// harness dies: its environment names a file in the cluster's folder
// (KUBECONFIG).
type controllerProcess struct {
	*procgroup.Process
	caseLog *controllerLog
}

// startProcess starts the binary, its output to the file at logPath and
// to the case's log.
func startProcess(path string, args []string, logPath string, caseLog *controllerLog, env ...string) (*controllerProcess, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("the controller's log: %w", err)
	}
	// One writer for both streams: exec then writes from one goroutine.
	out := io.MultiWriter(logFile, caseLog)
	fmt.Fprintf(out, "--- kubeprop: starting %s %s\n", path, strings.Join(args, " "))
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	proc, err := procgroup.Start(cmd, logFile)
	if err != nil {
		return nil, fmt.Errorf("starting the controller binary %s: %w", path, err)
	}
	return &controllerProcess{Process: proc, caseLog: caseLog}, nil
}

// awaitStart waits for the first request through the proxy, then for the
// process to stay up for processStartGrace.
func (p *controllerProcess) awaitStart(ctx context.Context, proxy *inject.Proxy, limit time.Duration) error {
	select {
	case <-proxy.Connected():
	case <-p.Done():
		return fmt.Errorf("the binary exited at once (%v)", p.Err())
	case <-time.After(limit):
		return fmt.Errorf("the binary made no request to the API server within %v: it must connect with the kubeconfig in $KUBECONFIG (or pass --kubeconfig=${KUBECONFIG} in its args)", limit)
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-p.Done():
		return fmt.Errorf("the binary exited right after connecting (%v)", p.Err())
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(processStartGrace):
		return nil
	}
}

// stop sends SIGTERM to the process group and SIGKILL after grace; the
// error says it needed the SIGKILL.
func (p *controllerProcess) stop(grace time.Duration) error {
	killed, err := p.Stop(grace)
	if killed && err == nil {
		err = errors.New("killed after the grace")
	}
	return err
}

// tail is the last lines of the case's controller log: this process's
// last output, for the errors.
func (p *controllerProcess) tail() string { return p.caseLog.tail(20) }
