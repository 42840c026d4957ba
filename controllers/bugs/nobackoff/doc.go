// Package nobackoff is the PodSet controller with a seeded bug: it
// retries a failed reconcile after a fixed 10 ms instead of returning the
// error to the workqueue's exponential back-off.
//
// Bug class: retry without back-off. Revealed by APIErrors (a window of
// refused writes) with something to write. Caught by BoundedBackoff: far
// more refused requests than an exponential back-off allows.
package nobackoff
