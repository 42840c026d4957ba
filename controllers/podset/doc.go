// Package podset is a correct controller-runtime controller for PodSet
// (apps.kubeprop.dev/v1, CRD in testdata/crds/podsets.yaml): Replicas
// copies of a pod template, created directly.
//
// It replaces the pods lost with their node (once they are evicted) and
// the pods that failed, leaves crash-looping containers to the kubelet's
// back-off, never overshoots (it reads the PodSet and lists its pods fresh
// from the API server, so it always sees its own writes and sizes the pods
// to the spec of now), and writes its status with server-side
// apply under its own field manager. Spec gives its conformance check.
//
// The seeded-bug variants under controllers/bugs differ from it by one
// decision each, put in through Flaws.
package podset
