package lifecycle

import (
	"context"
	"net"
	"net/netip"
	"os"
	"syscall"

	"github.com/kubeprop/kubeprop/harness/cluster"
	"github.com/kubeprop/kubeprop/harness/kubelet"
)

// unreachable are the hollow cluster's pod and Service ranges: nothing
// answers there, and a packet sent to them would leave the machine.
var unreachable = []netip.Prefix{netip.MustParsePrefix(kubelet.PodNetwork), netip.MustParsePrefix(cluster.ServiceNetwork)}

// DialContext is harness.DialContext: see its documentation there.
func DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(address)
	if err == nil {
		if ip, err := netip.ParseAddr(host); err == nil {
			for _, p := range unreachable {
				if p.Contains(ip.Unmap()) {
					return nil, &net.OpError{Op: "dial", Net: network, Addr: tcpAddr(address),
						Err: os.NewSyscallError("connect", syscall.ENETUNREACH)}
				}
			}
		}
	}
	var d net.Dialer
	return d.DialContext(ctx, network, address)
}

// tcpAddr is address as a net.Addr, for the error.
func tcpAddr(address string) net.Addr {
	a, err := net.ResolveTCPAddr("tcp", address)
	if err != nil {
		return nil
	}
	return a
}
