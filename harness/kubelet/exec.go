package kubelet

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"k8s.io/client-go/util/cert"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// ExecRequest is one command run in a container through pods/exec.
type ExecRequest struct {
	Namespace, Pod, Container string
	Command                   []string
	// Stdin is the caller's input; nil when it sends none.
	Stdin io.Reader
}

// ExecResult is what the command printed and how it ended.
type ExecResult struct {
	Stdout, Stderr []byte
	ExitCode       int
}

// Exec answers an exec into a running container. It must return once
// ctx ends.
type Exec func(ctx context.Context, req ExecRequest) ExecResult

// execSucceeds is the default Exec: exit 0, no output.
func execSucceeds(context.Context, ExecRequest) ExecResult { return ExecResult{} }

// The kubelet's own streaming timeouts (pkg/kubelet/apis/config defaults):
// an idle exec stream ends after 4 hours; its streams must be opened
// within 30 s.
const (
	streamIdleTimeout     = 4 * time.Hour
	streamCreationTimeout = remotecommand.DefaultStreamCreationTimeout
)

// servingCert is the simulated kubelets' serving certificate, self-signed:
// the API server verifies a kubelet's certificate only when given
// --kubelet-certificate-authority, which the hollow cluster does not set.
func servingCert() (tls.Certificate, error) {
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("kubeprop-kubelet", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("kubelet simulator: creating its serving certificate: %w", err)
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

// listen opens the node's kubelet endpoint on its own loopback address, on
// a port the kernel picks (another test binary's nodes may have the same
// address), or on port when it is not zero (a recovered node keeps its
// endpoint).
func (n *Node) listen(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort(nodeIP(n.index), strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("kubelet simulator: node %s: opening the kubelet endpoint: %w", n.name, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/exec/{namespace}/{pod}/{container}", n.serveExec)
	mux.HandleFunc("/exec/{namespace}/{pod}/{uid}/{container}", n.serveExec)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 30 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{n.sim.cert}, MinVersion: tls.VersionTLS12}}
	n.mu.Lock()
	n.server, n.port = srv, l.Addr().(*net.TCPAddr).Port
	n.mu.Unlock()
	go func() { _ = srv.ServeTLS(l, "", "") }()
	return nil
}

// closeEndpoint stops answering on the kubelet endpoint: a lost node's
// kubelet is out of reach, a removed one gone.
func (n *Node) closeEndpoint() {
	n.mu.Lock()
	srv := n.server
	n.server = nil
	n.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// serveExec is the kubelet's exec endpoint: the API server proxies
// pods/exec to it. A container that is not running gets the kubelet's
// error; otherwise Options.Exec answers through the exec protocol
// (SPDY or WebSocket, as the kubelet's CRI streaming server speaks it).
func (n *Node) serveExec(w http.ResponseWriter, req *http.Request) {
	ns, pod, container := req.PathValue("namespace"), req.PathValue("pod"), req.PathValue("container")
	opts, err := remotecommand.NewOptions(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if !n.sim.running(n, ns, pod, container) {
		// The kubelet's own answer (its runtime finds no such container,
		// and the CRI streaming server's WriteError makes it a 500).
		http.Error(w, fmt.Sprintf("container not found (%q)", container), http.StatusInternalServerError)
		return
	}
	cmd := req.URL.Query()["command"]
	remotecommand.ServeExec(w, req, execAdapter{n: n, namespace: ns}, pod, req.PathValue("uid"), container, cmd, opts,
		streamIdleTimeout, streamCreationTimeout, remotecommand.SupportedStreamingProtocols)
}

// execAdapter runs Options.Exec for remotecommand.ServeExec.
type execAdapter struct {
	n         *Node
	namespace string
}

func (a execAdapter) ExecInContainer(ctx context.Context, pod, _, container string, cmd []string, in io.Reader, stdout, stderr io.WriteCloser, _ bool, _ <-chan remotecommand.TerminalSize, _ time.Duration) error {
	s := a.n.sim
	res := s.opts.Exec(ctx, ExecRequest{Namespace: a.namespace, Pod: pod, Container: container, Command: cmd, Stdin: in})
	var errs []error
	for _, out := range []struct {
		w    io.WriteCloser
		data []byte
	}{{stdout, res.Stdout}, {stderr, res.Stderr}} {
		if out.w != nil && len(out.data) > 0 {
			_, err := io.Copy(out.w, bytes.NewReader(out.data))
			errs = append(errs, err)
		}
	}
	s.emit(Event{Kind: ContainerExec, Time: s.opts.Clock.Now(), Node: a.n.name, Namespace: a.namespace, Pod: pod,
		Container: container, Command: cmd, Exit: ExitStatus{Code: int32(res.ExitCode)}})
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", res.ExitCode), Code: res.ExitCode}
	}
	return nil
}

// running reports whether the pod runs on node n with that container
// started.
func (s *Simulator) running(n *Node, namespace, pod, container string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.pods[namespace+"/"+pod]
	if !ok || st.node != n {
		return false
	}
	for _, c := range st.containers {
		if c.name == container {
			return c.phase == containerRunning
		}
	}
	return false
}
