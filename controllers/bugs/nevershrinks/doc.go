// Package nevershrinks is the PodSet controller with a seeded bug: it
// scales up but never down.
//
// Bug class: a missing direction of reconciliation. Revealed by a
// ScaleChange to fewer replicas. Caught by Always(at-most-replicas) once
// the controller has seen the new spec, and by Converges.
package nevershrinks
