package harness

import (
	"context"
	"net"

	"k8s.io/client-go/rest"
	"pgregory.net/rapid"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness/internal/lifecycle"
	"github.com/kubeprop/kubeprop/harness/internal/search"
)

// Identities of the actors kubeprop itself runs, as the audit log shows
// them: UserController is the controller under test's; UserUser makes
// the user's changes (fixtures, ScaleChange); UserProvisioner provisions,
// resizes and deletes volumes (package storage).
const (
	UserController  = lifecycle.UserController
	UserKubelet     = lifecycle.UserKubelet
	UserUser        = lifecycle.UserUser
	UserProvisioner = lifecycle.UserProvisioner
)

// UserAgentInjected is the user agent of the requests the harness refused
// on the controller's behalf (APIErrors): they never reach the API server,
// so the trace gets them from the harness instead of the audit log.
const UserAgentInjected = lifecycle.UserAgentInjected

// Field managers of the harness's own writers.
const (
	ManagerFaults = lifecycle.ManagerFaults
	ManagerUser   = lifecycle.ManagerUser
)

// The search's defaults: what zero SearchOptions.Checks and ShrinkTime
// mean; MaxParallel bounds SearchOptions.Parallel.
const (
	DefaultChecks     = search.DefaultChecks
	DefaultShrinkTime = search.DefaultShrinkTime
	MaxParallel       = search.MaxParallel
)

// ScenarioDir is where Check saves the scenarios of failures, under the
// test's name.
const ScenarioDir = search.ScenarioDir

// TB is what Check needs of a test: *testing.T, or rapid's TB.
type TB = rapid.TB

// Spec is what a conformance check runs: a controller, the objects it is
// given, the faults to draw from, and the properties that must hold. Zero
// values take the defaults.
type Spec = lifecycle.Spec

// Controller is a controller under test. The harness starts a fresh
// instance for every case, and again for ControllerRestart.
type Controller = lifecycle.Controller

// EnvOptions configures a hollow cluster. The zero value is a cluster at
// TimeScale 10 with the binaries from `make bins` and no CRDs.
type EnvOptions = lifecycle.EnvOptions

// Env is a running hollow cluster.
type Env = lifecycle.Env

// ProcessOptions are a controller binary's command line and environment.
type ProcessOptions = lifecycle.ProcessOptions

// Report is the outcome of one case.
type Report = lifecycle.Report

// Failure is one property that did not hold.
type Failure = lifecycle.Failure

// Times is where a case's wall time went: setup (namespace, nodes,
// fixtures, the controller, the first settle), each step with the settle
// after it, the heal and the properties' judging, and teardown.
type Times = lifecycle.Times

// Teardown is what ending a case had to force, and what it left behind.
type Teardown = lifecycle.Teardown

// Replays are the reports of a plan's runs (Repeat), in order.
type Replays = lifecycle.Replays

// RepeatOptions configure Repeat. Zero values take the defaults.
type RepeatOptions = lifecycle.RepeatOptions

// SearchOptions configure a search (Check, Find). The zero value is 100
// plans from a random seed, 1 m of shrinking, DefaultParallel cases at a
// time, and scenarios under testdata/kubeprop/<name>. go test, kubeprop
// run, the demo and the soak take the same settings by the same names
// (SearchFlags).
type SearchOptions = search.SearchOptions

// Finding is a property failure found and shrunk by Check or Find: the
// shrunk plan's first failure, and how the search came to it.
type Finding = search.Finding

// ShrinkStats is where a shrink's time went: the cases it ran, and how
// long those that failed and those that passed took.
type ShrinkStats = search.ShrinkStats

// Shard is a part of a search: the plans whose index is Index mod Count.
// The zero Shard, and any of Count 1, is the whole search.
type Shard = search.Shard

// PlanList is what a search would run, listed without a cluster
// (ListPlans).
type PlanList = search.PlanList

// ListedPlan is one plan of a PlanList.
type ListedPlan = search.ListedPlan

// CaseNamespace returns the namespace of the case whose controller got
// ctx (a Func controller's, or a Manager's reconcile context), and false
// for a context of no case: a controller that serves one namespace
// watches only its case's, and cases that run side by side do not see
// each other.
func CaseNamespace(ctx context.Context) (string, bool) {
	return lifecycle.CaseNamespace(ctx)
}

// DialContext dials as a net.Dialer does, except that an address of the
// hollow cluster's pod or Service network is refused at once with
// "connect: network is unreachable", as a controller binary's own network
// namespace refuses it (see Process). An in-process controller that
// connects to its pods or Services (a database operator checking its
// members, say) dials through it, for example as its http.Transport's
// DialContext, so that its tests send nothing off the machine and see the
// error a pod network that cannot be reached gives. Other addresses, and
// names, are dialed as net.Dialer dials them: the hollow cluster serves no
// DNS, so a Service's name does not resolve.
func DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	return lifecycle.DialContext(ctx, network, address)
}

// Run runs one plan on env without rapid: a fresh namespace, nodes and
// controller, the fixtures, each step followed by a settle, then the heal
// and the properties' verdicts. The error is for the harness's own
// failures; the properties' failures are in the report.
func Run(ctx context.Context, env *Env, spec Spec, plan []faults.Step) (*Report, error) {
	return lifecycle.Run(ctx, env, spec, plan)
}

// Repeat runs plan Count times, Parallel at a time, each a case of its
// own (the reference run, if any, made once), and returns their reports in
// order: how often a failure reproduces. The first harness error ends it.
func Repeat(ctx context.Context, env *Env, spec Spec, plan []faults.Step, opts RepeatOptions) (Replays, error) {
	return lifecycle.Repeat(ctx, env, spec, plan, opts)
}

// Manager runs a controller-runtime controller in process. setup receives
// a fresh manager, whose cache sees only the case's namespace, and the
// controller.Options to pass on (builder.WithOptions): they record the
// controller's reconciles and requeues for the properties.
func Manager(setup func(mgr manager.Manager, opts controller.Options) error) Controller {
	return lifecycle.Manager(setup)
}

// SetupWithManager runs a controller-runtime reconciler whose
// SetupWithManager(mgr) is left unchanged. Without the harness's
// controller.Options its reconciles are not recorded; its retries still
// show in the audit log.
func SetupWithManager(r interface{ SetupWithManager(manager.Manager) error }) Controller {
	return lifecycle.SetupWithManager(r)
}

// ControllerManager is the cluster's own kube-controller-manager as the
// controller under test: its Deployment, ReplicaSet and other controllers
// run for every case, all the time. It is the reference that a
// controller's properties can be tried on. ControllerRestart and the
// faults OnController are no-ops on it (it is another process, shared by
// the cases).
func ControllerManager() Controller {
	return lifecycle.ControllerManager()
}

// Func runs a controller written on plain client-go (informers and a
// workqueue) in process. run receives a fresh context and a rest.Config
// of the controller's user (UserController), and must return when the
// context ends; it runs anew for every case and for ControllerRestart. The
// harness sees its writes and retries through the audit log; the faults
// OnController act on its connections (API errors and the crash after a
// write on its requests, StaleWatch on its watches). A run that returns
// on its own while the case goes on, or panics, is reported as a panic.
func Func(run func(ctx context.Context, cfg *rest.Config) error) Controller {
	return lifecycle.Func(run)
}

// Process runs a controller binary: any language, any framework, started
// anew for every case and for ControllerRestart (SIGTERM, then a fresh
// start), SIGKILLed for CrashAfterWrite. It gets a kubeconfig in KUBECONFIG
// whose server is a loopback proxy of the harness in front of the API
// server, so its requests reach the API server as UserController (the
// audit log attributes them by that user and the binary's user agent) and
// the faults OnController act on them as on an in-process controller's.
// The case's namespace is in KUBEPROP_NAMESPACE and the kubeconfig's
// context. In args, ${KUBECONFIG} and ${KUBEPROP_NAMESPACE} are replaced
// by them, e.g. Process("./operator", "--watch-namespace=${KUBEPROP_NAMESPACE}").
// Its output goes to controller-<namespace>.log in the cluster's folder;
// the last lines are in the errors. A binary that exits while the case
// goes on is reported as a panic (NoPanics).
//
// On Linux, run as root, the binary runs in a network namespace of its own
// whose only interface is its own loopback, where the proxy listens: it
// reaches the API server and nothing else, and a dial to a pod or Service
// address (which nothing on the hollow cluster answers) fails at once with
// "network is unreachable" instead of sending packets off the machine.
// Its listening ports (metrics, health) are its own too, so parallel
// cases never collide on them. Without CAP_SYS_ADMIN (not root, or a
// container that forbids it), it shares the machine's network, and the
// case's timeline says so.
func Process(cmd string, args ...string) Controller {
	return lifecycle.Process(cmd, args...)
}

// ProcessWith is Process with an environment: in Args and in Env's
// values, $(KUBEPROP_NAMESPACE) and ${KUBEPROP_NAMESPACE} are the case's
// namespace, $(KUBECONFIG) and ${KUBECONFIG} the kubeconfig's path.
func ProcessWith(opts ProcessOptions) Controller {
	return lifecycle.ProcessWith(opts)
}

// Find draws plans, shrinks the first failure, saves its scenario under
// opts.Dir, and returns it; nil when every plan passed. The error is for
// bad input and the harness's own failures.
func Find(env *Env, spec Spec, name string, opts SearchOptions) (*Finding, error) {
	return search.Find(env, spec, name, opts)
}

// SearchPlans are the plans a search with opts draws (Find, Check), in
// order, without running them: opts.Checks of them from opts.Seed, half
// drawn at random and half aimed at the controller, which takes the
// search's probe (a case per user change run in env, with no fault) once. ctx ends the
// probe; without one, every plan is drawn at random or aimed at
// everything. For a run of many cases that keeps going after a failure
// (the soak) that draws as the search does.
func SearchPlans(ctx context.Context, env *Env, spec Spec, opts SearchOptions) ([][]faults.Step, error) {
	return search.SearchPlans(ctx, env, spec, opts)
}

// ListPlans lists the plans a search of spec with opts runs (with
// opts.Shard, that shard's), with no cluster: an Indexed Job's shards, a
// CI matrix, or a test can see which plans each runs, in seconds. The
// plans aimed at the probe's findings are listed as drawn without it;
// and while they are drawn in a search, a plan drawn again is skipped at
// whichever index runs first, here at the higher.
func ListPlans(spec Spec, opts SearchOptions) (PlanList, error) {
	return search.ListPlans(spec, opts)
}

// DefaultParallel is what a zero SearchOptions.Parallel means: the cases
// at once that keep a 2-core machine busy without false alarms (see the
// README's bench table); two in a binary built with -race, whose
// in-process work is several times slower.
func DefaultParallel() int {
	return search.DefaultParallel()
}

// ParseShard reads a shard written I/N, with 0 <= I < N.
func ParseShard(s string) (Shard, error) {
	return search.ParseShard(s)
}
