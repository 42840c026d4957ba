package harness

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

// DialContext dials as a net.Dialer does, except that an address of the
// hollow cluster's pod or Service network is refused at once with
// "connect: network is unreachable", as a controller binary's own network
// namespace refuses it (see Process). An in-process controller that
// connects to its pods or Services (a database operator checking its
// members, say) dials through it, for example as its http.Transport's
// DialContext, so that its tests send nothing off the machine and see the
// error a pod network that cannot be reached gives. Other addresses, and
// names, are dialed as net.Dialer dials them: the hollow cluster serves no
// DNS, so a Service's name does not resolve.
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
