// Package cleanupbyname is the Database operator with a seeded bug: its
// finalizer cleanup knows the Database's objects by name only. It deletes
// the StatefulSet by name and the claims listed by the
// app.kubernetes.io/instance=x label, with no UID precondition and no
// check of the instance-uid label, and strips its finalizer with a merge
// patch that carries no resourceVersion.
//
// Bug class: stale state, a view that still shows an earlier incarnation.
// Revealed by the user deleting and creating the Database again, and the
// operator restarted with a stale view that still shows the old Database
// being deleted ([Recreate{Object: 0}, ControllerRestart{StaleMs:
// 2000}]): it deletes the new incarnation's claims and StatefulSet, and
// strips the new Database's finalizer. Caught by claims-kept (a claim
// that a live Database wanted for its whole life was deleted).
package cleanupbyname
