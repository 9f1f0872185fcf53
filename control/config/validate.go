package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/vipd/vipd/dsr"
)

// Limits enforced by validation. Each is chosen so that a value beyond it is
// a mistake rather than an unusual deployment.
const (
	MaxQueues       = 256
	MinConntrack    = 1024
	MaxConntrack    = 1 << 28  // ~16 GiB of table; beyond that a box needs a second vipd
	MaxTableSize    = 16777213 // the largest prime below 2^24 (hashing.MaxMaglevSize)
	MinTableFactor  = 10       // reject M < 10 × backends: the table cannot balance
	GoodTableFactor = 100      // warn under 100 × backends (NSDI 2016 §3.4)
	MaxRiseFall     = 100
	// The capacities of the AF_XDP steering program's maps
	// (dataplane/xdpprog's MaxVIPs and MaxReplies; a daemon test holds
	// them equal): distinct VIP addresses, and distinct NAT reply sources
	// (backend address, protocol, port).
	MaxSteeredVIPAddrs = 4096
	MaxNATReplySources = 1 << 18
	minRing, maxRing   = 16, 1 << 16
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

func (c *collector) validate(cfg *Config) {
	c.validateDataplane(&cfg.Dataplane, cfg)
	c.validateConntrack(&cfg.Conntrack)
	c.validateAdmin(&cfg.Admin)
	if cfg.Fleet != nil && !c.shared {
		c.validateFleet(cfg.Fleet)
	}
	if len(cfg.VIPs) == 0 && (cfg.Fleet == nil || c.shared) {
		c.warnf("vip", "no [[vip]] is defined: vipd will pass every packet to the kernel")
	}
	for i := range cfg.VIPs {
		c.validateVIP(fmt.Sprintf("vip[%d]", i), &cfg.VIPs[i])
		c.validateAnnounce(fmt.Sprintf("vip[%d]", i), &cfg.VIPs[i], cfg.BGP)
	}
	c.validateAcrossVIPs(cfg.VIPs)
	if cfg.Dataplane.IO == IOAFXDP {
		c.validateSteering(cfg.VIPs)
	}
	c.validateBGP(cfg)
}

func (c *collector) validateDataplane(d *Dataplane, cfg *Config) {
	const p = "dataplane"
	if d.Ingress == "" {
		c.errorf(p+".ingress", "required: the interface clients' packets arrive on")
	} else if err := checkIfName(d.Ingress); err != nil {
		c.errorf(p+".ingress", "%v", err)
	}
	if d.Egress != "" {
		if err := checkIfName(d.Egress); err != nil {
			c.errorf(p+".egress", "%v", err)
		}
	}
	switch d.IO {
	case IOAFXDP, IOAFPacket:
	default:
		c.errorf(p+".io", "must be %q or %q, not %q", IOAFXDP, IOAFPacket, d.IO)
	}
	if d.Queues < 1 || d.Queues > MaxQueues {
		c.errorf(p+".queues", "must be from 1 to %d, not %d", MaxQueues, d.Queues)
	}
	if d.FrameSize != 0 && d.FrameSize != 2048 && d.FrameSize != 4096 {
		c.errorf(p+".frame_size", "must be 2048 or 4096 (AF_XDP frames are a power of two no larger than a page), or 0 to pick by the MTUs, not %d", d.FrameSize)
	}
	rings := []struct {
		key string
		n   int
	}{
		{"rx_ring_size", d.RxRingSize},
		{"tx_ring_size", d.TxRingSize},
		{"fill_ring_size", d.FillRingSize},
		{"completion_ring_size", d.CompletionRingSize},
	}
	for _, r := range rings {
		if !pow2(r.n) || r.n < minRing || r.n > maxRing {
			c.errorf(p+"."+r.key, "must be a power of two from %d to %d, not %d", minRing, maxRing, r.n)
		}
	}
	if !pow2(d.FrameCount) || d.FrameCount < minRing || d.FrameCount > 1<<20 {
		c.errorf(p+".frame_count", "must be a power of two from %d to %d, not %d", minRing, 1<<20, d.FrameCount)
	} else if pow2(d.FillRingSize) && d.FrameCount < d.FillRingSize {
		c.errorf(p+".frame_count", "%d frames cannot fill a fill ring of %d: use at least fill_ring_size frames", d.FrameCount, d.FillRingSize)
	} else if d.FrameCount < d.FillRingSize+d.TxRingSize {
		c.warnf(p+".frame_count", "%d frames are fewer than fill_ring_size + tx_ring_size (%d): receive can starve while transmits are in flight", d.FrameCount, d.FillRingSize+d.TxRingSize)
	}
	if d.BatchSize < 1 || d.BatchSize > 1024 {
		c.errorf(p+".batch_size", "must be from 1 to 1024, not %d", d.BatchSize)
	} else if pow2(d.RxRingSize) && d.BatchSize > d.RxRingSize {
		c.errorf(p+".batch_size", "%d is larger than rx_ring_size (%d)", d.BatchSize, d.RxRingSize)
	}
	if d.BusyPollUsecs < 0 || d.BusyPollUsecs > MaxBusyPollUsecs {
		c.errorf(p+".busy_poll_usecs", "must be 0 (off) or from 1 to %d microseconds, not %d: a worker spins this long on an empty ring before it sleeps", MaxBusyPollUsecs, d.BusyPollUsecs)
	} else if d.BusyPollUsecs > 0 && d.IO == IOAFPacket {
		c.warnf(p+".busy_poll_usecs", "applies to io = %q only: ignored with %q", IOAFXDP, IOAFPacket)
	}
	if d.BusyPollBudget < 0 || d.BusyPollBudget > MaxBusyPollBudget {
		c.errorf(p+".busy_poll_budget", "must be 0 (batch_size) or from 1 to %d frames, not %d", MaxBusyPollBudget, d.BusyPollBudget)
	} else if pow2(d.RxRingSize) && d.BusyPollBudget > d.RxRingSize {
		c.errorf(p+".busy_poll_budget", "%d is larger than rx_ring_size (%d): one busy poll would overflow the ring", d.BusyPollBudget, d.RxRingSize)
	} else if d.BusyPollBudget > 0 && d.BusyPollUsecs == 0 {
		c.warnf(p+".busy_poll_budget", "has no effect while busy_poll_usecs is 0 (busy polling off)")
	}
	c.validateFastPath(d, &cfg.Conntrack)
	switch d.NeighborRole {
	case RoleActive, RoleStandby:
	default:
		c.errorf(p+".neighbor_role", "must be %q or %q, not %q", RoleActive, RoleStandby, d.NeighborRole)
	}
	switch d.XDPMode {
	case XDPAuto, XDPNative, XDPGeneric:
	default:
		c.errorf(p+".xdp_mode", "must be %q, %q or %q, not %q", XDPAuto, XDPNative, XDPGeneric, d.XDPMode)
	}
	if d.EgressMTU != 0 {
		minMTU := 576 // RFC 791: every IPv4 host accepts 576-byte datagrams
		for _, v := range cfg.VIPs {
			if v.Address.Is6() {
				minMTU = max(minMTU, 1280) // RFC 8200 §5
			}
			if v.Address.Is6() && v.Mode == ModeDSR {
				// 1280-byte inner packets plus the outer headers (IPv6,
				// and UDP with GUE, and with a previous-owner hint the
				// GUE header that carries it): vipd does not fragment
				// outer IPv6 packets. previous_owner is on by default
				// with GUE (validatePreviousOwner sets it later).
				over := dsr.Overhead6
				if v.Encap == EncapGUE {
					over = dsr.OverheadGUE6
					if v.PreviousOwner == nil || *v.PreviousOwner {
						over = dsr.OverheadHint6
					}
				}
				minMTU = max(minMTU, 1280+over)
			}
		}
		if d.EgressMTU < minMTU || d.EgressMTU > 65535 {
			c.errorf(p+".egress_mtu", "must be 0 (follow the interface) or from %d to 65535, not %d", minMTU, d.EgressMTU)
		}
	}
}

func (c *collector) validateConntrack(ct *Conntrack) {
	const p = "conntrack"
	if ct.Capacity < MinConntrack || ct.Capacity > MaxConntrack {
		c.errorf(p+".capacity", "must be from %d to %d flows, not %d", MinConntrack, MaxConntrack, ct.Capacity)
	}
	timeouts := []struct {
		key string
		d   Duration
	}{
		{"tcp_unestablished_timeout", ct.TCPUnestablished},
		{"tcp_unconfirmed_timeout", ct.TCPUnconfirmed},
		{"tcp_established_timeout", ct.TCPEstablished},
		{"tcp_closing_timeout", ct.TCPClosing},
		{"udp_timeout", ct.UDP},
	}
	for _, t := range timeouts {
		if t.d.D() < time.Second || t.d.D() > 7*24*time.Hour {
			c.errorf(p+"."+t.key, "must be from 1s to 168h, not %s", t.d)
		}
	}
	if ct.TCPEstablished < ct.TCPUnestablished {
		c.warnf(p+".tcp_established_timeout", "%s is shorter than tcp_unestablished_timeout (%s): idle established flows are forgotten before half-open ones", ct.TCPEstablished, ct.TCPUnestablished)
	}
	if ct.TCPEstablished < ct.TCPUnconfirmed {
		c.warnf(p+".tcp_established_timeout", "%s is shorter than tcp_unconfirmed_timeout (%s): idle established flows are forgotten before unproven ones", ct.TCPEstablished, ct.TCPUnconfirmed)
	}
}

// validateFastPath checks the fast path's knobs: its map's size, and a
// refresh shorter than every timeout a flow it holds can be under
// (Unconfirmed, Established, UDP, and Closing after a FIN it leaves to
// the workers), so that no flow's entry outlives the flow's conntrack
// entry.
func (c *collector) validateFastPath(d *Dataplane, ct *Conntrack) {
	const p = "dataplane"
	if d.FastPathFlows < 1 || d.FastPathFlows > MaxFastPathFlows {
		c.errorf(p+".fast_path_flows", "must be from 1 to %d flows, not %d", MaxFastPathFlows, d.FastPathFlows)
	}
	if d.FastPathFlows6 < 0 || d.FastPathFlows6 > MaxFastPathFlows {
		c.errorf(p+".fast_path_flows6", "must be from 0 (no IPv6 in the fast path) to %d flows, not %d", MaxFastPathFlows, d.FastPathFlows6)
	}
	shortest := shortestFlowTimeout(ct)
	switch {
	case d.FastPathRefresh.D() < 100*time.Millisecond:
		c.errorf(p+".fast_path_refresh", "must be at least 100ms, not %s: every flow passes through a worker once per refresh", d.FastPathRefresh)
	case FastPathRefreshFits(d, ct):
	case d.FastPath == FastPathOn:
		// An error only with the fast path on: the default refresh must
		// not make short timeouts an error where nothing uses it.
		c.errorf(p+".fast_path_refresh", "%s is not shorter than the shortest conntrack timeout of a flow past its handshake (%s): a flow could outlive its conntrack entry in the fast path", d.FastPathRefresh, shortest)
	case d.FastPath == FastPathAuto && d.IO == IOAFXDP:
		c.warnf(p+".fast_path_refresh", "%s is not shorter than the shortest conntrack timeout of a flow past its handshake (%s): fast_path = %q stays off; set a shorter refresh for it", d.FastPathRefresh, shortest, FastPathAuto)
	}
	if d.FastPath == FastPathOn && d.IO == IOAFPacket {
		c.warnf(p+".fast_path", "applies to io = %q only: ignored with %q", IOAFXDP, IOAFPacket)
	}
}

// FastPathRefreshFits reports whether the fast path's refresh is shorter
// than every conntrack timeout a flow it holds can be under (see
// validateFastPath): with fast_path = "auto" the fast path runs only then.
func FastPathRefreshFits(d *Dataplane, ct *Conntrack) bool {
	return d.FastPathRefresh.D() < shortestFlowTimeout(ct).D()
}

// shortestFlowTimeout is the shortest conntrack timeout a flow the fast
// path holds can be under: Unconfirmed, Established, UDP, and Closing
// after a FIN it leaves to the workers.
func shortestFlowTimeout(ct *Conntrack) Duration {
	return min(ct.TCPUnconfirmed, ct.TCPEstablished, ct.TCPClosing, ct.UDP)
}

// MaxSocketPath is the longest admin socket path, in bytes: a Unix socket
// address holds 108 bytes, the terminating NUL included.
const MaxSocketPath = 107

func (c *collector) validateAdmin(a *Admin) {
	c.validateAdminListen(a.Listen)
	c.validateAdminSocket(a.Socket)
	if a.Pprof && a.Socket == "" {
		c.errorf("admin.pprof", "profiles are served on the admin socket only: set [admin] socket too, or pprof = false")
	}
	c.validateAllowedHosts(a)
}

// validateAllowedHosts checks that every entry of allowed_hosts is a host
// name as it appears in a Host header without its port: the listener
// compares names only, so a URL, a path or a port would never match.
func (c *collector) validateAllowedHosts(a *Admin) {
	const key = "admin.allowed_hosts"
	if len(a.AllowedHosts) > 0 && a.Listen == "" {
		c.warnf(key, "has no effect: the TCP listener is disabled ([admin] listen = \"\")")
	}
	seen := map[string]int{}
	for i, h := range a.AllowedHosts {
		k := fmt.Sprintf("%s[%d]", key, i)
		switch {
		case h == "":
			c.errorf(k, "must be a host name, not empty")
			continue
		case strings.Contains(h, "://"):
			c.errorf(k, "must be a host name, not a URL such as %q", h)
			continue
		case strings.ContainsAny(h, "/?#"):
			c.errorf(k, "must be a host name, without a path, not %q", h)
			continue
		}
		if ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")); err == nil {
			c.warnf(k, "%s is an IP address: every IP address is served already, the entry has no effect", ip)
			continue
		}
		if strings.Contains(h, ":") {
			c.errorf(k, "must be a host name without a port (any port is accepted), not %q", h)
			continue
		}
		if strings.Contains(h, "*") {
			c.errorf(k, "%q: wildcards are not supported; list each name", h)
			continue
		}
		if err := checkHostName(h); err != nil {
			c.errorf(k, "%q: %v", h, err)
			continue
		}
		name := strings.ToLower(strings.TrimSuffix(h, "."))
		if name == "localhost" {
			c.warnf(k, "localhost is served already, the entry has no effect")
			continue
		}
		if j, dup := seen[name]; dup {
			c.warnf(k, "%q is listed already (%s[%d]; names are compared in any case)", h, key, j)
			continue
		}
		seen[name] = i
	}
}

// checkHostName checks a DNS name: dot-separated labels of letters,
// digits, '-' and '_' (seen in real names, though not in host names), not
// starting or ending with '-', at most 63 bytes each and 253 in all; one
// trailing dot is allowed.
func checkHostName(h string) error {
	name := strings.TrimSuffix(h, ".")
	if len(name) > 253 {
		return fmt.Errorf("a host name has at most 253 characters, not %d", len(name))
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return errors.New("must be a host name: labels of 1 to 63 characters between dots")
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return errors.New("must be a host name: a label cannot start or end with '-'")
		}
		for i := 0; i < len(label); i++ {
			if c := label[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("must be a host name: %q is not a letter, digit, '-' or '_'", c)
			}
		}
	}
	return nil
}

func (c *collector) validateAdminListen(listen string) {
	const key = "admin.listen"
	if listen == "" {
		return
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		c.errorf(key, "must be host:port (for example %q), not %q", DefaultAdminListen, listen)
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		c.errorf(key, "port must be from 0 (any free port, logged at start) to 65535, not %q", port)
	}
	if host == "localhost" {
		return
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		c.errorf(key, "host must be an IP address or localhost, not %q", host)
		return
	}
	if !ip.IsLoopback() {
		c.warnf(key, "%s is not a loopback address: anyone who reaches it can read vipd's state and metrics (drains are served on the admin socket only)", listen)
	}
}

func (c *collector) validateAdminSocket(path string) {
	const key = "admin.socket"
	switch {
	case path == "":
		// No socket: nothing can change vipd at run time but a reload.
	case !filepath.IsAbs(path):
		c.errorf(key, "must be an absolute path (for example %q), not %q", DefaultAdminSocket, path)
	case strings.HasSuffix(path, "/") || filepath.Clean(path) != path:
		c.errorf(key, "must be the clean path of a file (for example %q), not %q", DefaultAdminSocket, path)
	case strings.ContainsRune(path, 0):
		c.errorf(key, "must not contain a NUL byte")
	case len(path) > MaxSocketPath:
		c.errorf(key, "is %d bytes long; a Unix socket path can have at most %d", len(path), MaxSocketPath)
	}
}

func checkUnicast(a netip.Addr) error {
	switch {
	case !a.IsValid():
		return fmt.Errorf("required: an IPv4 or IPv6 address")
	case a.Zone() != "":
		return fmt.Errorf("%s: zoned addresses are not supported", a)
	case a.Is4In6():
		return fmt.Errorf("%s: write IPv4-mapped addresses as plain IPv4 (%s)", a, a.Unmap())
	case a.IsUnspecified(), a.IsMulticast(), a.IsLoopback(), a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return fmt.Errorf("%s is not a unicast address", a)
	}
	return nil
}

func checkIfName(name string) error {
	if len(name) > 15 {
		return fmt.Errorf("interface name %q is longer than 15 bytes", name)
	}
	for _, r := range name {
		if r == '/' || r == ' ' || r == '\t' || r == ':' || r < 0x21 || r > 0x7e {
			return fmt.Errorf("interface name %q has a character Linux does not allow", name)
		}
	}
	if name == "." || name == ".." {
		return fmt.Errorf("interface name %q is not allowed", name)
	}
	return nil
}

func pow2(n int) bool { return n > 0 && n&(n-1) == 0 }
