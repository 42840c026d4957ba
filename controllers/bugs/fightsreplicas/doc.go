// Package fightsreplicas is the PodSet controller with a seeded bug: it
// pins spec.replicas to the value it first saw, taking the field back by
// force from anyone else who sets it.
//
// Bug class: fighting a co-owner (an autoscaler, another controller, a
// user). Revealed by ConflictingWriter on spec.replicas. Caught by
// NoFightLoop: the field changes hands back and forth with no fault or
// user change driving it.
package fightsreplicas
