// Package harness is kubeprop's engine. This part starts and drives a
// hollow cluster: a real control plane (etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler, see package cluster) and
// simulated kubelets (package kubelet), on one machine, for one test binary.
//
//	var env *harness.Env
//
//	func TestMain(m *testing.M) {
//		env = harness.MustStart(harness.EnvOptions{CRDDirectoryPaths: []string{"../config/crd"}})
//		code := m.Run()
//		env.Stop()
//		os.Exit(code)
//	}
//
// The cluster binaries come from `make bins`; see package cluster.
package harness
