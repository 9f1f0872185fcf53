package testbed

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"strings"
)

// ConfigOptions shape the vipd configuration Config writes for a bed.
type ConfigOptions struct {
	IO     string // afxdp (default) or afpacket
	Queues int    // default 1
	// Health is the health-check block of every VIP ("" = none), and
	// HealthOf a VIP's own, by name, in its place.
	Health   string
	HealthOf map[string]string
	// Weights of the backends of the NAT VIP, default all 1.
	Weights []int
	// Extra is appended verbatim (more VIPs, ...).
	Extra string
	// ClosingTimeout is conntrack's tcp_closing_timeout ("" = default).
	ClosingTimeout string
	// Backends limits the backends listed (0 = all of the bed's).
	Backends int
	// IPv6 adds the IPv6 VIPs web6-nat and web6-dsr (needs Options.IPv6).
	IPv6 bool
	// DSREncap is written verbatim into every DSR VIP (encap, gue_port,
	// encap_source_prefix lines; "" = IPIP from the egress address).
	DSREncap string
	// Echo adds the echo VIPs: echo-nat (the NAT VIP's address, TCP 7)
	// and echo-dsr (the DSR VIP's, TCP 7), served by the backends' echo
	// servers (EchoPort).
	Echo bool
	// AdminSocket overrides the admin socket path (default AdminSocket).
	AdminSocket string
	// EncapSource overrides the DSR VIPs' IPv4 encap_source (default the
	// box's egress address).
	EncapSource netip.Addr
	// VIPKeys are extra keys of a VIP's table, by VIP name (for example
	// "min_healthy = 3\n").
	VIPKeys map[string]string
	// FastPath turns the XDP fast path on (fast_path = true) with this
	// refresh ("" = off); the bed needs Options.XDPPeers.
	FastPath string
	// StateFile overrides [dataplane] state_file (default: state.json in
	// the bed's directory, so that no test writes to /var/lib).
	StateFile string
	// Capacity is [conntrack] capacity (0: 65536).
	Capacity int
}

// FastHealth is a health check for tests: HTTP /healthz on 8080 every
// 200 ms, down after 2 failures, up after 2 successes, lame duck on 503
// with X-Drain. A dead backend (connection refused) leaves the pool within
// fall × interval + interval = 600 ms (+10% jitter); one that stops
// answering, within fall × (interval + timeout) more. The timeout is the
// whole interval, the most the configuration allows: a healthy backend
// on a loaded test machine must not be marked down by two slow answers.
const FastHealth = `[vip.healthcheck]
type = "http"
port = 8080
path = "/healthz"
interval = "200ms"
timeout = "200ms"
rise = 2
fall = 2
drain_status = 503
drain_header = "X-Drain"
`

// Config returns a vipd configuration for the bed: a NAT VIP (TCP 80 →
// backends' 8080), a DSR VIP (TCP 80) and a UDP NAT VIP (7000 → 7001).
func (b *Bed) Config(o ConfigOptions) string {
	if o.IO == "" {
		o.IO = "afxdp"
	}
	if o.Queues == 0 {
		o.Queues = 1
	}
	var s strings.Builder
	fmt.Fprintf(&s, "[dataplane]\ningress = \"eth0\"\n")
	if b.Opts.Layout == TwoArmed {
		fmt.Fprintf(&s, "egress = \"eth1\"\n")
	}
	if o.StateFile == "" {
		o.StateFile = filepath.Join(b.dir, "state.json")
	}
	if o.FastPath != "" {
		fmt.Fprintf(&s, "fast_path = true\nfast_path_refresh = %q\n", o.FastPath)
	}
	if o.Capacity == 0 {
		o.Capacity = 65536
	}
	fmt.Fprintf(&s, "io = %q\nqueues = %d\nframe_count = 4096\nstate_file = %q\n\n[conntrack]\ncapacity = %d\n", o.IO, o.Queues, o.StateFile, o.Capacity)
	if o.ClosingTimeout != "" {
		fmt.Fprintf(&s, "tcp_closing_timeout = %q\n", o.ClosingTimeout)
	}
	socket := b.AdminSocket()
	if o.AdminSocket != "" {
		socket = o.AdminSocket
	}
	fmt.Fprintf(&s, "\n[admin]\nlisten = %q\nsocket = %q\n\n", AdminAddr, socket)
	backends := b.Backends
	if o.Backends > 0 && o.Backends < len(backends) {
		backends = backends[:o.Backends]
	}
	health := "[vip.healthcheck]\ntype = \"none\"\n"
	if o.Health != "" {
		health = o.Health
	}
	vip := func(name string, addr netip.Addr, port int, proto, mode string, bport int, weights []int) {
		fmt.Fprintf(&s, "[[vip]]\nname = %q\naddress = \"%v\"\nport = %d\nprotocol = %q\nmode = %q\n", name, addr, port, proto, mode)
		if mode == "dsr" {
			src := b.BoxEgress
			if o.EncapSource.IsValid() {
				src = o.EncapSource
			}
			if addr.Is6() {
				src = BoxEgress6
			}
			fmt.Fprintf(&s, "encap_source = \"%v\"\n", src)
			s.WriteString(o.DSREncap)
		}
		s.WriteString(o.VIPKeys[name])
		if h, ok := o.HealthOf[name]; ok {
			s.WriteString(h)
		} else {
			s.WriteString(health)
		}
		for i, be := range backends {
			a := be.Addr
			if addr.Is6() {
				a = be.Addr6
			}
			fmt.Fprintf(&s, "[[vip.backend]]\naddress = \"%v\"\n", a)
			if bport != 0 {
				fmt.Fprintf(&s, "port = %d\n", bport)
			}
			if i < len(weights) {
				fmt.Fprintf(&s, "weight = %d\n", weights[i])
			}
		}
		s.WriteString("\n")
	}
	vip("web-nat", VIPNAT, 80, "tcp", "nat", 8080, o.Weights)
	vip("web-dsr", VIPDSR, 80, "tcp", "dsr", 0, nil)
	vip("udp-nat", VIPUDP, 7000, "udp", "nat", 7001, nil)
	if o.Echo {
		vip("echo-nat", VIPNAT, EchoPort, "tcp", "nat", 0, nil)
		vip("echo-dsr", VIPDSR, EchoPort, "tcp", "dsr", 0, nil)
	}
	if o.IPv6 {
		vip("web6-nat", VIPNAT6, 80, "tcp", "nat", 8080, nil)
		vip("web6-dsr", VIPDSR6, 80, "tcp", "dsr", 0, nil)
	}
	s.WriteString(o.Extra)
	return s.String()
}

// SplitFleet splits a configuration Config wrote into a fleet's halves:
// the box's own file (everything before the first [[vip]]) and the
// shared document (the [[vip]]s), without the DSR VIPs' encap_source,
// which is each box's own: a box of a fleet takes its egress address.
func SplitFleet(cfg string) (local, shared string) {
	i := strings.Index(cfg, "[[vip]]")
	return cfg[:i], encapSourceLine.ReplaceAllString(cfg[i:], "")
}

var encapSourceLine = regexp.MustCompile(`(?m)^encap_source = .*\n`)

// FleetTable is a [fleet] table on endpoints under prefix, with a 1 s
// dial timeout; box and cache (when box is not "") name the box and its
// cache file.
func FleetTable(endpoints []string, prefix, box, cache string) string {
	s := fmt.Sprintf("\n[fleet]\nendpoints = [\"%s\"]\nprefix = %q\ndial_timeout = \"1s\"\n", strings.Join(endpoints, `", "`), prefix)
	if box != "" {
		s += fmt.Sprintf("box = %q\ncache_file = %q\n", box, cache)
	}
	return s
}
