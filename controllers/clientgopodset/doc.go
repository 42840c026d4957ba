// Package clientgopodset is a PodSet controller written on plain client-go,
// in the shape of Kubernetes' sample-controller: shared informers on
// PodSets (dynamic) and pods, a rate-limited workqueue of PodSet keys, and
// workers that sync one key at a time and requeue a failed one with the
// queue's back-off. It does what controllers/podset does, without
// controller-runtime; kubeprop runs it through harness.Func.
package clientgopodset
