// Package twostepcreate is the PodSet controller with a seeded bug: it
// keeps track of its pods in an annotation of the PodSet, written after
// each pod's creation, and knows no other pods: two writes that must both
// happen, with nothing to repair a crash between them.
//
// Bug class: a non-idempotent multi-step change. Revealed by
// CrashAfterWrite with something to create: the pod created before the
// crash is in no annotation, and the next instance creates another; the
// orphan lives on. Caught by Always(at-most-replicas).
package twostepcreate
