package config

// Validating the [[vip]] tables: each VIP with its encapsulation, health
// check, outlier ejection and backends, then what VIPs must agree on
// across the file (addresses, steering).

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/vipd/vipd/hashing"
)

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
	switch h.InitState {
	case InitDown, InitUp:
	default:
		c.errorf(p+".init_state", "must be %q or %q, not %q", InitDown, InitUp, h.InitState)
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
		if b.MaxFlows < 0 {
			c.errorf(bp+".max_flows", "must be 0 (no limit) or more, not %d", b.MaxFlows)
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
	// A NAT backend's replies are told apart by address, protocol and
	// port: two VIPs may share a backend on different ports. Owners are
	// indexed by port, so that a backend shared by every VIP of a large
	// fleet costs a lookup, not a walk over the VIPs before it; a
	// backend that keeps the client's port (port 0) may answer on any,
	// and is checked against every owner of its address.
	type owner struct{ vip, backend int }
	type addrKey struct {
		addr  netip.Addr
		proto Protocol
	}
	type portKey struct {
		addrKey
		port uint16
	}
	all := make(map[addrKey][]owner)     // every owner of the address
	onPort := make(map[portKey][]owner)  // the owners on one port
	anyPort := make(map[addrKey][]owner) // the owners with port 0
	for i := range vips {
		v := &vips[i]
		for k := range v.Backends {
			b := &v.Backends[k]
			bp := func() string { return fmt.Sprintf("vip[%d].backend[%d].address", i, k) }
			if vipAddrs[b.Address] && b.Address != v.Address {
				c.errorf(bp(), "%s is another VIP's address", b.Address)
			}
			if v.Mode != ModeNAT || !b.Address.IsValid() {
				continue
			}
			ak := addrKey{b.Address, v.Protocol}
			port := effectivePort(v, b)
			pk := portKey{ak, port}
			clashes := [][]owner{all[ak]}
			if port != 0 {
				clashes = [][]owner{onPort[pk], anyPort[ak]}
			}
			for _, clash := range clashes {
				for _, o := range clash {
					if o.vip == i {
						continue
					}
					c.errorf(bp(), "%s is also a NAT backend of vip[%d] (%q) on the same port: its replies could belong to either VIP; give it a different port in one of them", netip.AddrPortFrom(b.Address, port), o.vip, vips[o.vip].Name)
				}
			}
			o := owner{i, k}
			all[ak] = append(all[ak], o)
			if port == 0 {
				anyPort[ak] = append(anyPort[ak], o)
			} else {
				onPort[pk] = append(onPort[pk], o)
			}
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
