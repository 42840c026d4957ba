package inject

import (
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/properties"
)

// UserAgentInjected is the user agent of the requests the harness refused
// on the controller's behalf (APIErrors): they never reach the API server,
// so the trace gets them from the harness instead of the audit log.
const UserAgentInjected = "kubeprop-injected"

// ErrCrashed is what every call of a controller instance killed by
// CrashAfterWrite returns: a dead process gets no answers.
var ErrCrashed = errors.New("the controller instance was killed by CrashAfterWrite")

// Options configure a case's Faults.
type Options struct {
	// Namespace is the case's: API errors refuse only writes there. The
	// trace is the namespace's, and a controller that watches every
	// namespace also writes to earlier cases' (still being deleted).
	Namespace string
	// IsCaseNamespace tells the namespaces of other cases, whose writes
	// are noted as foreign (ForeignWrites). Nil: none is.
	IsCaseNamespace func(namespace string) bool
	// Scheme and Mapper name the resource of an in-process controller's
	// write (Client).
	Scheme *runtime.Scheme
	Mapper meta.RESTMapper
	// Refused is told of each write the faults refused (the API server
	// never sees it, so the audit log does not either).
	Refused func(properties.Request)
	// Crashed is called when a CrashAfterWrite killed an instance, to
	// start its successor.
	Crashed func()
	// Delivered is told, at most every deliveredEvery, that watch events
	// held back reached the controller: news to it.
	Delivered func(time.Time)
}

// deliveredEvery is the least time between two calls of
// Options.Delivered: a stale view's end delivers hundreds of chunks at
// once, and a controller answers each at once.
const deliveredEvery = time.Millisecond

// Faults are the faults that act on the controller under test: errors
// answered to its writes, a crash right after one of its writes, a
// delayed or cut watch stream. One per case; every controller instance of
// the case goes through it, in process (Client, or a rest.Config wrapped
// with WrapTransport and WrapWrites) or as a binary (Proxy).
type Faults struct {
	opts Options

	mu         sync.Mutex
	failErr    faults.APIError
	failMatch  faults.WriteMatch // the writes refused; empty fields match any
	failLeft   int               // writes still to refuse, in count mode
	failUntil  time.Time         // end of the window, in window mode
	crashLeft  int               // matching writes until the crash; 0 when disarmed
	crashMatch faults.WriteMatch
	crashSeen  map[string]int // writes since armed, by verb and resource
	crashNamed func(faults.CrashAfterWriteStep)
	watchDelay time.Duration
	watchUntil time.Time
	watchOf    string // the resource whose watches are delayed; "": all
	watches    map[*delayedBody]bool
	// watched are the resources the controller has watched.
	watched map[string]bool
	// foreign are the controller's writes into other cases' namespaces,
	// "verb resource in namespace", each once.
	foreign []string
	// undelivered counts watch chunks held back: the controller has
	// events coming, so it is not idle.
	undelivered atomic.Int64
	// heldDelivered is when a chunk held back was last delivered (unix
	// nanoseconds): the controller has news it may not have acted on yet.
	heldDelivered atomic.Int64
	// instances are the controller's instances so far, whose stale views
	// the heal ends.
	instances map[*Instance]bool
	// acted is closed at the controller's first write of its own kinds
	// (see aimed) in the case's namespace.
	acted     chan struct{}
	actedOnce sync.Once
}

// New returns a case's faults, none of them in force.
func New(opts Options) *Faults {
	if opts.IsCaseNamespace == nil {
		opts.IsCaseNamespace = func(string) bool { return false }
	}
	if opts.Refused == nil {
		opts.Refused = func(properties.Request) {}
	}
	if opts.Crashed == nil {
		opts.Crashed = func() {}
	}
	if opts.Delivered == nil {
		opts.Delivered = func(time.Time) {}
	}
	return &Faults{opts: opts, watches: map[*delayedBody]bool{}, watched: map[string]bool{}, instances: map[*Instance]bool{}, acted: make(chan struct{})}
}

// noteAct closes Acted at the controller's first successful write of its
// own kinds. Every write of every route passes the connection's
// transport, a Manager's client's included.
func (f *Faults) noteAct(req *http.Request) {
	select {
	case <-f.acted:
		return
	default:
	}
	if info, ok := writeOf(req); ok && f.aimed(info.Namespace, schema.GroupResource{Group: info.APIGroup, Resource: info.Resource}) {
		f.actedOnce.Do(func() { close(f.acted) })
	}
}

// Acted is closed once the controller made its first write of its own
// kinds in the case's namespace: not a lease renewal, not an Event.
func (f *Faults) Acted() <-chan struct{} { return f.acted }

// Instance is one start of the controller; a crash kills only it.
type Instance struct {
	// Dead is set once a CrashAfterWrite killed the instance: its calls
	// get ErrCrashed.
	Dead atomic.Bool
	// Kill ends a controller process at its crash; nil in process.
	Kill func()
	// Linger, if set, gets the transports of a stopped instance, to close
	// their idle connections again a little later.
	Linger func([]http.RoundTripper)

	mu         sync.Mutex
	transports []http.RoundTripper
	stale      staleView
}

// Track is the first rest.Config.Wrap of an instance's connection: it
// keeps the transport under the harness's wrappers. A wrapped config's
// transport is never shared (client-go cannot cache it), so each instance
// has its own connections, which CloseConnections ends once it stopped:
// otherwise every case leaves its HTTP/2 connections and their read loops.
func (inst *Instance) Track(rt http.RoundTripper) http.RoundTripper {
	switch rt.(type) {
	case interface{ CloseIdleConnections() }, utilnet.RoundTripperWrapper:
	default:
		// A stream's own (pods/exec over SPDY or WebSocket): its one
		// connection ends with the stream.
		return rt
	}
	inst.mu.Lock()
	inst.transports = append(inst.transports, rt)
	inst.mu.Unlock()
	return rt
}

// CloseConnections closes the instance's idle connections, once it has
// stopped, and hands its transports to Linger: a connection whose last
// stream (a watch) was still closing at the stop goes idle only later.
func (inst *Instance) CloseConnections() {
	inst.mu.Lock()
	transports := inst.transports
	inst.transports = nil
	inst.mu.Unlock()
	for _, rt := range transports {
		utilnet.CloseIdleConnectionsFor(rt)
	}
	if inst.Linger != nil && len(transports) > 0 {
		inst.Linger(transports)
	}
}

// Heal ends every controller fault; delayed watch events are delivered,
// and stale views end.
func (f *Faults) Heal() {
	f.mu.Lock()
	f.failLeft, f.failUntil, f.crashLeft, f.watchUntil = 0, time.Time{}, 0, time.Time{}
	for inst := range f.instances {
		inst.endStale()
	}
	f.mu.Unlock()
}
