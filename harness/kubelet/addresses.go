package kubelet

import "fmt"

// A node's InternalIP is an address of its own on loopback (all of
// 127.0.0.0/8 is loopback on Linux, with no set-up): its kubelet endpoint
// listens there, and the API server reaches it for pods/exec. Pods take
// their addresses from 198.18.0.0/15, the range set aside for benchmarks
// (RFC 2544): valid endpoint addresses (an EndpointSlice refuses loopback
// ones), that nothing answers on.

// PodNetwork is the range of every simulated pod's address.
const PodNetwork = "198.18.0.0/15"

// nodeIP is the InternalIP of the node with index i (from 0).
func nodeIP(i int) string { return fmt.Sprintf("127.1.%d.%d", (i/250)%256, i%250+1) }

// podCIDR is the pod range of the node with index i.
func podCIDR(i int) string { return fmt.Sprintf("198.18.%d.0/24", i%256) }

// podIP is the n-th pod address (from 0) of the node with index i; the /24
// has 253 usable host addresses and wraps after that.
func podIP(i, n int) string { return fmt.Sprintf("198.18.%d.%d", i%256, n%253+2) }
