// Package statustimestamp is the PodSet controller with a seeded bug: it
// writes status.lastReconcileTime on every reconcile.
//
// Bug class: status churn. Each write is a watch event that starts the
// next reconcile, which writes again: the controller never goes quiet.
// Revealed by any plan (the churn starts with the first reconcile).
// Caught by Quiescent.
package statustimestamp
