// Package kubelet simulates kubelets: the one part of the hollow cluster
// that kubeprop writes itself. A Simulator runs any number of nodes against
// a real API server. Each node registers a Node with capacity, renews its
// Lease and posts its Ready condition on the kubelet's schedule, and runs
// the pods the real scheduler binds to it: Pending, then Running, Ready
// after the readiness delay, with the pod IP, start time and conditions a
// kubelet writes. Killed containers restart per restartPolicy with the
// kubelet's own CrashLoopBackOff (client-go's flowcontrol.Backoff, 10 s
// doubling to 300 s, reset after 10 minutes of running); a deleted pod's
// containers take its grace period (exec preStop hooks through
// Options.Exec, at most Options.MaxGracePeriod) before the deletion is
// confirmed; a lost node goes silent until it recovers.
//
// Each node serves the kubelet's endpoint on an address of its own on
// loopback (its InternalIP, 127.1.x.y; the port is in the Node's
// daemonEndpoints): the API server proxies pods/exec there, and the node
// answers through the exec protocol of the kubelet's CRI streaming server
// (k8s.io/cri-streaming), with Options.Exec giving each command's output
// and exit code. A lost node's endpoint refuses connections.
//
// Timings are the kubelet's defaults in cluster time, turned into wall time
// by Options.TimeScale. The clock is injected (k8s.io/utils/clock).
//
// One file per concern: node.go (registration, status), lease.go, pod.go
// (the pod state machine and its status), container.go (kills and
// back-off), probes.go, termination.go (graceful deletion), exec.go (the
// kubelet endpoint), addresses.go.
package kubelet
