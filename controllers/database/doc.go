// Package database is a correct controller-runtime operator for Database
// (apps.kubeprop.dev/v1, CRD in testdata/crds/databases.yaml): a
// replicated database, the kind of stateful operator a database vendor
// ships. For Database x it owns a headless Service x, a ConfigMap
// x-config that lists the members and the volume size, and a StatefulSet
// x whose volume claim template asks for spec.storage.
//
// Its volumes grow the way real operators grow them: volumeClaimTemplates
// are immutable, so it grows each claim, deletes the StatefulSet leaving
// its pods running (propagationPolicy Orphan) and creates it again with
// the new template, which adopts them. A smaller spec.storage is refused:
// volumes never shrink. A finalizer holds a deleted Database until its
// claims, which outlive the StatefulSet, are deleted. Every decision is
// taken from what it observes, and every delete carries a UID
// precondition, so a crash at any point is repaired by the next
// reconcile and a stale view never harms another incarnation of a
// Database under the same name.
//
// The package does not import the harness: cmd/database-operator runs it
// as a binary, and controllers/suite has its conformance check
// (DatabaseSpec). The seeded-bug variants under controllers/bugs
// (resizemarksfirst, cleanupbyname, observedafter) differ from it by one
// decision each, put in through Flaws.
package database
