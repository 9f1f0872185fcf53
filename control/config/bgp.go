package config

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// BGP is the [bgp] table: vipd's BGP speaker, which announces each VIP's
// host route (/32, /128) to the upstream routers while the box forwards it.
type BGP struct {
	// ASN is vipd's own autonomous system number. Required.
	ASN uint32 `toml:"asn"`
	// RouterID is the BGP identifier, an IPv4 address. Unset means an IPv4
	// address of the egress interface, read at start.
	RouterID netip.Addr `toml:"router_id"`
	// HoldTime is proposed in OPEN (whole seconds, 0 or 3s..65535s); the
	// session's is the smaller of the two sides'. Keepalive is the
	// interval of KEEPALIVEs, shorter than the hold time.
	HoldTime  Duration `toml:"hold_time"`
	Keepalive Duration `toml:"keepalive"`
	// GracefulRestart is the restart time advertised in the graceful
	// restart capability (RFC 4724): how long routers keep vipd's routes
	// when its sessions drop without a NOTIFICATION. 0 turns it off.
	GracefulRestart Duration `toml:"graceful_restart"`
	// Linger is how long a lame-duck box keeps forwarding after it has
	// withdrawn everything, so that routers converge away from it.
	Linger Duration `toml:"linger"`
	// DrainOnStop: SIGTERM lame-ducks the box first (withdraw, linger),
	// then stops. A second SIGTERM stops at once.
	DrainOnStop bool `toml:"drain_on_stop"`
	// ListenPort is the TCP port vipd accepts BGP connections on when a
	// peer is passive; with no passive peer vipd does not listen.
	ListenPort uint16 `toml:"listen_port"`
	Peers      []Peer `toml:"peer"`
}

// Family is an address family vipd announces to a peer.
type Family string

const (
	FamilyIPv4 Family = "ipv4" // IPv4 unicast
	FamilyIPv6 Family = "ipv6" // IPv6 unicast (MP-BGP, RFC 4760)
)

// Peer is one [[bgp.peer]]: a router vipd announces to.
type Peer struct {
	Address netip.Addr `toml:"address"`
	ASN     uint32     `toml:"asn"`
	Port    uint16     `toml:"port"`
	// Passive: vipd waits for the peer to connect (to listen_port).
	Passive bool `toml:"passive"`
	// Password turns on TCP MD5 signatures (RFC 2385).
	Password string `toml:"password"`
	// MultihopTTL, when not 0, is the TTL of an eBGP session to a peer
	// that is not directly connected.
	MultihopTTL uint8    `toml:"multihop_ttl"`
	Families    []Family `toml:"families"`
}

// BGP defaults and limits.
const (
	DefaultHoldTime    = 90 * time.Second // RFC 4271 §10's suggestion
	DefaultKeepalive   = 30 * time.Second // a third of the hold time
	DefaultLinger      = 30 * time.Second
	DefaultDrainOnStop = true
	DefaultBGPPort     = 179
	MaxRestartTime     = 4095 * time.Second // 12 bits (RFC 4724 §3)
	MaxTCPMD5Key       = 80                 // TCP_MD5SIG_MAXKEYLEN
	MaxLinger          = time.Hour
)

func (b *BGP) setDefaults() {
	*b = BGP{
		HoldTime: Duration(DefaultHoldTime), Keepalive: Duration(DefaultKeepalive),
		Linger: Duration(DefaultLinger), DrainOnStop: DefaultDrainOnStop, ListenPort: DefaultBGPPort,
	}
}

func (p *Peer) setDefaults() {
	*p = Peer{Port: DefaultBGPPort, Families: []Family{FamilyIPv4, FamilyIPv6}}
}

// HasFamily reports whether the peer is sent routes of family f.
func (p *Peer) HasFamily(f Family) bool {
	for _, g := range p.Families {
		if g == f {
			return true
		}
	}
	return false
}

// ParseCommunity parses "ASN:VALUE" (each 0..65535) into the 32-bit
// community of RFC 1997.
func ParseCommunity(s string) (uint32, error) {
	hi, lo, ok := strings.Cut(s, ":")
	a, err1 := strconv.ParseUint(hi, 10, 16)
	b, err2 := strconv.ParseUint(lo, 10, 16)
	if !ok || err1 != nil || err2 != nil {
		return 0, fmt.Errorf("community %q must be ASN:VALUE, two numbers from 0 to 65535 (for example \"65000:100\")", s)
	}
	return uint32(a)<<16 | uint32(b), nil
}

// wholeSeconds reports whether d is a whole number of seconds, as BGP
// timers are on the wire.
func wholeSeconds(d Duration) bool { return d.D()%time.Second == 0 }

func (c *collector) validateBGP(cfg *Config) {
	b := cfg.BGP
	if b == nil {
		for i := range cfg.VIPs {
			if cfg.VIPs[i].Announced() {
				c.errorf(fmt.Sprintf("vip[%d].announce", i), "needs a [bgp] table: there is no BGP speaker to announce the VIP")
			}
		}
		return
	}
	const p = "bgp"
	if b.ASN == 0 {
		c.errorf(p+".asn", "required: vipd's autonomous system number, from 1 to 4294967295")
	} else if b.ASN == 23456 {
		c.errorf(p+".asn", "23456 is AS_TRANS (RFC 6793), not an AS number")
	}
	if b.RouterID.IsValid() && (!b.RouterID.Is4() || b.RouterID.IsUnspecified()) {
		c.errorf(p+".router_id", "must be a non-zero IPv4 address (the BGP identifier is 32 bits), not %s", b.RouterID)
	}
	hold, ka := b.HoldTime.D(), b.Keepalive.D()
	switch {
	case !wholeSeconds(b.HoldTime) || hold < 0 || hold > 65535*time.Second || (hold > 0 && hold < 3*time.Second):
		c.errorf(p+".hold_time", "must be 0 (no hold timer) or whole seconds from 3s to 65535s (RFC 4271 §4.2), not %s", b.HoldTime)
	case !wholeSeconds(b.Keepalive) || ka < time.Second || (hold > 0 && ka >= hold):
		c.errorf(p+".keepalive", "must be whole seconds from 1s, shorter than hold_time (%s), not %s", b.HoldTime, b.Keepalive)
	case hold > 0 && ka > hold/3:
		c.warnf(p+".keepalive", "%s is more than a third of hold_time (%s): one lost KEEPALIVE can drop the session", b.Keepalive, b.HoldTime)
	}
	if gr := b.GracefulRestart.D(); !wholeSeconds(b.GracefulRestart) || gr < 0 || gr > MaxRestartTime {
		c.errorf(p+".graceful_restart", "must be 0 (off) or whole seconds up to %s (12 bits, RFC 4724), not %s", MaxRestartTime, b.GracefulRestart)
	}
	if l := b.Linger.D(); l < 0 || l > MaxLinger {
		c.errorf(p+".linger", "must be from 0s to %s, not %s", MaxLinger, b.Linger)
	}
	if len(b.Peers) == 0 {
		c.errorf(p, "needs at least one [[bgp.peer]]: a speaker with no peer announces nothing")
	}
	vipAddrs := map[netip.Addr]bool{}
	for i := range cfg.VIPs {
		vipAddrs[cfg.VIPs[i].Address] = true
	}
	seen := map[netip.Addr]int{}
	for i := range b.Peers {
		c.validatePeer(fmt.Sprintf("%s.peer[%d]", p, i), &b.Peers[i], vipAddrs, seen, i)
	}
	if b.ListenPort == 0 {
		for i := range b.Peers {
			if b.Peers[i].Passive {
				c.errorf(p+".listen_port", "must not be 0: bgp.peer[%d] is passive and connects to vipd", i)
				break
			}
		}
	}
}

func (c *collector) validatePeer(p string, pe *Peer, vipAddrs map[netip.Addr]bool, seen map[netip.Addr]int, i int) {
	// A loopback peer is allowed: a routing daemon on the box itself
	// (which then redistributes the routes) is a common setup.
	if err := checkUnicast(pe.Address); err != nil && !pe.Address.IsLoopback() {
		c.errorf(p+".address", "%v", err)
	} else if vipAddrs[pe.Address] {
		c.errorf(p+".address", "%s is a VIP's address", pe.Address)
	} else if j, dup := seen[pe.Address]; dup {
		c.errorf(p+".address", "duplicate peer %s (same as bgp.peer[%d])", pe.Address, j)
	} else {
		seen[pe.Address] = i
	}
	if pe.ASN == 0 {
		c.errorf(p+".asn", "required: the peer's autonomous system number, from 1 to 4294967295")
	}
	if pe.Port == 0 {
		c.errorf(p+".port", "must be from 1 to 65535, not 0")
	}
	if len(pe.Password) > MaxTCPMD5Key {
		c.errorf(p+".password", "is %d bytes long; a TCP MD5 key has at most %d", len(pe.Password), MaxTCPMD5Key)
	}
	if len(pe.Families) == 0 {
		c.errorf(p+".families", "must name at least one of %q and %q", FamilyIPv4, FamilyIPv6)
	}
	fams := map[Family]bool{}
	for _, f := range pe.Families {
		switch {
		case f != FamilyIPv4 && f != FamilyIPv6:
			c.errorf(p+".families", "must be %q or %q, not %q", FamilyIPv4, FamilyIPv6, f)
		case fams[f]:
			c.errorf(p+".families", "names %q twice", f)
		}
		fams[f] = true
	}
}

// validateAnnounce checks a VIP's BGP keys and fills in the defaults of
// announce and neighbor_announce, which depend on whether [bgp] exists.
func (c *collector) validateAnnounce(p string, v *VIP, bgp *BGP) {
	if v.Announce == nil {
		on := bgp != nil
		v.Announce = &on
	}
	if v.NeighborAnnounce == nil {
		on := !*v.Announce
		v.NeighborAnnounce = &on
	}
	for _, s := range v.Communities {
		if _, err := ParseCommunity(s); err != nil {
			c.errorf(p+".communities", "%v", err)
		}
	}
	if n := len(v.Backends); n > 0 && (v.MinHealthy < 0 || v.MinHealthy > n) {
		c.errorf(p+".min_healthy", "must be from 0 to the number of backends (%d), not %d", len(v.Backends), v.MinHealthy)
	} else if *v.Announce {
		// Only active backends count as up; draining and disabled ones
		// never do (a whole VIP drained in the configuration is a
		// legitimate state, so this is no error).
		active := 0
		for i := range v.Backends {
			if v.Backends[i].State == StateActive {
				active++
			}
		}
		if v.MinHealthy > active {
			c.warnf(p+".min_healthy", "is %d but %d backends are active (the others are draining or disabled): the VIP is not announced until min_healthy of them are up", v.MinHealthy, active)
		}
	}
	if *v.Announce && !*v.NeighborAnnounce && bgp != nil && v.Address.IsValid() {
		fam := FamilyIPv4
		if v.Address.Is6() {
			fam = FamilyIPv6
		}
		sent := false
		for _, pe := range bgp.Peers {
			for _, f := range pe.Families {
				sent = sent || f == fam
			}
		}
		if !sent {
			c.warnf(p+".announce", "no BGP peer has family %q: the VIP %s is announced to no router, and neighbor_announce is off", fam, v.Address)
		}
	}
	if !*v.Announce && (len(v.Communities) > 0 || v.MED != 0) {
		c.warnf(p+".announce", "the VIP is not announced over BGP: its communities and med have no effect")
	}
	c.warnSchedAnnounced(p, v)
	if *v.Announce && *v.NeighborAnnounce {
		c.warnf(p+".neighbor_announce", "the VIP is announced over BGP and answered by ARP/NDP too: with several boxes on the router's segment, they would all answer for it")
	}
}
