package inject

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/sets"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

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

// FailWrites answers the controller's writes in the case's namespace
// that match with e: the next requests of them, or, when requests is 0,
// all for window.
func (f *Faults) FailWrites(e faults.APIError, match faults.WriteMatch, requests int, window time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failErr, f.failMatch, f.failLeft, f.failUntil = e, match, requests, time.Time{}
	if requests <= 0 {
		f.failUntil = time.Now().Add(window)
	}
}

// CrashAfter arms the crash after the writes-th write that match names;
// named is told which write that was, by its verb, resource and rank
// among writes of both since now.
func (f *Faults) CrashAfter(match faults.WriteMatch, writes int, named func(faults.CrashAfterWriteStep)) {
	f.mu.Lock()
	f.crashLeft, f.crashMatch, f.crashSeen, f.crashNamed = writes, match, map[string]int{}, named
	f.mu.Unlock()
}

// DelayWatches delays the controller's watch events of resource (all
// when "") by delay for window.
func (f *Faults) DelayWatches(resource string, delay, window time.Duration) {
	f.mu.Lock()
	f.watchDelay, f.watchUntil, f.watchOf = delay, time.Now().Add(window), resource
	f.mu.Unlock()
}

// DropWatches cuts every open watch of the controller of resource (all
// when ""); it reports whether there was one.
func (f *Faults) DropWatches(resource string) bool {
	f.mu.Lock()
	open := make([]*delayedBody, 0, len(f.watches))
	for b := range f.watches {
		if resource == "" || b.resource == resource {
			open = append(open, b)
		}
	}
	f.mu.Unlock()
	for _, b := range open {
		b.cut()
	}
	return len(open) > 0
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

// refusal returns the error to answer a write with, or nil to let it
// through. A conflict answers only writes that can meet one (mayConflict,
// asked only then: an update, or a patch that states the resourceVersion it read or is a
// server-side apply): a plain merge patch never conflicts, and a 409 to
// one with a uid precondition says the object was replaced, which a
// correct controller rightly takes as "gone" and waits for the new
// object's events that an injected error never brings; writes
// outside the case's namespace go through, and so do lease renewals and
// Events (see aimed): refusing a leader's renewals for seconds would end
// its leadership, and a correct operator exits then.
func (f *Faults) refusal(verb, namespace string, gr schema.GroupResource, sub, name string, mayConflict func() bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case namespace != f.opts.Namespace:
		if f.opts.IsCaseNamespace(namespace) {
			f.noteForeign(verb + " " + gr.Resource + " in " + namespace)
		}
		return nil
	case !f.aimed(namespace, gr), !f.failMatch.Matches(verb, withSubresource(gr.Resource, sub)):
		return nil
	case f.failErr == faults.Conflict && !mayConflict():
		return nil
	case f.failLeft > 0:
		f.failLeft--
	case time.Now().Before(f.failUntil):
	default:
		return nil
	}
	switch f.failErr {
	case faults.Conflict:
		return apierrors.NewConflict(gr, name, errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	case faults.TooManyRequests:
		return apierrors.NewTooManyRequests("the server has received too many requests and has asked us to try again later", 1)
	case faults.Timeout:
		return apierrors.NewTimeoutError("request did not complete within the allowed duration", 1)
	default:
		return apierrors.NewInternalError(errors.New("an error injected by kubeprop"))
	}
}

// maxForeign bounds the foreign writes a case lists: a few name the
// problem.
const maxForeign = 10

// noteForeign records a write into another case's namespace; f.mu held.
func (f *Faults) noteForeign(write string) {
	if len(f.foreign) < maxForeign && !slices.Contains(f.foreign, write) {
		f.foreign = append(f.foreign, write)
	}
}

// ForeignWrites are the controller's writes seen in other cases'
// namespaces, "verb resource in namespace", each once, the first few.
func (f *Faults) ForeignWrites() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.foreign)
}

// aimed reports whether a write is of the controller's own kinds or
// their children, where a crash matters: in the case's namespace, and
// neither a lease renewal (leader election) nor an Event.
func (f *Faults) aimed(namespace string, gr schema.GroupResource) bool {
	switch {
	case namespace != f.opts.Namespace:
		return false
	case gr.Resource == "leases" && gr.Group == "coordination.k8s.io", gr.Resource == "events" && (gr.Group == "" || gr.Group == "events.k8s.io"):
		return false
	}
	return true
}

// wrote counts a write that went through (resource with its
// subresource: "podsets/status"); it reports whether the controller dies
// of it. Writes in the case's namespace count: an unnamed crash counts the
// aimed ones only (leases and Events are renewed all the time, and a crash
// after one is no crash between two writes of the controller's own); a
// crash named by its resource counts that resource's writes, a lease's
// too.
func (f *Faults) wrote(verb, namespace string, gr schema.GroupResource, sub string) bool {
	resource := withSubresource(gr.Resource, sub)
	aimed := f.aimed(namespace, gr)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.crashLeft == 0 || namespace != f.opts.Namespace || !aimed && f.crashMatch.Resource == "" {
		return false
	}
	f.crashSeen[verb+" "+resource]++
	if !f.crashMatch.Matches(verb, resource) {
		return false
	}
	f.crashLeft--
	if f.crashLeft > 0 {
		return false
	}
	if f.crashNamed != nil {
		f.crashNamed(faults.CrashAfterWriteStep{Verb: verb, Resource: resource, Writes: f.crashSeen[verb+" "+resource]})
	}
	return true
}

// withSubresource is how a CrashAfterWrite names a resource.
func withSubresource(resource, sub string) string {
	if sub == "" {
		return resource
	}
	return resource + "/" + sub
}

// Undelivered counts the watch chunks held back now: the controller has
// events coming, so it is not idle.
func (f *Faults) Undelivered() int64 { return f.undelivered.Load() }

// SinceHeldDelivery is the time since a watch chunk held back was last
// delivered; long ago when none was.
func (f *Faults) SinceHeldDelivery() time.Duration {
	at := f.heldDelivered.Load()
	if at == 0 {
		return time.Duration(math.MaxInt64)
	}
	return time.Since(time.Unix(0, at))
}

// watchDelayNow is the delay in force for the watches of resource.
func (f *Faults) watchDelayNow(resource string) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Now().Before(f.watchUntil) && (f.watchOf == "" || f.watchOf == resource) {
		return f.watchDelay
	}
	return 0
}

// Watched are the resources the controller has watched, sorted.
func (f *Faults) Watched() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.watched))
}

// Client wraps the client of one in-process controller instance
// (controller-runtime's client interceptor).
func (f *Faults) Client(inst *Instance, c client.WithWatch) client.WithWatch {
	write := func(verb, sub string, obj any, mayConflict func() bool, do func() error) error {
		if inst.Dead.Load() {
			return ErrCrashed
		}
		gr, ns, name := f.describe(obj)
		if err := f.refusal(verb, ns, gr, sub, name, mayConflict); err != nil {
			var status apierrors.APIStatus
			errors.As(err, &status) // every refusal is an API status
			code := int(status.Status().Code)
			f.opts.Refused(properties.Request{
				At: time.Now(), UserAgent: UserAgentInjected,
				Verb: verb, Resource: gr.Resource, Subresource: sub, Name: name, Code: code,
			})
			return err
		}
		err := do()
		if err == nil && f.wrote(verb, ns, gr, sub) {
			inst.Dead.Store(true)
			f.opts.Crashed()
		}
		return err
	}
	read := func(do func() error) error {
		if inst.Dead.Load() {
			return ErrCrashed
		}
		return do()
	}
	return interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			return read(func() error { return c.Get(ctx, key, obj, opts...) })
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			return read(func() error { return c.List(ctx, list, opts...) })
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return write("create", "", obj, never, func() error { return c.Create(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return write("update", "", obj, always, func() error { return c.Update(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return write("patch", "", obj, func() bool { return lockedPatch(obj, patch) }, func() error { return c.Patch(ctx, obj, patch, opts...) })
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			return write("patch", "", obj, always, func() error { return c.Apply(ctx, obj, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return write("delete", "", obj, never, func() error { return c.Delete(ctx, obj, opts...) })
		},
		DeleteAllOf: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteAllOfOption) error {
			return write("deletecollection", "", obj, never, func() error { return c.DeleteAllOf(ctx, obj, opts...) })
		},
		SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceCreateOption) error {
			return write("create", sub, obj, never, func() error { return c.SubResource(sub).Create(ctx, obj, subObj, opts...) })
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			return write("update", sub, obj, always, func() error { return c.SubResource(sub).Update(ctx, obj, opts...) })
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			return write("patch", sub, obj, func() bool { return lockedPatch(obj, patch) }, func() error { return c.SubResource(sub).Patch(ctx, obj, patch, opts...) })
		},
		SubResourceApply: func(ctx context.Context, c client.Client, sub string, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
			return write("patch", sub, obj, always, func() error { return c.SubResource(sub).Apply(ctx, obj, opts...) })
		},
	})
}

// describe names the resource and object a write is for.
func (f *Faults) describe(obj any) (gr schema.GroupResource, namespace, name string) {
	var gvk schema.GroupVersionKind
	switch o := obj.(type) {
	case client.Object:
		gvk, _ = apiutil.GVKForObject(o, f.opts.Scheme)
		namespace, name = o.GetNamespace(), o.GetName()
	default:
		// An apply configuration: its apiVersion, kind and metadata are
		// fields.
		if m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj); err == nil {
			u := unstructured.Unstructured{Object: m}
			gvk, namespace, name = u.GroupVersionKind(), u.GetNamespace(), u.GetName()
		}
	}
	if m, err := f.opts.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
		return m.Resource.GroupResource(), namespace, name
	}
	return schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, namespace, name
}

// WrapTransport serves the reads of a controller instance's connections:
// its watch streams (its informers') delayed or cut by the watch faults,
// its reads answered from a stale view while it has one (ServeStale).
func (f *Faults) WrapTransport(inst *Instance) func(http.RoundTripper) http.RoundTripper {
	f.mu.Lock()
	f.instances[inst] = true
	f.mu.Unlock()
	return func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if rv, _, stale := inst.staleNow(); stale {
				if resp, handled, err := inst.serveStale(rt, req, rv); handled {
					return resp, err
				}
			}
			resp, err := rt.RoundTrip(req)
			if err == nil && resp.StatusCode < 300 {
				f.noteAct(req)
			}
			if err != nil || req.URL.Query().Get("watch") == "" || req.URL.Query().Get("watch") == "false" {
				return resp, err
			}
			resp.Body = f.delayed(resp.Body, inst, watchedResource(req))
			return resp, nil
		})
	}
}

// watchedResource is the resource a watch is of ("pods"), read as the
// API server reads its path.
func watchedResource(req *http.Request) string {
	if info, err := requestInfos.NewRequestInfo(req); err == nil && info.IsResourceRequest {
		return info.Resource
	}
	return ""
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// delayedBody passes a watch stream on, each chunk no sooner than the
// watch delay in force after it arrived, nor before its instance's stale
// view ends: order is kept, events are late.
// Two goroutines per stream, receive and deliver, both end when the
// stream ends, is cut or is closed.
type delayedBody struct {
	f        *Faults
	inst     *Instance
	resource string // what it watches: "pods"
	src      io.ReadCloser
	out      *io.PipeReader
	in       *io.PipeWriter
	cutOnce  sync.Once
	cutCh    chan struct{}

	mu        sync.Mutex
	pending   []watchChunk  // received, not delivered yet
	arrived   chan struct{} // signalled (capacity 1) when pending grows
	delivered bool          // deliver has ended: nothing more is queued
}

type watchChunk struct {
	at   time.Time
	data []byte
	err  error // the stream's end
}

func (f *Faults) delayed(src io.ReadCloser, inst *Instance, resource string) *delayedBody {
	out, in := io.Pipe()
	b := &delayedBody{f: f, inst: inst, resource: resource, src: src, out: out, in: in, cutCh: make(chan struct{}), arrived: make(chan struct{}, 1)}
	f.mu.Lock()
	f.watches[b] = true
	if resource != "" {
		f.watched[resource] = true
	}
	f.mu.Unlock()
	go b.receive()
	go b.deliver()
	return b
}

// receive queues what the stream brings, each chunk in a slice of its own
// size (a watch event is often a few hundred bytes of a 32 KiB read).
func (b *delayedBody) receive() {
	buf := make([]byte, 32<<10)
	for {
		n, err := b.src.Read(buf)
		if n > 0 {
			b.push(watchChunk{at: time.Now(), data: bytes.Clone(buf[:n])})
		}
		if err != nil {
			b.push(watchChunk{at: time.Now(), err: err})
			return
		}
	}
}

// push queues a chunk for deliver, unless deliver has ended.
func (b *delayedBody) push(c watchChunk) {
	b.mu.Lock()
	if b.delivered {
		b.mu.Unlock()
		return
	}
	if c.err == nil {
		b.f.undelivered.Add(1)
	}
	b.pending = append(b.pending, c)
	b.mu.Unlock()
	select {
	case b.arrived <- struct{}{}:
	default:
	}
}

// next waits for the oldest pending chunk; false once the stream is cut.
func (b *delayedBody) next() (watchChunk, bool) {
	for {
		b.mu.Lock()
		if len(b.pending) > 0 {
			c := b.pending[0]
			b.pending[0] = watchChunk{}
			b.pending = b.pending[1:]
			b.mu.Unlock()
			return c, true
		}
		b.mu.Unlock()
		select {
		case <-b.arrived:
		case <-b.cutCh:
			return watchChunk{}, false
		}
	}
}

func (b *delayedBody) deliver() {
	// Chunks dropped with a cut stream are no longer coming; a stream that
	// ended is no longer open.
	defer func() {
		b.f.mu.Lock()
		delete(b.f.watches, b)
		b.f.mu.Unlock()
		b.mu.Lock()
		b.delivered = true
		for _, c := range b.pending {
			if c.err == nil {
				b.f.undelivered.Add(-1)
			}
		}
		b.pending = nil
		b.mu.Unlock()
	}()
	for {
		c, ok := b.next()
		if !ok {
			return
		}
		held := false
		for time.Since(c.at) < b.f.watchDelayNow(b.resource) || c.at.Before(b.inst.heldUntil()) {
			held = true
			select {
			case <-b.cutCh:
				if c.err == nil {
					b.f.undelivered.Add(-1)
				}
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		if c.err != nil {
			b.in.CloseWithError(c.err)
			return
		}
		_, err := b.in.Write(c.data)
		if held {
			now := time.Now()
			if last := b.f.heldDelivered.Swap(now.UnixNano()); now.Sub(time.Unix(0, last)) >= deliveredEvery {
				b.f.opts.Delivered(now)
			}
		}
		b.f.undelivered.Add(-1)
		if err != nil {
			return
		}
	}
}

// cut ends the stream as a dropped connection does.
func (b *delayedBody) cut() {
	b.cutOnce.Do(func() {
		close(b.cutCh)
		b.in.CloseWithError(io.ErrUnexpectedEOF)
		_ = b.src.Close()
		b.f.mu.Lock()
		delete(b.f.watches, b)
		b.f.mu.Unlock()
	})
}

func (b *delayedBody) Read(p []byte) (int, error) { return b.out.Read(p) }

func (b *delayedBody) Close() error {
	b.cut()
	return b.out.Close()
}

// WrapWrites injects the write faults (API errors, the crash after a
// write) at the HTTP level, for controllers whose client the harness does
// not build: Func's and Process's. inst is the controller instance the
// connection is for.
func (f *Faults) WrapWrites(inst *Instance) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if inst.Dead.Load() {
				return nil, ErrCrashed
			}
			info, ok := writeOf(req)
			if !ok {
				return rt.RoundTrip(req)
			}
			verb, gr, ns, name, sub := info.Verb, schema.GroupResource{Group: info.APIGroup, Resource: info.Resource}, info.Namespace, info.Name, info.Subresource
			mayConflict := func() bool { return verb == "update" || verb == "patch" && lockedPatchRequest(req) }
			if err := f.refusal(verb, ns, gr, sub, name, mayConflict); err != nil {
				var status apierrors.APIStatus
				errors.As(err, &status) // every refusal is an API status
				f.opts.Refused(properties.Request{
					At: time.Now(), UserAgent: UserAgentInjected,
					Verb: verb, Resource: gr.Resource, Subresource: sub, Name: name, Code: int(status.Status().Code),
				})
				return statusResponse(req, status.Status()), nil
			}
			resp, err := rt.RoundTrip(req)
			if err == nil && resp.StatusCode < 300 && f.wrote(verb, ns, gr, sub) {
				inst.Dead.Store(true)
				if inst.Kill != nil {
					inst.Kill()
				}
				f.opts.Crashed()
			}
			return resp, err
		})
	}
}

// requestInfos reads API request paths as the API server does.
var requestInfos = &apirequest.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")}

// writeOf reads a write request of an API resource as the API server
// does: its verb (create, update, patch, delete, deletecollection), group,
// resource, namespace, name and subresource; ok is false for a read or a
// request that is not of a resource. A namespace object's own namespace
// is left empty: writing a namespace is no write in it.
func writeOf(req *http.Request) (info *apirequest.RequestInfo, ok bool) {
	info, err := requestInfos.NewRequestInfo(req)
	if err != nil || !info.IsResourceRequest {
		return nil, false
	}
	switch info.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
	default:
		return nil, false
	}
	if info.Resource == "namespaces" {
		info.Namespace = ""
	}
	return info, true
}

// statusResponse is the API server's answer with an error status.
func statusResponse(req *http.Request, status metav1.Status) *http.Response {
	status.APIVersion, status.Kind = "v1", "Status"
	body, _ := json.Marshal(status)
	return &http.Response{
		StatusCode: int(status.Code), Status: fmt.Sprintf("%d %s", status.Code, http.StatusText(int(status.Code))),
		Header: http.Header{"Content-Type": []string{"application/json"}},
		Body:   io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)),
		Request: req, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
	}
}

// always and never answer whether a write may meet a conflict, for the
// writes whose kind decides.
func always() bool { return true }
func never() bool  { return false }

// lockedPatch reports whether a patch can meet a conflict: a server-side
// apply, or a patch whose body states a resourceVersion (controller-
// runtime's MergeFromWithOptimisticLock).
func lockedPatch(obj client.Object, patch client.Patch) bool {
	if patch.Type() == types.ApplyPatchType {
		return true
	}
	body, err := patch.Data(obj)
	return err == nil && statesResourceVersion(body)
}

// lockedPatchRequest is lockedPatch for a PATCH request; its body is
// read and put back.
func lockedPatchRequest(req *http.Request) bool {
	if strings.HasPrefix(req.Header.Get("Content-Type"), string(types.ApplyPatchType)) {
		return true
	}
	if req.Body == nil || req.Body == http.NoBody {
		return false
	}
	body, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	req.Body = io.NopCloser(bytes.NewReader(body))
	return err == nil && statesResourceVersion(body)
}

// statesResourceVersion reports whether a patch body sets or tests
// metadata.resourceVersion: a merge or strategic patch's field, or a JSON
// patch's operation on its path.
func statesResourceVersion(body []byte) bool {
	var merge struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if json.Unmarshal(body, &merge) == nil {
		return merge.Metadata.ResourceVersion != ""
	}
	var ops []jsonPatchOp
	return json.Unmarshal(body, &ops) == nil && slices.ContainsFunc(ops, func(op jsonPatchOp) bool {
		return op.Path == "/metadata/resourceVersion"
	})
}

// jsonPatchOp is the part of a JSON patch operation statesResourceVersion
// reads.
type jsonPatchOp struct {
	Path string `json:"path"`
}
