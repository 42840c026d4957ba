// Package cluster runs the control plane of a hollow cluster on one machine:
// etcd and kube-apiserver through controller-runtime's envtest, and the real
// kube-controller-manager and kube-scheduler as child processes, each with an
// identity of its own so that the API server's audit log attributes every
// request.
//
// The binaries come from the folder named by KUBEPROP_ASSETS or
// KUBEBUILDER_ASSETS, else from `make bins` (bin/k8s/<version>/, found by
// walking up from the working directory), else from DefaultAssetsDir, the
// user cache that `kubeprop bins` fills. BuildBinaries builds them (for
// `kubeprop bins` and `make bins`), from build modules it embeds.
//
// No process outlives the cluster: Stop ends them all, and a watchdog process
// kills whatever is left when the test binary dies without calling Stop (a
// panic, `go test -timeout`, SIGINT or SIGKILL). The watchdog is the test
// binary itself, re-executed; the package's init function takes over the
// process when it is started in that role.
package cluster
