package inject

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// Proxy is a controller binary's API server: it forwards every request
// with the credentials of cfg, whose transport carries the faults
// (WrapTransport, WrapWrites), as an in-process controller's client does.
// It listens on loopback, in the network namespace of the goroutine's
// thread that starts it.
type Proxy struct {
	// URL is where the binary connects to.
	URL       string
	srv       *http.Server
	connected chan struct{} // closed at the first request
	once      sync.Once
	inst      *Instance
}

// StartProxy starts the proxy of one controller instance.
func StartProxy(cfg *rest.Config, inst *Instance) (*Proxy, error) {
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("the controller's proxy: building its transport: %w", err)
	}
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("the controller's proxy: the API server's address %q: %w", cfg.Host, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("the controller's proxy: %w", err)
	}
	p := &Proxy{URL: "http://" + ln.Addr().String(), connected: make(chan struct{}), inst: inst}
	rp := &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport: rt,
		// Watch events go on as they come.
		FlushInterval: -1,
		// Cut watches (StaleWatch, a stopped binary) are not news.
		ErrorLog: log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			// A killed instance's requests end like a dropped connection.
			http.Error(w, err.Error(), http.StatusBadGateway)
		},
	}
	p.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.once.Do(func() { close(p.connected) })
			rp.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// Connected is closed at the binary's first request.
func (p *Proxy) Connected() <-chan struct{} { return p.connected }

// Close stops the proxy and closes its instance's connections.
func (p *Proxy) Close() {
	_ = p.srv.Close()
	p.inst.CloseConnections()
}
