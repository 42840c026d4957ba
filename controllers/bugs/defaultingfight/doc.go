// Package defaultingfight is the PodSet controller with a seeded bug: it
// compares each pod's spec with its template's, field by field, and
// replaces pods that differ. The API server fills in defaults (dnsPolicy,
// schedulerName, terminationMessagePath, ...), so every pod differs.
//
// Bug class: a fight with API defaulting. Revealed by any plan. Caught by
// Converges (the pods are replaced forever) and Quiescent.
package defaultingfight
