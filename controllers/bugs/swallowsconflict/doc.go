// Package swallowsconflict is the PodSet controller with a seeded bug: it
// treats a 409 Conflict as done, without a requeue.
//
// Bug class: a dropped retry. Revealed by APIErrors (Conflict) while the
// status changes: the status write that failed is never made, and nothing
// else comes to trigger one. Caught by Converges (the status stays behind
// the pods).
package swallowsconflict
