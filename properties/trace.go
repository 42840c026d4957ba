package properties

import (
	"reflect"
	goruntime "runtime"
	"sort"
	"sync"
	"time"
	"weak"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// Trace is what the harness recorded of one case. Times are wall times.
type Trace struct {
	// Start is when the fixtures were created; Healed when the last fault
	// stopped (zero while faults are still running); End when the trace was
	// last extended.
	Start, Healed, End time.Time
	// Final is set on the last check of a case: no more will be observed.
	Final bool
	// Controller is the name under which the controller under test writes
	// (its field manager and API user).
	Controller string
	// TimeScale is the cluster's seconds per wall second (zero means 1):
	// properties that hold the cluster's own timings use it.
	TimeScale float64

	States     []State     // the observed objects, after every change
	Writes     []Write     // field history, from managedFields
	Requests   []Request   // the API server's audit log
	Reconciles []Reconcile // in-process controllers' reconcile results
	Panics     []Panic     // in-process controllers' panics
	Events     []Event     // fault steps and user changes, in order
	Execs      []Exec      // commands run in the case's containers

	// Reference is the case's reference run, when a property asks for
	// one (see MatchesReference); the harness sets it.
	Reference *ReferenceRun

	// Memo, when set, lets properties skip what they already checked on an
	// earlier trace of the same case; the harness sets it.
	Memo *Memo
}

// State is a snapshot of the objects a case watches.
type State struct {
	At      time.Time
	Objects []*unstructured.Unstructured
}

// ByKind returns the objects of a kind, sorted by name.
func (s State) ByKind(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range s.Objects {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out
}

// Get returns the object of that kind and name, or nil.
func (s State) Get(kind, name string) *unstructured.Unstructured {
	for _, o := range s.Objects {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// As converts an observed object to a typed one (a *corev1.Pod, or the
// controller's own type). The value is shared by every call for the same
// object and type: read it, do not change it (the object itself is shared
// by every state it is part of).
//
// A trace's states share the objects that did not change between them,
// and a predicate runs on every state: converting each object once, not
// once per state, keeps judging a churning controller's trace (ten
// thousand states of dozens of pods) linear in its changes.
func As[T any](u *unstructured.Unstructured) (*T, error) {
	key := asKey{object: weak.Make(u), typ: reflect.TypeFor[T]()}
	if v, ok := converted.Load(key); ok {
		return v.(*T), nil
	}
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, err
	}
	if _, loaded := converted.LoadOrStore(key, out); !loaded {
		// The entry goes with the object: nothing of a case outlives it.
		goruntime.AddCleanup(u, func(k asKey) { converted.Delete(k) }, key)
	}
	return out, nil
}

// converted holds As's conversions, by object and type.
var converted sync.Map

type asKey struct {
	object weak.Pointer[unstructured.Unstructured]
	typ    reflect.Type
}

// Write is one change of one field, by one field manager.
type Write struct {
	At time.Time
	// Manager is the field manager that wrote the field: the owner of the
	// field in the object's managedFields, else the writer of the request
	// that changed the object (a removed field has no owner), else one of
	// the pseudo-managers ManagerBinding, ManagerDeleted and
	// ManagerUnknown.
	Manager string
	Kind    string
	Name    string
	// UID is the object's: an object deleted and created again under its
	// name is another object, whose writes start a history of their own.
	UID types.UID
	// GenerateName is the object's metadata.generateName: its name
	// without the random suffix.
	GenerateName string
	// Field is a path such as spec.replicas, spec.containers[name=app].image
	// (a list item by its key) or metadata.labels[app.kubernetes.io/name]
	// (a map key with dots in it).
	Field string
	Value string // the new value, as JSON; empty when removed
}

// The pseudo-managers: the writers a trace names where no field manager
// wrote. Options such as FightOptions.IgnoreManagers can name them.
const (
	// ManagerBinding binds a pod to a node: the scheduler's binding
	// subresource, which managedFields do not record.
	ManagerBinding = "(binding)"
	// ManagerDeleted is the writer of an object's deletion (the object
	// gone from the API; Field is "metadata").
	ManagerDeleted = "(deleted)"
	// ManagerUnknown wrote a change that neither managedFields nor the
	// audit log attribute: no successful write of the object was received
	// before the change was seen.
	ManagerUnknown = "(unknown)"
)

// Object names the written object the same way in every run: a generated
// name's random suffix is left out ("web-*").
func (w Write) Object() string {
	if w.GenerateName != "" {
		return w.GenerateName + "*"
	}
	return w.Name
}

// objectID keys a write's object by identity: its UID when known, else
// its name.
func (w Write) objectID() string {
	if w.UID != "" {
		return w.Kind + "\x00" + string(w.UID)
	}
	return w.Kind + "\x00\x00" + w.Name
}

// Request is one request from the audit log.
type Request struct {
	At          time.Time
	User        string
	UserAgent   string
	Verb        string
	Resource    string
	Subresource string
	Namespace   string
	Name        string
	Code        int
	// FieldManager is the field manager a write request wrote as, as the
	// API server names it: its fieldManager parameter, else its user
	// agent up to the first slash.
	FieldManager string
}

// ChangesState reports whether r writes an object of the cluster's state:
// a create, update, patch, delete or deletecollection, not of a lease nor
// an Event.
func (r Request) ChangesState() bool {
	return isWrite(r.Verb) && !r.bookkeeping()
}

// bookkeeping: r is of a lease or an Event (a leader renewing its lease, a
// record of what happened), which every healthy controller keeps making.
func (r Request) bookkeeping() bool { return r.Resource == "leases" || r.Resource == "events" }

// refused reports whether the request failed as an attempt: the API
// server answered with an error, but for a delete of what is already gone,
// which reached its goal.
func (r Request) refused() bool { return r.Code >= 400 && !(r.Verb == "delete" && r.Code == 404) }

// ResourcePath is the request's resource and subresource, as
// "pods/status".
func (r Request) ResourcePath() string {
	if r.Subresource == "" {
		return r.Resource
	}
	return r.Resource + "/" + r.Subresource
}

// Reconcile is one reconcile of an in-process controller.
type Reconcile struct {
	At           time.Time
	Controller   string
	Key          string // namespace/name
	Err          string // empty on success
	Requeue      bool
	RequeueAfter time.Duration
	// Backoff is the delay the work queue's rate limiter gave the retry
	// of a reconcile that failed or asked for a requeue (zero when not
	// known).
	Backoff time.Duration
	// News: the key was added for an event since the last reconcile of
	// it began, so this one is the controller's answer to news, not a
	// retry (an informer's events bypass the work queue's back-off).
	News bool
}

// failed reports whether the reconcile failed as an attempt: it returned
// an error or asked for a requeue with back-off (a RequeueAfter is a
// timer, not a retry).
func (r Reconcile) failed() bool { return r.Err != "" || r.Requeue && r.RequeueAfter == 0 }

// Exec is one command run in a container through pods/exec, as the
// simulated kubelet answered it.
type Exec struct {
	At             time.Time
	Pod, Container string
	Command        []string
	ExitCode       int
	// User is who asked the API server for it, from the audit log; empty
	// until the log has it.
	User string
}

// Panic is a panic of the controller under test.
type Panic struct {
	At    time.Time
	Value string
	Stack string
}

// EventKind tells what drove the system: a fault, the user, or news
// that reached the controller late.
type EventKind string

// The kinds of Event.
const (
	FaultEvent EventKind = "fault"
	UserEvent  EventKind = "user"
	// DeliveryEvent: watch events the harness held back (StaleWatch, a
	// stale view) reached the controller: news to it, though the writes
	// they tell of are older.
	DeliveryEvent EventKind = "delivery"
	// StartEvent: the controller started anew (ControllerRestart, or
	// after a crash): a fresh work queue, and its informers' first list
	// news of every object to it.
	StartEvent EventKind = "start"
)

// Event is one fault step or user change, as applied.
type Event struct {
	At   time.Time
	Kind EventKind
	Name string // the step, as it prints: NodeLoss{Node: 1}
}

// UserChanges are the times of the trace's user changes (its events of
// kind UserEvent), in order.
func (tr *Trace) UserChanges() []time.Time {
	var out []time.Time
	for _, e := range tr.Events {
		if e.Kind == UserEvent {
			out = append(out, e.At)
		}
	}
	return out
}

// stateAt returns the index of the last state at or before t, or -1.
func (tr *Trace) stateAt(t time.Time) int {
	return sort.Search(len(tr.States), func(i int) bool { return tr.States[i].At.After(t) }) - 1
}

func (tr *Trace) timeScale() float64 {
	if tr.TimeScale <= 0 {
		return 1
	}
	return tr.TimeScale
}

// healedOrEnd is the heal time, or the end of the trace while not healed.
func (tr *Trace) healedOrEnd() time.Time {
	if tr.Healed.IsZero() {
		return tr.End
	}
	return tr.Healed
}
