package decap

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"
)

// Defaults for the zero values of Options.
const (
	DefaultTUN           = "vipd-tun0"
	DefaultLocalRefresh  = 2 * time.Second
	DefaultReceiveBuffer = 4 << 20 // bytes per socket
	DefaultChainCache    = 4096    // flows
	DefaultChainCacheTTL = time.Second
)

// MaxChainCache bounds Options.ChainCache (about 80 bytes a flow).
const MaxChainCache = 1 << 22

// Options configures New. The zero value is usable: IPIP over IPv4 only,
// no GUE, any outer source, no local-destination check, no VIPs, host
// sysctls checked but not changed, forwarding off on the TUN. It is not
// what a host reachable from outside should run: set AllowedSources and
// CheckLocal (cmd/vipd-decap insists on -allow and checks by default).
type Options struct {
	// TUN is the name of the TUN device New creates; "" means DefaultTUN.
	// A device of that name must not exist already (another decapsulator
	// holding it makes New fail with EBUSY rather than share it).
	TUN string

	// IPv6 also receives IPv6-in-IPv6 (outer next header 41, RFC 2473).
	IPv6 bool

	// GUEPort, when not 0, also receives GUE variant 1 (IP directly in
	// UDP, no GUE header; see the package documentation), and variant 0
	// with vipd's previous-owner hint, on this UDP port,
	// over IPv4 and, with IPv6, over IPv6. vipd's default is
	// DefaultGUEPort. The port must be free: a kernel fou port or another
	// socket holding it makes New fail.
	GUEPort uint16

	// GUESockets is the number of UDP sockets per family that receive on
	// GUEPort, each read by its own goroutine; 0 means 1. With more than
	// one they form an SO_REUSEPORT group: the kernel picks a socket per
	// datagram by a hash of its addresses and ports, so each flow (vipd
	// gives each its own source port) stays on one socket, in order,
	// while flows spread over sockets and cores — what GUE is for.
	GUESockets int

	// VIPs are put on the loopback interface (/32, /128) by New, which
	// also sets net.ipv4.conf.all.arp_ignore=1 and arp_announce=2 when
	// they are lower (see the package documentation). Close removes the
	// addresses New added and restores the sysctls New changed; a VIP
	// that was on loopback already stays, as does a sysctl that was
	// already high enough.
	VIPs []netip.Addr

	// AllowedSources lists the outer source addresses accepted, normally
	// vipd's encapsulation addresses. Empty accepts any source: then anyone
	// who can reach this host can have packets of any source address
	// delivered to its stack, so set it on every host that is reachable
	// from outside a trusted network.
	AllowedSources []netip.Prefix

	// Chain turns on previous-owner forwarding for GUE datagrams that
	// carry a previous-owner hint (docs/decap.md, "Previous-owner hints at
	// the backend"): such a packet is delivered here when it starts a
	// connection, was chained here by another backend, or belongs to a
	// connection a local socket has; otherwise it is sent on, marked
	// HintChained, to the previous owner's GUEPort, if that owner is in
	// ChainPeers (else it is dropped, DropChainTarget). Without it, a
	// hinted packet is delivered as if it had no hint (counted as
	// HintOff). It needs GUEPort and ChainPeers. Set AllowedSources with
	// it: without an allow-list anyone who reaches the GUE port can have
	// this host send datagrams (of the size they sent) to the chain peers'
	// GUEPort.
	Chain bool

	// ChainPeers lists the other backends' addresses (or prefixes): the
	// only previous owners a packet is chained to, and outer sources
	// accepted only for packets another backend chained (HintChained
	// set). AllowedSources still governs every other packet; with
	// AllowedSources empty, any source is accepted anyway. Chain needs
	// at least one: with none, every packet to chain would be dropped.
	ChainPeers []netip.Prefix

	// ChainCache is the number of flows whose lookup result is
	// remembered, so that a flow whose every packet carries a hint costs
	// one kernel lookup per ChainCacheTTL; 0 means DefaultChainCache.
	// Rounded up to a power of two.
	ChainCache int

	// ChainCacheTTL is how long a lookup result is remembered; 0 means
	// DefaultChainCacheTTL. A connection start (SYN) for the flow forgets
	// it at once.
	ChainCacheTTL time.Duration

	// CheckLocal drops inner packets whose destination is not an address
	// of this host (DropNotLocal). Without it, such a packet reaches the
	// kernel, which drops an IPv4 one (the TUN's forwarding is off; see
	// Forwarding) but routes an IPv6 one on wherever the host forwards
	// IPv6. Addresses count, local routes do not: a host that takes a
	// whole prefix with `ip route add local PREFIX dev lo` needs it off.
	CheckLocal bool

	// LocalRefresh is how often the local addresses are re-read when
	// CheckLocal is set, besides when the kernel says they changed (so
	// that a VIP added to loopback is accepted a moment later, not up to
	// LocalRefresh later), and how often the TUN's forwarding sysctls
	// are checked (see Forwarding); 0 means DefaultLocalRefresh.
	LocalRefresh time.Duration

	// Forwarding leaves IP forwarding on the TUN device as the kernel
	// sets it for a new interface (from net.ipv4.conf.default.forwarding
	// and its IPv6 twin, that is on wherever the host forwards), which
	// was the only behaviour before. Without it New sets
	// net.ipv4.conf.<tun>.forwarding=0 and, with IPv6,
	// net.ipv6.conf.<tun>.forwarding=0 and force_forwarding=0, and Run
	// sets them back to 0 when a host-wide write (net.ipv4.ip_forward
	// going from 0 to 1, as Docker does on start) turned them on, so
	// that an inner IPv4 packet not addressed to this host is dropped by
	// the kernel (counted in Ip InAddrErrors) instead of routed on, even
	// without CheckLocal. IPv6 is not stopped so: Linux forwards IPv6 by
	// net.ipv6.conf.all.forwarding alone, whatever the input interface's
	// forwarding says; there only CheckLocal keeps the host from
	// relaying.
	Forwarding bool

	// FixSysctls lets New change host-wide sysctls that would make the
	// kernel drop decapsulated packets (net.ipv4.conf.all.rp_filter; see
	// the package documentation), keeping every other interface's
	// effective setting; Close restores them. Without it New fails and
	// names the command to run.
	FixSysctls bool

	// ReceiveBuffer is the receive buffer size in bytes asked for each raw
	// socket; 0 means DefaultReceiveBuffer. The kernel doubles it for its
	// bookkeeping, as for SO_RCVBUF.
	ReceiveBuffer int

	// Logger receives what New and Run change or fail to do in the
	// background (sysctls set, local address refresh errors); nil
	// discards it. Nothing is logged per packet.
	Logger *slog.Logger
}

// Validate reports what New would refuse in o before it touches anything:
// a bad TUN name, prefix or VIP, a negative duration or size.
func (o Options) Validate() error {
	_, err := o.withDefaults()
	return err
}

// MaxGUESockets bounds Options.GUESockets: each socket costs a goroutine,
// a 64 KiB buffer and its receive buffer; no host has more receive queues.
const MaxGUESockets = 1024

// ifNameMax is the longest interface name Linux accepts (IFNAMSIZ - 1).
const ifNameMax = 15

// withDefaults validates o and fills in its defaults.
func (o Options) withDefaults() (Options, error) {
	if o.TUN == "" {
		o.TUN = DefaultTUN
	}
	if len(o.TUN) > ifNameMax || strings.ContainsAny(o.TUN, "/ :%") || o.TUN == "." || o.TUN == ".." {
		// '%' would let the kernel pick the name ("tun%d"); the sysctl
		// paths need the name before the device exists.
		return o, fmt.Errorf("decap: bad TUN name %q: at most %d bytes, no '/', ' ', ':' or '%%'", o.TUN, ifNameMax)
	}
	for _, p := range o.AllowedSources {
		if !p.IsValid() {
			return o, errors.New("decap: invalid prefix in AllowedSources")
		}
	}
	for _, p := range o.ChainPeers {
		if !p.IsValid() {
			return o, errors.New("decap: invalid prefix in ChainPeers")
		}
	}
	if o.Chain && o.GUEPort == 0 {
		return o, errors.New("decap: Chain needs GUEPort: hints come only over GUE")
	}
	if o.Chain && len(o.ChainPeers) == 0 {
		return o, errors.New("decap: Chain needs ChainPeers: packets are chained only to an address in it, so without any every packet to chain would be dropped")
	}
	if o.ChainCache < 0 || o.ChainCache > MaxChainCache || o.ChainCacheTTL < 0 {
		return o, fmt.Errorf("decap: ChainCache %d, ChainCacheTTL %v: want 0 to %d flows and a TTL not negative", o.ChainCache, o.ChainCacheTTL, MaxChainCache)
	}
	if o.ChainCache == 0 {
		o.ChainCache = DefaultChainCache
	}
	if o.ChainCacheTTL == 0 {
		o.ChainCacheTTL = DefaultChainCacheTTL
	}
	for _, a := range o.VIPs {
		if !a.IsValid() || a.Zone() != "" || a.Is4In6() || a.IsUnspecified() || a.IsMulticast() || a.IsLoopback() {
			return o, fmt.Errorf("decap: bad VIP %v: want a unicast IPv4 or IPv6 address, not loopback, without zone", a)
		}
	}
	if o.GUESockets < 0 || o.GUESockets > MaxGUESockets {
		return o, fmt.Errorf("decap: GUESockets %d: want 0 to %d", o.GUESockets, MaxGUESockets)
	}
	if o.GUESockets == 0 {
		o.GUESockets = 1
	}
	if o.LocalRefresh < 0 || o.ReceiveBuffer < 0 {
		return o, errors.New("decap: negative LocalRefresh or ReceiveBuffer")
	}
	if o.LocalRefresh == 0 {
		o.LocalRefresh = DefaultLocalRefresh
	}
	if o.ReceiveBuffer == 0 {
		o.ReceiveBuffer = DefaultReceiveBuffer
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}
