// Package recreatescrashing is the PodSet controller with a seeded bug: it
// replaces a pod as soon as one of its containers has crashed, instead of
// leaving the restarts to the kubelet's back-off.
//
// Bug class: retry at full speed. Revealed by CrashLoop: a crash that comes
// from the template crashes the replacement too, so pods are deleted and
// created as fast as they crash. Caught by BoundedBackoff (replacements of
// failing pods faster than an exponential back-off from the kubelet's 10 s).
package recreatescrashing
