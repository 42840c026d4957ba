// Package stalecache is the PodSet controller with a seeded bug: it counts
// pods in its informer cache, which may not have seen the pods it just
// created, and has no expectations to make up for it.
//
// Bug class: acting on a stale cache. Revealed by StaleWatch (delayed
// watch events) with a scale change: the controller's follow-up reconcile
// sees too few pods and creates more. Caught by Always(at-most-replicas).
package stalecache
