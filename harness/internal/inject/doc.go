// Package inject carries out the faults that act on the controller under
// test itself rather than on the cluster: API errors answered to its
// writes (APIErrors), a crash right after one of its writes of its own
// kinds (CrashAfterWrite), watch streams delayed or cut (StaleWatch), and
// a restarted instance's stale view of the cluster (Instance.ServeStale:
// lists at an older resource version, watch events held). One Faults per
// case; each start of the controller is an Instance, which a crash kills
// alone. Faults.Acted tells when the controller first wrote one of its
// own objects, which a case's setup waits for.
//
// An in-process controller's client goes through Client
// (controller-runtime's client interceptor); a controller whose client the
// harness does not build gets a rest.Config wrapped with WrapTransport and
// WrapWrites, the same faults at the HTTP level; a controller binary talks
// to a Proxy that forwards its requests through that transport. Options
// name the case's namespace (writes elsewhere go through) and hooks tell
// the harness of refusals and crashes.
//
// One file per mechanism: apierrors.go (the refusals, and which writes
// can meet a conflict), crash.go, watches.go (delayed and cut streams),
// stale.go (a restart's stale view); client.go and transport.go are the
// two ways in (the client interceptor, the HTTP level), proxy.go the third.
package inject
