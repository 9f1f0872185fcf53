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
	"github.com/vipd/vipd/hashing"
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
	if len(cfg.VIPs) == 0 {
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

func (c *collector) validateVIP(p string, v *VIP) {
	if v.Name == "" {
		c.errorf(p+".name", "required")
	} else if !nameRE.MatchString(v.Name) {
		c.errorf(p+".name", "%q must be 1 to 63 letters, digits, '_', '.' or '-', starting with a letter or digit", v.Name)
	}
	if err := checkUnicast(v.Address); err != nil {
		c.errorf(p+".address", "%v", err)
	}
	switch v.Protocol {
	case TCP, UDP:
	default:
		c.errorf(p+".protocol", "must be %q or %q, not %q", TCP, UDP, v.Protocol)
	}
	switch v.Mode {
	case ModeNAT, ModeDSR:
	default:
		c.errorf(p+".mode", "must be %q or %q, not %q", ModeNAT, ModeDSR, v.Mode)
	}
	c.validateSched(p, v)
	switch v.FlowHash {
	case Hash5Tuple, HashSrcIP:
	default:
		c.errorf(p+".flow_hash", "must be %q or %q, not %q", Hash5Tuple, HashSrcIP, v.FlowHash)
	}
	if v.EncapSource.IsValid() {
		if v.Mode != ModeDSR {
			c.errorf(p+".encap_source", "only applies to mode = %q", ModeDSR)
		} else if err := checkUnicast(v.EncapSource); err != nil {
			c.errorf(p+".encap_source", "%v", err)
		} else if v.Address.IsValid() && v.EncapSource.Is4() != v.Address.Is4() {
			c.errorf(p+".encap_source", "%s is not of the VIP's address family (%s)", v.EncapSource, v.Address)
		}
	}
	c.validateEncap(p, v)
	c.validatePreviousOwner(p, v)
	c.validateTableSize(p, v)
	c.validateHealthCheck(p, v)
	c.validateOutlier(p, v)
	c.validateBackends(p, v)
	c.validateQUICLB(p, v)
}

// validateEncap checks encap, gue_port and encap_source_prefix. The
// decoder saw whether a key was written; a default needs no check, so
// only values other than the defaults are held to the mode.
func (c *collector) validateEncap(p string, v *VIP) {
	switch v.Encap {
	case EncapIPIP, EncapGUE:
	default:
		c.errorf(p+".encap", "must be %q or %q, not %q", EncapIPIP, EncapGUE, v.Encap)
	}
	if v.Mode != ModeDSR && v.Encap != DefaultEncap {
		c.errorf(p+".encap", "only applies to mode = %q", ModeDSR)
	}
	if v.GUEPort == 0 {
		c.errorf(p+".gue_port", "must be a port, 1-65535")
	} else if v.GUEPort != DefaultGUEPort && v.Encap != EncapGUE {
		c.errorf(p+".gue_port", "only applies to encap = %q", EncapGUE)
	}
	pf := v.EncapSourcePrefix
	if !pf.IsValid() {
		return
	}
	key := p + ".encap_source_prefix"
	switch {
	case v.Mode != ModeDSR || v.Encap != EncapIPIP:
		c.errorf(key, "only applies to mode = %q with encap = %q (GUE varies its UDP source port instead)", ModeDSR, EncapIPIP)
	case pf != pf.Masked():
		c.errorf(key, "%s has host bits set; write %s", pf, pf.Masked())
	case v.Address.IsValid() && pf.Addr().Is4() != v.Address.Is4():
		c.errorf(key, "%s is not of the VIP's address family (%s)", pf, v.Address)
	case pf.Addr().BitLen()-pf.Bits() < 1:
		c.errorf(key, "%s has a single address; per-flow sources need a shorter prefix", pf)
	case v.EncapSource.IsValid() && !pf.Contains(v.EncapSource):
		c.errorf(key, "does not contain encap_source %s", v.EncapSource)
	default:
		if err := checkUnicast(pf.Addr()); err != nil {
			c.errorf(key, "%v", err)
		}
	}
}

// validatePreviousOwner checks previous_owner, previous_owner_ttl and
// previous_owner_udp.
func (c *collector) validatePreviousOwner(p string, v *VIP) {
	gue := v.Mode == ModeDSR && v.Encap == EncapGUE
	if v.PreviousOwner == nil {
		v.PreviousOwner = &gue // on where it can be
	}
	if *v.PreviousOwner && !gue {
		c.errorf(p+".previous_owner", "needs mode = %q with encap = %q: the hint travels in GUE (IP in IP and NAT cannot carry it)", ModeDSR, EncapGUE)
	}
	if d := v.PreviousOwnerTTL.D(); d < time.Second || d > 7*24*time.Hour {
		c.errorf(p+".previous_owner_ttl", "must be from 1s to 168h, not %s", v.PreviousOwnerTTL)
	} else if d != DefaultPreviousOwnerTTL && !*v.PreviousOwner {
		c.errorf(p+".previous_owner_ttl", "only applies with previous_owner = true")
	}
	if v.PreviousOwnerUDP && (!*v.PreviousOwner || v.Protocol != UDP) {
		c.errorf(p+".previous_owner_udp", "only applies to a UDP VIP with previous_owner = true")
	}
}

func (c *collector) validateOutlier(p string, v *VIP) {
	p += ".outlier"
	o := &v.Outlier
	if !o.Enabled {
		return
	}
	if v.Protocol != TCP {
		c.errorf(p+".enabled", "needs protocol = %q: outliers are judged by their TCP handshakes", TCP)
	}
	if o.Window.D() < time.Second || o.Window.D() > time.Hour {
		c.errorf(p+".window", "must be from 1s to 1h, not %s", o.Window)
	}
	if o.Timeout.D() < 100*time.Millisecond || o.Timeout.D() > time.Minute {
		c.errorf(p+".timeout", "must be from 100ms to 1m, not %s", o.Timeout)
	}
	if o.MinHandshakes < 1 {
		c.errorf(p+".min_handshakes", "must be at least 1, not %d", o.MinHandshakes)
	}
	if !(o.FailureRatio > 0 && o.FailureRatio <= 1) {
		c.errorf(p+".failure_ratio", "must be in (0, 1], not %v", o.FailureRatio)
	}
	if o.BaseEjection.D() < time.Second {
		c.errorf(p+".base_ejection", "must be at least 1s, not %s", o.BaseEjection)
	}
	if o.MaxEjection < o.BaseEjection {
		c.errorf(p+".max_ejection", "%s is shorter than base_ejection (%s)", o.MaxEjection, o.BaseEjection)
	}
	if o.MaxEjectedPercent < 1 || o.MaxEjectedPercent > 100 {
		c.errorf(p+".max_ejected_percent", "must be from 1 to 100, not %d", o.MaxEjectedPercent)
	}
}

func (c *collector) validateTableSize(p string, v *VIP) {
	key := p + ".table_size"
	m, n := uint64(v.TableSize), uint64(len(v.Backends))
	switch {
	case m > MaxTableSize:
		c.errorf(key, "must be at most %d, not %d", MaxTableSize, m)
	case !hashing.IsPrime(m):
		c.errorf(key, "%d is not prime: Maglev needs a prime table size (for example 65537 or 655373)", m)
	case n > 0 && m < MinTableFactor*n:
		c.errorf(key, "%d is too small for %d backends: use at least %d× the backend count (a prime ≥ %d)", m, n, MinTableFactor, MinTableFactor*n)
	case n > 0 && m < GoodTableFactor*n:
		c.warnf(key, "%d is under %d× the %d backends: expect uneven shares and more flows moved when backends change", m, GoodTableFactor, n)
	}
}

func (c *collector) validateHealthCheck(p string, v *VIP) {
	p += ".healthcheck"
	h := &v.HealthCheck
	switch h.Type {
	case CheckTCP, CheckHTTP, CheckNone:
	default:
		c.errorf(p+".type", "must be %q, %q or %q, not %q", CheckTCP, CheckHTTP, CheckNone, h.Type)
		return
	}
	switch h.OnAllDown {
	case AllDownDrop, AllDownIgnoreHealth:
	default:
		c.errorf(p+".on_all_down", "must be %q or %q, not %q", AllDownDrop, AllDownIgnoreHealth, h.OnAllDown)
	}
	c.validateProbe(p, v)
	c.validateLoadReport(p, h)
	if h.Type == CheckNone {
		return
	}
	if h.Interval.D() < 10*time.Millisecond || h.Interval.D() > time.Hour {
		c.errorf(p+".interval", "must be from 10ms to 1h, not %s", h.Interval)
	}
	if h.Timeout.D() <= 0 {
		c.errorf(p+".timeout", "must be positive, not %s", h.Timeout)
	} else if h.Timeout > h.Interval {
		c.errorf(p+".timeout", "%s is longer than the interval (%s): checks would overlap", h.Timeout, h.Interval)
	}
	if h.Rise < 1 || h.Rise > MaxRiseFall {
		c.errorf(p+".rise", "must be from 1 to %d, not %d", MaxRiseFall, h.Rise)
	}
	if h.Fall < 1 || h.Fall > MaxRiseFall {
		c.errorf(p+".fall", "must be from 1 to %d, not %d", MaxRiseFall, h.Fall)
	}
	if h.SlowStart < 0 || h.SlowStart.D() > 24*time.Hour {
		c.errorf(p+".slow_start", "must be from 0s to 24h, not %s", h.SlowStart)
	}
	if h.Type == CheckHTTP {
		if len(h.Path) == 0 || h.Path[0] != '/' {
			c.errorf(p+".path", "must start with '/', not %q", h.Path)
		}
		if h.DrainStatus != 0 && (h.DrainStatus < 100 || h.DrainStatus > 599) {
			c.errorf(p+".drain_status", "must be 0 (off) or an HTTP status from 100 to 599, not %d", h.DrainStatus)
		}
		if h.DrainHeader != "" && h.DrainStatus == 0 {
			c.errorf(p+".drain_header", "needs drain_status: the header qualifies a draining status")
		}
	} else {
		if h.DrainStatus != 0 {
			c.errorf(p+".drain_status", "only applies to type = %q", CheckHTTP)
		}
		if h.DrainHeader != "" {
			c.errorf(p+".drain_header", "only applies to type = %q", CheckHTTP)
		}
	}
	if h.Port == 0 && v.Port == 0 {
		for _, b := range v.Backends {
			if b.Port == 0 {
				c.errorf(p+".port", "required: the VIP serves every port, so there is no port to probe")
				break
			}
		}
	}
}

// validateProbe checks probe and fills in its default, which depends on
// the mode (so Default cannot hold it): tunnel for DSR, direct for NAT.
func (c *collector) validateProbe(p string, v *VIP) {
	h := &v.HealthCheck
	switch h.Probe {
	case "":
		h.Probe = ProbeDirect
		if v.Mode == ModeDSR {
			h.Probe = ProbeTunnel
		}
	case ProbeDirect:
	case ProbeTunnel:
		if v.Mode != ModeDSR {
			c.errorf(p+".probe", "%q only applies to mode = %q: a NAT backend is probed on its own address, which is what its traffic reaches", ProbeTunnel, ModeDSR)
		}
	default:
		c.errorf(p+".probe", "must be %q or %q, not %q", ProbeTunnel, ProbeDirect, h.Probe)
	}
}

func (c *collector) validateBackends(p string, v *VIP) {
	if len(v.Backends) == 0 {
		c.errorf(p+".backend", "a VIP needs at least one [[vip.backend]]")
		return
	}
	if len(v.Backends) > hashing.MaxBackends {
		c.errorf(p+".backend", "%d backends; a VIP has at most %d (a Maglev table slot holds a 16-bit backend number)", len(v.Backends), hashing.MaxBackends)
	}
	seen := make(map[netip.AddrPort]int)
	active := 0
	for i := range v.Backends {
		b := &v.Backends[i]
		bp := fmt.Sprintf("%s.backend[%d]", p, i)
		if err := checkUnicast(b.Address); err != nil {
			c.errorf(bp+".address", "%v", err)
		} else {
			if v.Address.IsValid() && b.Address.Is4() != v.Address.Is4() {
				c.errorf(bp+".address", "%s mixes address families with the VIP %s: a VIP's backends must all be of its family", b.Address, v.Address)
			}
			if b.Address == v.Address {
				c.errorf(bp+".address", "%s is the VIP's own address", b.Address)
			}
			// Port 0 is the VIP's port: the same endpoint as that port
			// written out.
			port := b.Port
			if port == 0 {
				port = v.Port
			}
			ap := netip.AddrPortFrom(b.Address, port)
			if j, dup := seen[ap]; dup {
				c.errorf(bp+".address", "duplicate backend %s (same as backend[%d])", ap, j)
			} else {
				seen[ap] = i
			}
		}
		if b.Port != 0 {
			if v.Mode == ModeDSR {
				c.errorf(bp+".port", "DSR cannot rewrite ports: the packet reaches the backend unmodified inside the tunnel, so the backend must listen on the VIP port; remove port")
			} else if v.Port == 0 {
				c.errorf(bp+".port", "the VIP serves every port (port = 0), so its backends cannot rewrite the port; remove port")
			}
		}
		if b.Weight < MinWeight || b.Weight > MaxWeight {
			msg := fmt.Sprintf("must be from %d to %d, not %d", MinWeight, MaxWeight, b.Weight)
			if b.Weight == 0 {
				msg += ` (0 is not a weight: set state = "draining" or "disabled" to stop new flows)`
			}
			c.errorf(bp+".weight", "%s", msg)
		}
		switch b.State {
		case StateActive:
			active++
		case StateDraining, StateDisabled:
		default:
			c.errorf(bp+".state", "must be %q, %q or %q, not %q", StateActive, StateDraining, StateDisabled, b.State)
		}
	}
	if active == 0 {
		c.errorf(p+".backend", "no backend has state = %q: the VIP could not take a single new flow", StateActive)
	}
}

// validateAcrossVIPs finds conflicts between VIPs: two VIPs matching the same
// packets, and NAT backends whose replies could belong to two VIPs (vipd
// reverse-translates a reply by its source backend address, port and
// protocol, which must therefore name one VIP).
func (c *collector) validateAcrossVIPs(vips []VIP) {
	names := make(map[string]int)
	vipAddrs := make(map[netip.Addr]bool)
	for i := range vips {
		v := &vips[i]
		p := fmt.Sprintf("vip[%d]", i)
		if v.Name != "" {
			if j, dup := names[v.Name]; dup {
				c.errorf(p+".name", "duplicate VIP name %q (same as vip[%d])", v.Name, j)
			} else {
				names[v.Name] = i
			}
		}
		vipAddrs[v.Address] = true
		for j := 0; j < i; j++ {
			w := &vips[j]
			if v.Address.IsValid() && v.Address == w.Address && v.Protocol == w.Protocol &&
				(v.Port == w.Port || v.Port == 0 || w.Port == 0) {
				c.errorf(p+".address", "%s overlaps vip[%d] (%q, %s): two VIPs would match the same packets (port 0 means every port)", v.Key(), j, w.Name, w.Key())
			}
		}
	}
	type owner struct{ vip, backend int }
	type replyKey struct {
		addr  netip.Addr
		proto Protocol
	}
	natOwners := make(map[replyKey][]owner)
	for i := range vips {
		v := &vips[i]
		for k := range v.Backends {
			b := &v.Backends[k]
			bp := fmt.Sprintf("vip[%d].backend[%d].address", i, k)
			if vipAddrs[b.Address] && b.Address != v.Address {
				c.errorf(bp, "%s is another VIP's address", b.Address)
			}
			if v.Mode != ModeNAT || !b.Address.IsValid() {
				continue
			}
			rk := replyKey{b.Address, v.Protocol}
			port := effectivePort(v, b)
			for _, o := range natOwners[rk] {
				if o.vip == i {
					continue
				}
				w := &vips[o.vip]
				wport := effectivePort(w, &w.Backends[o.backend])
				if port == wport || port == 0 || wport == 0 {
					c.errorf(bp, "%s is also a NAT backend of vip[%d] (%q) on the same port: its replies could belong to either VIP; give it a different port in one of them", netip.AddrPortFrom(b.Address, port), o.vip, w.Name)
				}
			}
			natOwners[rk] = append(natOwners[rk], owner{i, k})
		}
	}
}

// validateSteering checks that the AF_XDP steering program's maps can
// hold what the VIPs steer; a configuration past them would pass -check
// and then fail at start, or have its reload refused.
func (c *collector) validateSteering(vips []VIP) {
	type reply struct {
		addr  netip.Addr
		proto Protocol
		port  uint16
	}
	addrs := make(map[netip.Addr]bool)
	replies := make(map[reply]bool)
	for i := range vips {
		v := &vips[i]
		addrs[v.Address] = true
		if v.Mode != ModeNAT {
			continue
		}
		for k := range v.Backends {
			b := &v.Backends[k]
			replies[reply{b.Address, v.Protocol, effectivePort(v, b)}] = true
		}
	}
	if len(addrs) > MaxSteeredVIPAddrs {
		c.errorf("vip", "%d distinct VIP addresses; with io = %q the steering program holds at most %d", len(addrs), IOAFXDP, MaxSteeredVIPAddrs)
	}
	if len(replies) > MaxNATReplySources {
		c.errorf("vip", "%d distinct NAT backends (address, protocol, port); with io = %q the steering program holds at most %d", len(replies), IOAFXDP, MaxNATReplySources)
	}
}

// effectivePort is the port a NAT backend receives on (and replies from);
// 0 means every port.
func effectivePort(v *VIP, b *Backend) uint16 {
	if b.Port != 0 {
		return b.Port
	}
	return v.Port
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
