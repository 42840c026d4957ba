// Package record builds a case's trace (properties.Trace): a Recorder
// watches the case's namespace through informers and keeps every state of
// the watched objects in the API server's order of writes, each changed
// field with the field manager that wrote it (from managedFields, else
// from the audit log's request), the controller's reconciles as its
// queue reports them, its panics, execs into its pods and the events it
// is told of (fault steps, user changes). An AuditReader reads the case's
// requests from the API server's audit log.
//
// The harness makes one Recorder per case and tells it what happens
// through its methods; the package knows nothing of faults or of how
// controllers run.
package record
