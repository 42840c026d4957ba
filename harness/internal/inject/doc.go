// Package inject carries out the faults that act on the controller under
// test itself rather than on the cluster: API errors answered to its
// writes (APIErrors), a crash right after one of its writes
// (CrashAfterWrite), watch streams delayed or cut (StaleWatch). One Faults
// per case; each start of the controller is an Instance, which a crash
// kills alone.
//
// An in-process controller's client goes through Client
// (controller-runtime's client interceptor); a controller whose client the
// harness does not build gets a rest.Config wrapped with WrapTransport and
// WrapWrites, the same faults at the HTTP level; a controller binary talks
// to a Proxy that forwards its requests through that transport. Options
// name the case's namespace (writes elsewhere go through) and hooks tell
// the harness of refusals and crashes.
package inject
