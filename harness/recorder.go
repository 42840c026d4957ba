package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/properties"
)

// recorder builds a case's trace: the states and field writes of the
// watched objects, the controller's reconciles, its panics, and the steps
// applied.
type recorder struct {
	mu      sync.Mutex
	start   time.Time
	healed  time.Time
	objects map[string]*unstructured.Unstructured // by kind/name, as they arrived
	changes []change                              // in resource-version order
	states  []properties.State                    // after each of changes, built lazily
	built   map[string]*unstructured.Unstructured // the objects after states
	memo    properties.Memo                       // the traces' memo

	writes     []properties.Write
	reconciles []properties.Reconcile
	panics     []properties.Panic
	execs      []properties.Exec
	events     []properties.Event
	lastWrite  time.Time
	inflight   map[string]*inflightReconcile // by controller/key
	queues     []*recordingQueue
	timeScale  float64
	restarting int                  // controller restarts under way
	injected   []properties.Request // requests the harness refused itself
	factory    dynamicinformer.DynamicSharedInformerFactory
	stop       chan struct{}
}

type outcome int

const (
	outcomeDone outcome = iota
	outcomeRateLimited
	outcomeRequeueAfter
)

type inflightReconcile struct {
	at      time.Time
	outcome outcome
	after   time.Duration
}

// faultManagers are the field managers of fault injectors: a write by one
// of them is an event that drives what follows.
var faultManagers = map[string]bool{faults.ConflictingWriterManager: true}

func newRecorder(timeScale float64) *recorder {
	return &recorder{
		timeScale: timeScale,
		start:     time.Now(),
		objects:   map[string]*unstructured.Unstructured{},
		inflight:  map[string]*inflightReconcile{},
		stop:      make(chan struct{}),
	}
}

// watch starts observing the resources in namespace and returns when their
// first lists are in.
func (r *recorder) watch(ctx context.Context, client dynamic.Interface, namespace string, resources []schema.GroupVersionResource) error {
	r.factory = dynamicinformer.NewFilteredDynamicSharedInformerFactory(client, 0, namespace, nil)
	for _, gvr := range resources {
		inf := r.factory.ForResource(gvr).Informer()
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { r.observe(nil, obj) },
			UpdateFunc: func(old, obj any) { r.observe(old, obj) },
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

func (r *recorder) close() {
	close(r.stop)
	if r.factory != nil {
		r.factory.Shutdown()
	}
}

func objectKey(u *unstructured.Unstructured) string { return u.GetKind() + "/" + u.GetName() }

func (r *recorder) observe(oldObj, obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	now := time.Now()
	var old *unstructured.Unstructured
	if o, ok := oldObj.(*unstructured.Unstructured); ok {
		old = o
	}
	writes := fieldWrites(old, u, now)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.objects[objectKey(u)] = u
	r.record(now, u, false)
	for _, w := range writes {
		if faultManagers[w.Manager] {
			r.events = append(r.events, properties.Event{At: now, Kind: properties.FaultEvent, Name: "write by " + w.Manager})
		}
	}
	r.writes = append(r.writes, writes...)
	if len(writes) > 0 {
		r.lastWrite = now
	}
}

func (r *recorder) observeDelete(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.objects, objectKey(u))
	r.record(now, u, true)
	r.writes = append(r.writes, properties.Write{At: now, Manager: "(deleted)", Kind: u.GetKind(), Name: u.GetName(), Field: "metadata"})
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
func (r *recorder) record(at time.Time, u *unstructured.Unstructured, deleted bool) {
	c := change{at: at, key: objectKey(u), obj: u}
	if deleted {
		c.obj = nil
	}
	rv, err := strconv.ParseUint(u.GetResourceVersion(), 10, 64)
	if err != nil && len(r.changes) > 0 {
		rv = r.changes[len(r.changes)-1].rv
	}
	c.rv = rv
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
func (r *recorder) buildStates() {
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

// event records a step applied, or a user change.
func (r *recorder) event(s faults.Step, at time.Time) {
	kind := properties.FaultEvent
	if faults.IsUserChange(s) {
		kind = properties.UserEvent
	}
	r.mu.Lock()
	r.events = append(r.events, properties.Event{At: at, Kind: kind, Name: faults.Format(s)})
	r.mu.Unlock()
}

func (r *recorder) heal(at time.Time) {
	r.mu.Lock()
	r.healed = at
	r.mu.Unlock()
}

func (r *recorder) addQueue(q *recordingQueue) {
	r.mu.Lock()
	r.queues = append(r.queues, q)
	r.mu.Unlock()
}

func (r *recorder) reconcileStarted(controller, key string) {
	r.mu.Lock()
	r.inflight[controller+"\x00"+key] = &inflightReconcile{at: time.Now()}
	r.mu.Unlock()
}

func (r *recorder) reconcileOutcome(controller, key string, o outcome, after time.Duration) {
	r.mu.Lock()
	if in := r.inflight[controller+"\x00"+key]; in != nil {
		in.outcome, in.after = o, after
	}
	r.mu.Unlock()
}

// reconcileDone ends a reconcile; it is recorded unless record is false.
func (r *recorder) reconcileDone(controller, key string, record bool) {
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
	rec := properties.Reconcile{At: in.at, Controller: controller, Key: key}
	switch in.outcome {
	case outcomeRateLimited:
		rec.Err, rec.Requeue = "requeued with back-off", true
	case outcomeRequeueAfter:
		rec.RequeueAfter = in.after
	}
	r.reconciles = append(r.reconciles, rec)
}

// restart counts a controller restart under way (delta 1) or done (-1):
// the controller is not idle meanwhile.
func (r *recorder) restart(delta int) {
	r.mu.Lock()
	r.restarting += delta
	r.mu.Unlock()
}

func (r *recorder) injectedRequest(req properties.Request) {
	r.mu.Lock()
	r.injected = append(r.injected, req)
	r.mu.Unlock()
}

// execed records a command run in one of the case's containers.
func (r *recorder) execed(e properties.Exec) {
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

func (r *recorder) panicked(value any) {
	r.mu.Lock()
	r.panics = append(r.panics, properties.Panic{At: time.Now(), Value: fmt.Sprint(value), Stack: string(debug.Stack())})
	r.mu.Unlock()
}

// exited records a controller process that ended on its own, as a panic
// whose stack is the end of its output.
func (r *recorder) exited(msg, output string) {
	r.mu.Lock()
	r.panics = append(r.panics, properties.Panic{At: time.Now(), Value: msg, Stack: output})
	r.mu.Unlock()
}

// idle reports whether the controller has nothing to do right now: no
// reconcile running and nothing queued.
func (r *recorder) idle() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.inflight) > 0 || r.restarting > 0 {
		return false
	}
	for _, q := range r.queues {
		if !q.shut.Load() && q.Len() > 0 {
			return false
		}
	}
	return true
}

// controllerStarted counts a controller's start as activity: one that
// writes only once its informers have synced (Func, Process: the harness
// does not see their queues) must not find the system settled before it
// has begun.
func (r *recorder) controllerStarted() {
	r.mu.Lock()
	r.lastWrite = time.Now()
	r.mu.Unlock()
}

func (r *recorder) sinceLastWrite() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return time.Since(r.lastWrite)
}

// current returns the objects now observed.
func (r *recorder) current() []*unstructured.Unstructured {
	r.mu.Lock()
	defer r.mu.Unlock()
	objs := make([]*unstructured.Unstructured, 0, len(r.objects))
	for _, o := range r.objects {
		objs = append(objs, o)
	}
	sort.Slice(objs, func(i, j int) bool { return objectKey(objs[i]) < objectKey(objs[j]) })
	return objs
}

// trace returns the trace so far; requests come from the audit log.
func (r *recorder) trace(requests []properties.Request, final bool) *properties.Trace {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buildStates()
	return &properties.Trace{
		Start: r.start, Healed: r.healed, End: time.Now(), Final: final,
		Controller: UserController, TimeScale: r.timeScale,
		States:     append([]properties.State(nil), r.states...),
		Writes:     append([]properties.Write(nil), r.writes...),
		Requests:   mergeRequests(requests, r.injected),
		Reconciles: append([]properties.Reconcile(nil), r.reconciles...),
		Panics:     append([]properties.Panic(nil), r.panics...),
		Events:     append([]properties.Event(nil), r.events...),
		Execs:      execsBy(r.execs, requests),
		Memo:       &r.memo,
	}
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

// fieldWrites diffs two versions of an object field by field and names,
// from managedFields, the manager that owns each changed field.
func fieldWrites(old, obj *unstructured.Unstructured, at time.Time) []properties.Write {
	before := map[string]string{}
	if old != nil {
		flatten(old.Object, nil, before)
	}
	after := map[string]string{}
	flatten(obj.Object, nil, after)
	var paths []string
	for p, v := range after {
		if before[p] != v {
			paths = append(paths, p)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	managed := obj.GetManagedFields()
	writer := latestWriter(old, obj)
	if _, bound := after["spec.nodeName"]; writer == "(unknown)" && bound && before["spec.nodeName"] == "" {
		// The binding subresource sets a pod's node and PodScheduled
		// condition without a managedFields entry.
		writer = ManagerBinding
	}
	var out []properties.Write
	for _, p := range paths {
		// A field that no manager holds (one removed, or one the API
		// server defaulted) is the doing of this change's writer.
		m := owner(managed, p)
		if m == "" {
			m = writer
		}
		out = append(out, properties.Write{
			At: at, Manager: m, Kind: obj.GetKind(), Name: obj.GetName(), GenerateName: obj.GetGenerateName(), Field: p, Value: after[p],
		})
	}
	return out
}

// ManagerBinding is the writer the trace names for a pod's binding to a
// node (by the scheduler), which managedFields do not record.
const ManagerBinding = "(binding)"

// latestWriter names the manager whose managedFields entry this change
// added or touched (the most recent, if several), or "(unknown)".
func latestWriter(old, obj *unstructured.Unstructured) string {
	before := map[string]bool{}
	if old != nil {
		for _, e := range old.GetManagedFields() {
			before[managedEntryKey(e)] = true
		}
	}
	if m := latestManager(obj.GetManagedFields(), func(e metav1.ManagedFieldsEntry) bool { return !before[managedEntryKey(e)] }); m != "" {
		return m
	}
	return "(unknown)"
}

// latestManager returns the manager of the most recent entry that match
// accepts, or "" if none does.
func latestManager(entries []metav1.ManagedFieldsEntry, match func(metav1.ManagedFieldsEntry) bool) string {
	best, bestTime := "", time.Time{}
	for _, e := range entries {
		if !match(e) {
			continue
		}
		var t time.Time
		if e.Time != nil {
			t = e.Time.Time
		}
		if best == "" || !t.Before(bestTime) {
			best, bestTime = e.Manager, t
		}
	}
	return best
}

func managedEntryKey(e metav1.ManagedFieldsEntry) string {
	key := e.Manager + "\x00" + string(e.Operation) + "\x00" + e.Subresource
	if e.Time != nil {
		key += "\x00" + e.Time.UTC().String()
	}
	if e.FieldsV1 != nil {
		key += "\x00" + string(e.FieldsV1.Raw)
	}
	return key
}

// recordedRoots are the parts of an object whose fields are recorded; the
// rest of metadata is the API server's bookkeeping.
var recordedRoots = map[string]bool{"spec": true, "status": true, "data": true}
var recordedMetadata = map[string]bool{"labels": true, "annotations": true, "finalizers": true, "ownerReferences": true, "deletionTimestamp": true}

// flatten writes an object's leaf fields as path -> JSON value. Lists of
// objects keyed by "type" or "name" (conditions, containers) are followed
// by key: status.conditions[type=Ready].status; other lists are leaves.
func flatten(v any, path []string, out map[string]string) {
	if len(path) == 1 && !recordedRoots[path[0]] && path[0] != "metadata" {
		return
	}
	if len(path) == 2 && path[0] == "metadata" && !recordedMetadata[elemName(path[1])] {
		return
	}
	switch x := v.(type) {
	case map[string]any:
		for k, child := range x {
			if strings.ContainsAny(k, ".[]") && len(path) > 0 {
				// A key with dots (a label or annotation such as
				// app.kubernetes.io/name) goes in brackets, as field paths
				// of faults write it: metadata.labels[app.kubernetes.io/name].
				keyed := append([]string(nil), path...)
				keyed[len(keyed)-1] += "[" + k + "]"
				flatten(child, keyed, out)
				continue
			}
			flatten(child, append(path, k), out)
		}
		return
	case []any:
		if key := listKey(x); key != "" && len(path) > 0 {
			for _, item := range x {
				m := item.(map[string]any)
				elem := fmt.Sprintf("%s[%s=%v]", path[len(path)-1], key, m[key])
				flatten(m, append(append([]string(nil), path[:len(path)-1]...), elem), out)
			}
			return
		}
	}
	if len(path) == 0 {
		return
	}
	b, _ := json.Marshal(v)
	out[strings.Join(path, ".")] = string(b)
}

// listKey returns the field that keys a list of objects, as the API's
// list-map keys do: "type" (conditions), "uid" (ownerReferences) or "name"
// (containers), when every item has it.
func listKey(items []any) string {
	for _, key := range []string{"type", "uid", "name"} {
		ok := len(items) > 0
		for _, item := range items {
			m, isMap := item.(map[string]any)
			if !isMap || m[key] == nil {
				ok = false
				break
			}
		}
		if ok {
			return key
		}
	}
	return ""
}

// owner returns the manager whose managedFields entry holds the field at
// path, the most recent one if several do; "" if none does.
func owner(entries []metav1.ManagedFieldsEntry, path string) string {
	return latestManager(entries, func(e metav1.ManagedFieldsEntry) bool {
		var set map[string]any
		return e.FieldsV1 != nil && json.Unmarshal(e.FieldsV1.Raw, &set) == nil && fieldsHave(set, path)
	})
}

// fieldsHave reports whether a FieldsV1 set holds path, or a prefix of it
// (a manager that set a whole list or map owns what is inside).
func fieldsHave(set map[string]any, path string) bool {
	node := set
	for _, elem := range splitPath(path) {
		name, keys := elemName(elem), elemKeys(elem)
		steps := append([]string{"f:" + name}, make([]string, len(keys))...)
		for i, key := range keys {
			if k, v, isItem := strings.Cut(key, "="); isItem {
				keyJSON, _ := json.Marshal(map[string]string{k: v})
				steps[i+1] = "k:" + string(keyJSON) // a list item by its key
			} else {
				steps[i+1] = "f:" + key // a map key with dots in it
			}
		}
		for _, step := range steps {
			m, ok := node[step].(map[string]any)
			if !ok {
				return false
			}
			if len(m) == 0 || m["."] != nil && len(m) == 1 {
				return true // owned whole: an atomic list, or a leaf
			}
			node = m
		}
	}
	return true
}

// elemName is a path element's field name: containers of
// containers[name=app], labels of labels[app.kubernetes.io/name].
func elemName(elem string) string {
	name, _, _ := strings.Cut(elem, "[")
	return name
}

// elemKeys are what a path element's brackets hold, in order: list items
// by key (name=app) and map keys with dots in them.
func elemKeys(elem string) []string {
	var keys []string
	for {
		_, rest, ok := strings.Cut(elem, "[")
		if !ok {
			return keys
		}
		key, after, _ := strings.Cut(rest, "]")
		keys = append(keys, key)
		elem = after
	}
}

// splitPath splits a.b[type=x.y].c on the dots outside brackets.
func splitPath(path string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range path {
		switch c {
		case '[':
			depth++
		case ']':
			depth--
		case '.':
			if depth == 0 {
				out = append(out, path[start:i])
				start = i + 1
			}
		}
	}
	return append(out, path[start:])
}
