package record

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/kubeprop/kubeprop/properties"
)

// Recorder builds one case's trace: the states and field writes of the
// watched objects, the controller's reconciles, its panics and execs, and
// the events (fault steps, user changes) it is told of.
type Recorder struct {
	mu      sync.Mutex
	start   time.Time
	healed  time.Time
	objects map[string]*unstructured.Unstructured // by kind/name, as they arrived
	// resources are the watched kinds' API resources (Pod: pods), to
	// find the requests that wrote an object.
	resources map[string]string
	changes   []change                              // in resource-version order
	seen      map[string]uint64                     // by kind/name, the newest resource version of a change seen
	states    []properties.State                    // after each of changes, built lazily
	built     map[string]*unstructured.Unstructured // the objects after states
	memo      properties.Memo                       // the traces' memo

	writes     []properties.Write
	reconciles []properties.Reconcile
	panics     []properties.Panic
	execs      []properties.Exec
	events     []properties.Event
	lastWrite  time.Time
	inflight   map[string]*inflightReconcile // by controller/key
	added      map[string]bool               // keys added for news since their last reconcile began
	queues     []Queue
	opts       Options
	clock      clock.PassiveClock
	restarting int                  // controller restarts under way
	injected   []properties.Request // requests the harness refused itself
	factory    dynamicinformer.DynamicSharedInformerFactory
	stop       chan struct{}
	// What Watch watches, for CatchUp's lists.
	client    dynamic.Interface
	namespace string
	watched   []schema.GroupVersionResource
}

// Options configure a Recorder. Zero values take the defaults.
type Options struct {
	// TimeScale is the cluster's time scale, for the trace (properties
	// judge cluster time). Zero means 1.
	TimeScale float64
	// Controller is the API user the controller under test runs as, for
	// the trace.
	Controller string
	// FaultManagers are the field managers of fault injectors: a write by
	// one of them is an event that drives what follows (a fight it starts
	// is no fight loop).
	FaultManagers []string
	// Clock stamps what the recorder sees. Nil means the real clock.
	Clock clock.PassiveClock
}

// Outcome is how a reconcile ended, as its controller's queue tells it.
type Outcome int

const (
	// OutcomeDone: forgotten, or left for the next event.
	OutcomeDone Outcome = iota
	// OutcomeRateLimited: requeued with back-off (an error, or Requeue).
	OutcomeRateLimited
	// OutcomeRequeueAfter: requeued after a delay (RequeueAfter).
	OutcomeRequeueAfter
)

// Queue is a controller's work queue, as Idle sees it.
type Queue interface {
	// Pending reports whether items wait for a reconcile; a stopped
	// controller's queue keeps its items, but none of them is pending.
	Pending() bool
}

type inflightReconcile struct {
	at      time.Time
	outcome Outcome
	after   time.Duration
	news    bool
}

// New returns a recorder whose case starts now.
func New(opts Options) *Recorder {
	if opts.TimeScale == 0 {
		opts.TimeScale = 1
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Recorder{
		opts:      opts,
		clock:     opts.Clock,
		start:     opts.Clock.Now(),
		objects:   map[string]*unstructured.Unstructured{},
		resources: map[string]string{},
		seen:      map[string]uint64{},
		inflight:  map[string]*inflightReconcile{},
		added:     map[string]bool{},
		stop:      make(chan struct{}),
	}
}

// Watch starts observing the resources in namespace and returns when their
// first lists are in.
func (r *Recorder) Watch(ctx context.Context, client dynamic.Interface, namespace string, resources []schema.GroupVersionResource) error {
	r.client, r.namespace, r.watched = client, namespace, resources
	r.factory = dynamicinformer.NewFilteredDynamicSharedInformerFactory(client, 0, namespace, nil)
	for _, gvr := range resources {
		inf := r.factory.ForResource(gvr).Informer()
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { r.observe(gvr.Resource, nil, obj) },
			UpdateFunc: func(old, obj any) { r.observe(gvr.Resource, old, obj) },
			DeleteFunc: func(obj any) { r.observeDelete(obj) },
		}); err != nil {
			return fmt.Errorf("watching %s: %w", gvr.Resource, err)
		}
	}
	r.factory.Start(r.stop)
	syncCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for gvr, ok := range r.factory.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			return fmt.Errorf("listing %s did not finish within 30 s", gvr.Resource)
		}
	}
	return nil
}

// Close stops watching.
func (r *Recorder) Close() {
	close(r.stop)
	if r.factory != nil {
		r.factory.Shutdown()
	}
}

func objectKey(u *unstructured.Unstructured) string { return u.GetKind() + "/" + u.GetName() }

func (r *Recorder) observe(resource string, oldObj, obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	now := r.clock.Now()
	var old *unstructured.Unstructured
	if o, ok := oldObj.(*unstructured.Unstructured); ok {
		old = o
	}
	writes := fieldWrites(old, u, now)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.objects[objectKey(u)] = u
	r.resources[u.GetKind()] = resource
	r.record(now, u, false)
	for _, w := range writes {
		if slices.Contains(r.opts.FaultManagers, w.Manager) {
			r.events = append(r.events, properties.Event{At: now, Kind: properties.FaultEvent, Name: "write by " + w.Manager})
		}
	}
	r.writes = append(r.writes, writes...)
	if len(writes) > 0 {
		r.lastWrite = now
	}
}

func (r *Recorder) observeDelete(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	now := r.clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.objects, objectKey(u))
	r.record(now, u, true)
	r.writes = append(r.writes, properties.Write{At: now, Manager: properties.ManagerDeleted, Kind: u.GetKind(), Name: u.GetName(), UID: u.GetUID(), GenerateName: u.GetGenerateName(), Field: "metadata"})
	r.lastWrite = now
}

// change is one observed change of one object; obj is nil when deleted.
type change struct {
	rv  uint64
	at  time.Time
	key string
	obj *unstructured.Unstructured
}

// record files a change in resource-version order. Each resource has its
// own watch stream, so a pod's change and its owner's can arrive in the
// opposite order to the one they were written in; resource versions are
// the API server's (etcd's) order of writes, and states follow it. r.mu
// is held.
func (r *Recorder) record(at time.Time, u *unstructured.Unstructured, deleted bool) {
	c := change{at: at, key: objectKey(u), obj: u}
	if deleted {
		c.obj = nil
	}
	rv, err := strconv.ParseUint(u.GetResourceVersion(), 10, 64)
	if err != nil && len(r.changes) > 0 {
		rv = r.changes[len(r.changes)-1].rv
	}
	c.rv = rv
	r.seen[c.key] = max(r.seen[c.key], rv)
	i := len(r.changes)
	for i > 0 && r.changes[i-1].rv > rv {
		i--
	}
	r.changes = slices.Insert(r.changes, i, c)
	if i < len(r.states) {
		r.states, r.built = r.states[:i], nil // rebuilt from there by buildStates
	}
}

// buildStates brings the states up to the changes. r.mu is held.
func (r *Recorder) buildStates() {
	if r.built == nil {
		r.built = map[string]*unstructured.Unstructured{}
		if n := len(r.states); n > 0 {
			for _, o := range r.states[n-1].Objects {
				r.built[objectKey(o)] = o
			}
		}
	}
	for _, c := range r.changes[len(r.states):] {
		if c.obj == nil {
			delete(r.built, c.key)
		} else {
			r.built[c.key] = c.obj
		}
		objs := make([]*unstructured.Unstructured, 0, len(r.built))
		for _, o := range r.built {
			objs = append(objs, o)
		}
		sort.Slice(objs, func(i, j int) bool { return objectKey(objs[i]) < objectKey(objs[j]) })
		at := c.at
		if n := len(r.states); n > 0 && r.states[n-1].At.After(at) {
			at = r.states[n-1].At // times stay in order
		}
		r.states = append(r.states, properties.State{At: at, Objects: objs})
	}
}

// ResourceVersionAt is the resource version the case's watches had seen
// at t: the newest of the changes observed by then, or, before the first,
// the one just before it. Resource versions are etcd's revisions, one
// order for every object: the cluster as it was then.
func (r *Recorder) ResourceVersionAt(t time.Time) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var rv uint64
	for _, c := range r.changes {
		if !c.at.After(t) {
			rv = max(rv, c.rv)
		}
	}
	if rv == 0 && len(r.changes) > 0 {
		first := r.changes[0].rv
		for _, c := range r.changes {
			first = min(first, c.rv)
		}
		rv = max(first, 2) - 1
	}
	return rv
}

// Event records a step applied, a user change, a delivery held back, or
// a fresh start of the controller.
func (r *Recorder) Event(e properties.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// Heal records when the case's faults were healed.
func (r *Recorder) Heal(at time.Time) {
	r.mu.Lock()
	r.healed = at
	r.mu.Unlock()
}

// AddQueue adds a controller's queue to those Idle looks at.
func (r *Recorder) AddQueue(q Queue) {
	r.mu.Lock()
	r.queues = append(r.queues, q)
	r.mu.Unlock()
}

// Added: key was added to the controller's queue for an event (not a
// retry): its next reconcile answers news.
func (r *Recorder) Added(controller, key string) {
	r.mu.Lock()
	r.added[controller+"\x00"+key] = true
	r.mu.Unlock()
}

// ReconcileStarted: the controller took key from its queue.
func (r *Recorder) ReconcileStarted(controller, key string) {
	r.mu.Lock()
	id := controller + "\x00" + key
	r.inflight[id] = &inflightReconcile{at: r.clock.Now(), news: r.added[id]}
	delete(r.added, id)
	r.mu.Unlock()
}

// ReconcileOutcome: the reconcile of key under way asked for o; after is
// its RequeueAfter, or the delay its rate limiter gave its retry.
func (r *Recorder) ReconcileOutcome(controller, key string, o Outcome, after time.Duration) {
	r.mu.Lock()
	if in := r.inflight[controller+"\x00"+key]; in != nil {
		in.outcome, in.after = o, after
	}
	r.mu.Unlock()
}

// ReconcileDone ends a reconcile; it is recorded unless record is false
// (the reconcile of a controller instance killed mid-way).
func (r *Recorder) ReconcileDone(controller, key string, record bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	in := r.inflight[controller+"\x00"+key]
	if in == nil {
		return
	}
	delete(r.inflight, controller+"\x00"+key)
	if !record {
		return
	}
	rec := properties.Reconcile{At: in.at, Controller: controller, Key: key, News: in.news}
	switch in.outcome {
	case OutcomeRateLimited:
		rec.Err, rec.Requeue, rec.Backoff = "requeued with back-off", true, in.after
	case OutcomeRequeueAfter:
		rec.RequeueAfter = in.after
	}
	r.reconciles = append(r.reconciles, rec)
}

// Restart counts a controller restart under way (delta 1) or done (-1):
// the controller is not idle meanwhile.
func (r *Recorder) Restart(delta int) {
	r.mu.Lock()
	r.restarting += delta
	r.mu.Unlock()
}

// InjectedRequest records a request the harness answered itself (a
// refusal): the audit log never sees it. A refused write is activity: a
// controller retrying it is not quiet, though nothing changes, and a settle
// that ended under its retries would cut its failing streak short with the
// next step (a speed-dependent verdict: a slow machine fits fewer retries
// in SettleQuiet than an exponential back-off allows).
func (r *Recorder) InjectedRequest(req properties.Request) {
	r.mu.Lock()
	r.injected = append(r.injected, req)
	r.lastWrite = r.clock.Now()
	r.mu.Unlock()
}

// Execed records a command run in one of the case's containers.
func (r *Recorder) Execed(e properties.Exec) {
	r.mu.Lock()
	r.execs = append(r.execs, e)
	r.mu.Unlock()
}

// execsBy names who asked for each exec: the user of the earliest pods/exec
// request of the same pod, received before it, not matched to an earlier
// exec. The log has an exec once it ended: until then, User is empty.
func execsBy(execs []properties.Exec, requests []properties.Request) []properties.Exec {
	out := slices.Clone(execs)
	used := map[int]bool{}
	for i := range out {
		for j, req := range requests {
			if !used[j] && req.Subresource == "exec" && req.Name == out[i].Pod && !req.At.After(out[i].At) {
				out[i].User, used[j] = req.User, true
				break
			}
		}
	}
	return out
}

// Panicked records a panic of the controller, with the stack of the
// caller.
func (r *Recorder) Panicked(value any) {
	r.mu.Lock()
	r.panics = append(r.panics, properties.Panic{At: r.clock.Now(), Value: fmt.Sprint(value), Stack: string(debug.Stack())})
	r.mu.Unlock()
}

// Panics counts the controller's panics (and exits) so far.
func (r *Recorder) Panics() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.panics)
}

// Exited records a controller process that ended on its own, as a panic
// whose stack is the end of its output.
func (r *Recorder) Exited(msg, output string) {
	r.mu.Lock()
	r.panics = append(r.panics, properties.Panic{At: r.clock.Now(), Value: msg, Stack: output})
	r.mu.Unlock()
}

// Idle reports whether the controller has nothing to do right now: no
// reconcile running and nothing queued.
func (r *Recorder) Idle() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.inflight) > 0 || r.restarting > 0 {
		return false
	}
	for _, q := range r.queues {
		if q.Pending() {
			return false
		}
	}
	return true
}

// Acted counts an action of the harness as activity: what it set off
// reaches the recorder's watches only later. A controller that writes
// only once its informers have synced (Func, Process: the harness does not
// see their queues) must not find the system settled before it has begun;
// a step's settle that ends before its effect shows (a loaded machine)
// lets the heal undo a fault that has not shown yet.
func (r *Recorder) Acted() {
	r.mu.Lock()
	r.lastWrite = r.clock.Now()
	r.mu.Unlock()
}

// SinceLastWrite is the time since the last change observed.
func (r *Recorder) SinceLastWrite() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.clock.Since(r.lastWrite)
}

// Current returns the objects now observed.
func (r *Recorder) Current() []*unstructured.Unstructured {
	r.mu.Lock()
	defer r.mu.Unlock()
	objs := make([]*unstructured.Unstructured, 0, len(r.objects))
	for _, o := range r.objects {
		objs = append(objs, o)
	}
	sort.Slice(objs, func(i, j int) bool { return objectKey(objs[i]) < objectKey(objs[j]) })
	return objs
}

// Trace returns the trace so far; requests come from the audit log
// (AuditReader).
func (r *Recorder) Trace(requests []properties.Request, final bool) *properties.Trace {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buildStates()
	return &properties.Trace{
		Start: r.start, Healed: r.healed, End: r.clock.Now(), Final: final,
		Controller: r.opts.Controller, TimeScale: r.opts.TimeScale,
		States:     append([]properties.State(nil), r.states...),
		Writes:     attributeUnknown(r.writes, requests, r.resources),
		Requests:   mergeRequests(requests, r.injected),
		Reconciles: append([]properties.Reconcile(nil), r.reconciles...),
		Panics:     append([]properties.Panic(nil), r.panics...),
		Events:     append([]properties.Event(nil), r.events...),
		Execs:      execsBy(r.execs, requests),
		Memo:       &r.memo,
	}
}

// attributeUnknown returns a copy of writes in which each write by
// ManagerUnknown is attributed to the field manager of the last successful
// write request of its object that the API server received before the
// change was seen. managedFields name no writer for a request that
// changes none of its own fields, such as a controller removing a label
// another writer set: the audit log does. resources maps kinds to their
// API resources. The audit log is in the order requests completed, not
// the order they were received: each object's writes are sorted first.
func attributeUnknown(writes []properties.Write, requests []properties.Request, resources map[string]string) []properties.Write {
	out := slices.Clone(writes)
	var byObject map[string][]properties.Request // by resource/name; resource/ for a deletecollection
	for i, w := range out {
		if w.Manager != properties.ManagerUnknown {
			continue
		}
		if byObject == nil {
			byObject = objectWrites(requests)
		}
		resource := resources[w.Kind]
		var by *properties.Request
		for _, key := range []string{resource + "/" + w.Name, resource + "/"} {
			reqs := byObject[key]
			n := sort.Search(len(reqs), func(j int) bool { return reqs[j].At.After(w.At) })
			if n > 0 && (by == nil || reqs[n-1].At.After(by.At)) {
				by = &reqs[n-1]
			}
		}
		if by != nil {
			out[i].Manager = by.FieldManager
		}
	}
	return out
}

// objectWrites files the successful writes among requests by the object
// they wrote (resource/name; resource/ for a deletecollection), each
// object's in the order they were received.
func objectWrites(requests []properties.Request) map[string][]properties.Request {
	out := map[string][]properties.Request{}
	for _, req := range requests {
		if !isObjectWrite(req) {
			continue
		}
		key := req.Resource + "/" + req.Name
		if req.Verb == "deletecollection" {
			key = req.Resource + "/"
		}
		out[key] = append(out[key], req)
	}
	for _, reqs := range out {
		sort.SliceStable(reqs, func(i, j int) bool { return reqs[i].At.Before(reqs[j].At) })
	}
	return out
}

// isObjectWrite reports whether a request is a successful write of an
// object by a field manager.
func isObjectWrite(req properties.Request) bool {
	if req.Code < 200 || req.Code >= 300 || req.FieldManager == "" {
		return false
	}
	switch req.Subresource {
	case "exec", "attach", "portforward", "proxy", "log":
		return false // reads the object's container or node, writes nothing of it
	}
	switch req.Verb {
	case "create", "update", "patch", "delete":
		return req.Name != ""
	case "deletecollection":
		return true
	}
	return false
}

// mergeRequests merges the audit log's requests and the refused ones,
// both in time order.
func mergeRequests(audit, injected []properties.Request) []properties.Request {
	if len(injected) == 0 {
		return audit
	}
	out := append(append(make([]properties.Request, 0, len(audit)+len(injected)), audit...), injected...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}
