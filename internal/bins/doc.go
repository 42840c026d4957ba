// Package bins builds the hollow cluster's binaries (etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler, at the versions package
// cluster needs) from the Go module proxy, with the Go toolchain, into a
// folder: `kubeprop bins` and `make bins` call it.
//
// The build modules are hack/k8sbins (Kubernetes) and hack/k8sbins/etcd,
// modules of their own so that kubeprop's go.mod stays clean; a nested
// module's files cannot be embedded, so modules/ holds renamed copies,
// which a test keeps equal to them. To move to another version, change
// hack/k8sbins, copy its go.mod and go.sum here, and change the versions
// in package cluster.
package bins
