// Package harness is kubeprop's engine: it runs a controller under test on
// a hollow cluster, applies fault plans to it and judges the trace with
// properties.
//
// A Spec says what to test: the Controller (Manager, SetupWithManager, Func,
// Process or ControllerManager), the Fixtures a case creates, the Faults
// drawn (package faults) and the Properties judged (package properties).
//
//   - Check (and CheckWith) is the go test entry point: it draws plans with
//     rapid, runs them, shrinks the first failure to a minimal plan, saves
//     it as a scenario file (package scenario), with the controller's log,
//     the namespace's events and the final objects beside it
//     (Report.SaveEvidence), and fails the test with the plan, the
//     timeline and the replay command.
//   - Find is the same search as a value, for tools (kubeprop run, the
//     demo): SearchOptions in, a Finding out.
//   - Run carries out one plan and returns its Report: the trace, the
//     failures, the timeline, where the time went. The properties judge
//     the trace while each step settles too (a check beside the settle
//     every second or so, and one at its end): a failure no more trace can
//     undo ends the case, and the steps left are not run (Report.Unrun).
//     One found while the settle waits counts once a check a second later
//     finds it too: each resource has its own watch stream, so a state
//     judged before a late change arrived may never have existed.
//   - Replay and ReplayDir run saved scenarios again, each checked against
//     the outcome it expects.
//
// An Env is one hollow cluster for a whole test binary: a real control
// plane (etcd, kube-apiserver, kube-controller-manager and kube-scheduler,
// see package cluster) and simulated kubelets (package kubelet), on one
// machine. Its default StorageClass's volumes are provisioned, resized and
// deleted by a simulated CSI driver (package storage), so StatefulSets with
// volume claim templates run; a case records its PersistentVolumeClaims
// like its pods, and its teardown deletes their volumes. A deleted pod
// takes its grace period (cluster time, capped by
// kubelet.Options.MaxGracePeriod) before its kubelet confirms it gone.
//
// Inside, this package is a facade: a case's life (Spec, Env, Run, the
// controller routes, Report) is package internal/lifecycle's, the search
// and the shrinker (Find, SearchOptions, Finding) package
// internal/search's, and the types here are theirs, by alias: go doc shows
// their fields there (go doc
// github.com/kubeprop/kubeprop/harness/internal/lifecycle.Spec). A case's
// trace is built by package internal/record (states, field writes and who
// wrote them, reconciles, requests from the audit log), and the faults
// that act on the controller itself (API errors, a crash after a write,
// stale watches) by package internal/inject.
//
// Nothing a case does leaves the machine: a controller binary (Process)
// runs, as root, in a network namespace of its own that reaches the API
// server only, and an in-process controller that dials its pods uses
// DialContext; both refuse pod and Service addresses at once.
//
//	var env *harness.Env
//
//	func TestMain(m *testing.M) {
//		env = harness.MustStart(harness.EnvOptions{CRDDirectoryPaths: []string{"../config/crd"}})
//		code := m.Run()
//		env.Stop()
//		os.Exit(code)
//	}
//
// The cluster binaries come from `kubeprop bins` (or `make bins` in the
// kubeprop checkout); see package cluster.
//
// # Cases side by side
//
// A search runs SearchOptions.Parallel cases at once on the one cluster.
// Each case has a namespace of its own (CaseNamespace), simulated nodes of
// its own in a zone of its own (topology.kubernetes.io/zone), and its pods
// are bound only to them by a scheduler extender: the pods themselves are
// not changed. Faults, panics, refused requests and the trace belong to
// one case. A controller must act in its case's namespace only (a Manager
// caches only it; a Func reads it from CaseNamespace(ctx); a Process finds
// it in its kubeconfig): one seen writing into another case's namespace
// makes a search with Parallel > 1 fail with an error that says so.
// Cluster-scoped objects are shared by every case: CRDs, a controller's
// ClusterRoles, webhooks, labels on nodes of no case. A spec that changes
// such objects per case, or whose properties read them, must search with
// Parallel 1.
package harness
