package fleetgen

import (
	"fmt"
	"net/netip"
	"strings"
)

// Shared returns a shared document (flow_hash_seed and [[vip]]s) of vips
// NAT VIPs of backends backends each, without health checks; weight is
// every backend's weight (0: the default). VIP i is 198.18.128.0 + i
// port 80; its backends are 198.19.0.1 onwards, on port 10000 + i, so
// that no two VIPs share a NAT backend and port. It panics beyond 30,000
// VIPs or 60,000 backends a VIP.
func Shared(vips, backends int, weight uint32) []byte {
	if vips > 30000 || backends > 60000 {
		panic("fleetgen: too many VIPs or backends for the address plan")
	}
	var b strings.Builder
	b.Grow(vips * (120 + backends*48))
	b.WriteString("flow_hash_seed = 1234567\n")
	vip0 := netip.MustParseAddr("198.18.128.0")
	be0 := netip.MustParseAddr("198.19.0.1")
	v := vip0
	for i := range vips {
		fmt.Fprintf(&b, "\n[[vip]]\nname = \"v%d\"\naddress = \"%s\"\nport = 80\nprotocol = \"tcp\"\n[vip.healthcheck]\ntype = \"none\"\n", i, v)
		a := be0
		for range backends {
			fmt.Fprintf(&b, "[[vip.backend]]\naddress = \"%s\"\nport = %d\n", a, 10000+i)
			if weight != 0 {
				fmt.Fprintf(&b, "weight = %d\n", weight)
			}
			a = a.Next()
		}
		v = v.Next()
	}
	return []byte(b.String())
}
