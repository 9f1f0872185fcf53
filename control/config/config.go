package config

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"time"
)

// Config is a validated vipd configuration. Load is the only way to get one
// whose invariants hold; every field has its default filled in.
type Config struct {
	Dataplane Dataplane `toml:"dataplane"`
	Conntrack Conntrack `toml:"conntrack"`
	Admin     Admin     `toml:"admin"`
	// BGP is the [bgp] table; nil when the file has none, and then vipd
	// announces its VIPs by ARP/NDP alone, as it always has.
	BGP *BGP `toml:"bgp"`
	// Fleet is the [fleet] table (fleet.go); nil when the file has none.
	// With it, the seed and the VIPs come from the fleet's shared
	// configuration in etcd (WithShared), never from the local file.
	Fleet *Fleet `toml:"fleet"`
	VIPs  []VIP  `toml:"vip"`
}

// IO names a dataplane driver.
type IO string

const (
	IOAFXDP    IO = "afxdp"    // AF_XDP rings fed by vipd's XDP steering program
	IOAFPacket IO = "afpacket" // raw AF_PACKET sockets, for NICs or kernels without XDP
)

// FastPathMode is whether the XDP fast path runs ([dataplane] fast_path).
// The file may also say true (FastPathOn) or false (FastPathOff).
type FastPathMode string

const (
	// FastPathAuto runs the fast path when the interfaces' drivers carry
	// what XDP sends (XDP_TX, and bpf_redirect between the two interfaces
	// when two-armed) as the kernel reports, and neither is a veth (which
	// carries it only while its peer runs an XDP program, which vipd
	// cannot see); otherwise, and where the refresh is not shorter than
	// the conntrack timeouts, it stays off and says why.
	FastPathAuto FastPathMode = "auto"
	FastPathOn   FastPathMode = "on"
	FastPathOff  FastPathMode = "off"
)

// decodeValue implements valueDecoder: "auto", "on", "off", true or false.
func (m *FastPathMode) decodeValue(src any) error {
	switch v := src.(type) {
	case bool:
		*m = map[bool]FastPathMode{true: FastPathOn, false: FastPathOff}[v]
		return nil
	case string:
		switch FastPathMode(v) {
		case FastPathAuto, FastPathOn, FastPathOff:
			*m = FastPathMode(v)
			return nil
		}
	}
	return fmt.Errorf("must be %q, %q, %q, true or false, not %s", FastPathAuto, FastPathOn, FastPathOff, describe(src))
}

// NeighborRole is how a box starts ([dataplane] neighbor_role): active
// answers ARP/NDP for its VIPs and announces them (gratuitously, and over
// BGP); standby forwards whatever reaches it but does neither, until
// `vipd active` (keepalived's notify script on a two-box segment).
type NeighborRole string

const (
	RoleActive  NeighborRole = "active"
	RoleStandby NeighborRole = "standby"
)

// XDPMode is how the XDP steering program is attached.
type XDPMode string

const (
	XDPAuto    XDPMode = "auto"    // native (driver) mode when the driver supports it, else generic
	XDPNative  XDPMode = "native"  // driver mode; fails when the driver lacks XDP support
	XDPGeneric XDPMode = "generic" // skb mode; works everywhere, slower
)

// Dataplane is the [dataplane] table: interfaces, driver and ring geometry.
type Dataplane struct {
	// Ingress is the interface clients' packets arrive on. Required.
	Ingress string `toml:"ingress"`
	// Egress is the interface toward the backends. Empty means one-armed:
	// packets leave through Ingress.
	Egress string `toml:"egress"`
	IO     IO     `toml:"io"`
	// Queues is the number of NIC queues served, 0..Queues-1, with one
	// worker goroutine (and one AF_XDP socket or AF_PACKET fanout member)
	// each.
	Queues int `toml:"queues"`
	// FrameSize is the UMEM (AF_XDP) or ring (AF_PACKET) frame size in
	// bytes: 2048 or 4096, or 0 (the default) for the driver to pick by
	// the interfaces' MTUs (dataplane.FrameSizeFor):
	// 2048 when their frames fit, else 4096.
	FrameSize int `toml:"frame_size"`
	// FrameCount is the number of UMEM frames per queue (a power of two).
	FrameCount int `toml:"frame_count"`
	// Ring sizes in descriptors (powers of two).
	RxRingSize         int `toml:"rx_ring_size"`
	TxRingSize         int `toml:"tx_ring_size"`
	FillRingSize       int `toml:"fill_ring_size"`
	CompletionRingSize int `toml:"completion_ring_size"`
	// BatchSize is the most frames a worker takes per receive call.
	BatchSize int     `toml:"batch_size"`
	XDPMode   XDPMode `toml:"xdp_mode"`
	// BusyPollUsecs turns on AF_XDP preferred busy polling when positive:
	// each socket gets SO_PREFER_BUSY_POLL and SO_BUSY_POLL, and a worker
	// whose rx ring is empty busy polls (non-blocking recvfrom, which runs
	// the device's NAPI in the worker's thread) for this many
	// microseconds before it sleeps. 0 is off.
	BusyPollUsecs int `toml:"busy_poll_usecs"`
	// BusyPollBudget is SO_BUSY_POLL_BUDGET, the most frames one busy
	// poll moves to the rx ring; 0 means BatchSize.
	BusyPollBudget int `toml:"busy_poll_budget"`
	// FastPath forwards established IPv4 flows of NAT VIPs and of DSR
	// VIPs, and NAT backends' replies, in the XDP program (io =
	// "afxdp" only): a worker hands each flow's translation or
	// encapsulation down once it is past its handshake (a reply flow at
	// its first reply), and the flow's later packets go back out without
	// reaching vipd's socket. FastPathAuto (the default) runs it where
	// the interfaces can carry it (the daemon decides at start).
	FastPath FastPathMode `toml:"fast_path"`
	// FastPathFlows is how many IPv4 flows the fast path holds; the
	// least recently used make room for new ones (which then pass
	// through the workers until handed down again). The map is allocated
	// at start.
	FastPathFlows int `toml:"fast_path_flows"`
	// FastPathFlows6 is how many IPv6 flows the fast path holds (their
	// own map, allocated at start); 0 keeps IPv6 flows in the workers and
	// saves the map's memory on a box without IPv6 VIPs.
	FastPathFlows6 int `toml:"fast_path_flows6"`
	// FastPathRefresh is how long a flow's entry in the fast path serves
	// before the flow's next packet goes through a worker again, which
	// renews it: so conntrack sees the flow alive, and per-flow state
	// (a FIN's closing timeout) never outlives what it governs. With
	// FastPath on, shorter than the conntrack timeouts tcp_unconfirmed,
	// tcp_established, tcp_closing and udp.
	FastPathRefresh Duration `toml:"fast_path_refresh"`
	// EgressMTU overrides the MTU read from the egress interface (bytes of
	// IP packet); 0 follows the interface.
	EgressMTU int `toml:"egress_mtu"`
	// FlowHashSeed seeds the flow hash. Every vipd instance that shares VIPs
	// behind ECMP must use the same seed so that they agree on every flow.
	FlowHashSeed uint64 `toml:"flow_hash_seed"`
	// NeighborRole is the role the box starts in; `vipd active` and
	// `vipd standby` change it at run time (not kept across restarts: a
	// box under keepalived starts standby and is made active by it).
	NeighborRole NeighborRole `toml:"neighbor_role"`
	// StateFile is where vipd keeps what must outlive a restart: each
	// previous_owner VIP's backend set before its last change. "" keeps
	// it in memory only.
	StateFile string `toml:"state_file"`
}

// BusyPollBatch is the busy-poll budget in effect: BusyPollBudget, or
// BatchSize when that is 0.
func (d *Dataplane) BusyPollBatch() int {
	if d.BusyPollBudget > 0 {
		return d.BusyPollBudget
	}
	return d.BatchSize
}

// TwoArmed reports whether packets leave through a different interface
// than they arrive on.
func (d *Dataplane) TwoArmed() bool { return d.Egress != "" && d.Egress != d.Ingress }

// EgressInterface is the interface packets toward backends leave through.
func (d *Dataplane) EgressInterface() string {
	if d.Egress == "" {
		return d.Ingress
	}
	return d.Egress
}

// Conntrack is the [conntrack] table: connection table size and timeouts.
type Conntrack struct {
	// Capacity is the number of flows the table holds, split evenly across
	// workers; memory for all of them is allocated at start.
	Capacity int `toml:"capacity"`
	// Idle timeouts per conntrack state (see package conntrack).
	TCPUnestablished Duration `toml:"tcp_unestablished_timeout"` // only SYNs seen
	TCPUnconfirmed   Duration `toml:"tcp_unconfirmed_timeout"`   // past the SYN, not yet proven by time: evictable
	TCPEstablished   Duration `toml:"tcp_established_timeout"`   // proven: never evicted
	TCPClosing       Duration `toml:"tcp_closing_timeout"`
	UDP              Duration `toml:"udp_timeout"`
}

// Admin is the [admin] table: the administration API, on two listeners.
// The TCP listener serves only what is safe to read (/metrics, /healthz,
// /v1/state, /v1/where): a loopback port is reachable by every local user
// and by every web page a browser on the box opens. Changes (drains) are
// served only on the Unix socket, whose file mode (0600, owned by the user
// vipd runs as) is the authentication.
type Admin struct {
	// Listen is host:port of the read-only HTTP server; empty disables it.
	Listen string `toml:"listen"`
	// AllowedHosts are the host names, besides IP literals and localhost,
	// that the TCP listener serves as a request's Host (any case, any
	// port). A name a page could get a browser to send is one a DNS
	// rebinding attack can point at 127.0.0.1, so nothing else is served.
	AllowedHosts []string `toml:"allowed_hosts"`
	// Socket is the path of the Unix socket that serves the whole API,
	// drains included; empty disables it (and with it every drain).
	Socket string `toml:"socket"`
	// Pprof serves Go's runtime profiles (net/http/pprof) under
	// /debug/pprof/ on the admin socket, and on the socket only: a profile
	// shows the process's memory and a CPU profile costs CPU, which the
	// TCP listener's callers (any local user, any web page) must not get.
	Pprof bool `toml:"pprof"`
}

// Equal reports whether a and b are the same settings; an absent
// allowed_hosts equals an empty one. (Admin holds a slice, so == does
// not compile.)
func (a *Admin) Equal(b *Admin) bool {
	x, y := *a, *b
	x.AllowedHosts, y.AllowedHosts = nil, nil
	return reflect.DeepEqual(x, y) && slices.Equal(a.AllowedHosts, b.AllowedHosts)
}

// Protocol is a VIP's transport protocol.
type Protocol string

const (
	TCP Protocol = "tcp"
	UDP Protocol = "udp"
)

// Number is the IP protocol number.
func (p Protocol) Number() uint8 {
	if p == UDP {
		return 17
	}
	return 6
}

// Mode is how packets reach a VIP's backends.
type Mode string

const (
	ModeNAT Mode = "nat" // destination rewrite; replies return through vipd
	ModeDSR Mode = "dsr" // IPIP or GUE encapsulation; backends reply to clients directly
)

// FlowHash selects the packet fields that pick a backend.
type FlowHash string

const (
	Hash5Tuple FlowHash = "5tuple" // per connection
	HashSrcIP  FlowHash = "src_ip" // client affinity: every flow of a client goes to one backend
)

// VIP is one [[vip]]: a virtual address, port and protocol served by a pool.
type VIP struct {
	Name     string     `toml:"name"`
	Address  netip.Addr `toml:"address"`
	Port     uint16     `toml:"port"` // 0 = every port
	Protocol Protocol   `toml:"protocol"`
	Mode     Mode       `toml:"mode"`
	// Scheduler picks backends for new flows: one of Schedulers.
	Scheduler string `toml:"scheduler"`
	// TableSize is the Maglev lookup table size M, a prime.
	TableSize uint32   `toml:"table_size"`
	FlowHash  FlowHash `toml:"flow_hash"`
	// EncapSource is the outer source address of DSR packets. Unset means
	// the egress interface's address of the VIP's family (or, with
	// EncapSourcePrefix, the prefix's first address).
	EncapSource netip.Addr `toml:"encap_source"`
	// Encap is how DSR packets travel to backends: "ipip" (IP in IP) or
	// "gue" (GUE in UDP to GUEPort, the source port per flow).
	Encap Encap `toml:"encap"`
	// GUEPort is GUE's UDP destination port on the backends.
	GUEPort uint16 `toml:"gue_port"`
	// EncapSourcePrefix makes IPIP's outer source per flow: an address of
	// the prefix chosen by the flow hash, so that a backend's NIC spreads
	// flows over its receive queues. Unset: the fixed EncapSource.
	EncapSourcePrefix netip.Prefix `toml:"encap_source_prefix"`
	// PreviousOwner: a packet that misses the connection table mid-flow
	// (TCP without SYN; UDP with PreviousOwnerUDP) carries, when the
	// backend set before the last change would have picked another
	// backend, that backend's address to the current one, whose agent
	// (vipd-decap -chain) hands it on if the connection is not its own.
	// DSR with GUE only. The previous set is kept for PreviousOwnerTTL.
	// Unset in the file, it is on for DSR VIPs in GUE; Load fills it in.
	PreviousOwner    *bool       `toml:"previous_owner"`
	PreviousOwnerTTL Duration    `toml:"previous_owner_ttl"`
	PreviousOwnerUDP bool        `toml:"previous_owner_udp"`
	HealthCheck      HealthCheck `toml:"healthcheck"`
	// Outlier is passive outlier detection: backends judged by their
	// clients' handshakes (TCP VIPs).
	Outlier Outlier `toml:"outlier"`
	// Announce: the VIP's host route is announced over BGP (needs [bgp]).
	// Unset in the file, it is true when [bgp] exists; Load fills it in.
	Announce *bool `toml:"announce"`
	// Communities are attached to the announcement, each "ASN:VALUE"
	// (RFC 1997, two 16-bit halves).
	Communities []string `toml:"communities"`
	// MED is the MULTI_EXIT_DISC attribute of the announcement.
	MED uint32 `toml:"med"`
	// MinHealthy is the least number of backends that must be up for the
	// VIP to be announced; below it the VIP is withdrawn (Seesaw's
	// watermark). 0 never withdraws it for health.
	MinHealthy int `toml:"min_healthy"`
	// NeighborAnnounce: vipd answers ARP/NDP for the VIP and sends
	// gratuitous announcements. Unset in the file, it is the opposite of
	// Announce: a routed VIP is not on the router's segment, and several
	// boxes may share that segment. Load fills it in.
	NeighborAnnounce *bool `toml:"neighbor_announce"`
	// QUICLB routes the VIP's QUIC packets by the server ID that its
	// backends encode in their connection IDs (quiclb.go). UDP VIPs only;
	// nil when the file has no [vip.quic_lb].
	QUICLB   *QUICLB   `toml:"quic_lb"`
	Backends []Backend `toml:"backend"`

	// Scheduling (sched.go). LoadBound is maglev_bounded's bound on a
	// backend's active flows, a multiple of its weighted share.
	LoadBound float64 `toml:"load_bound"`
}

// Announced reports whether the VIP is announced over BGP.
func (v *VIP) Announced() bool { return v.Announce != nil && *v.Announce }

// HintsPreviousOwner reports whether the VIP gives mid-flow misses
// previous-owner hints (previous_owner).
func (v *VIP) HintsPreviousOwner() bool { return v.PreviousOwner != nil && *v.PreviousOwner }

// AnswersNeighbors reports whether vipd answers ARP/NDP for the VIP and
// announces it gratuitously.
func (v *VIP) AnswersNeighbors() bool { return v.NeighborAnnounce == nil || *v.NeighborAnnounce }

// Encap is a DSR encapsulation.
type Encap string

const (
	EncapIPIP Encap = "ipip" // IPv4 in IPv4, IPv6 in IPv6
	EncapGUE  Encap = "gue"  // GUE variant 1: the IP packet in UDP
)

// Key identifies a VIP in the dataplane: two VIPs may share an address but
// not (address, protocol, port).
func (v *VIP) Key() string {
	// Not fmt: a fleet's reload computes it for each of 100,000 backends.
	return netip.AddrPortFrom(v.Address, v.Port).String() + "/" + string(v.Protocol)
}

// CheckType is the kind of active health check.
type CheckType string

const (
	CheckTCP  CheckType = "tcp"  // a TCP connect succeeds
	CheckHTTP CheckType = "http" // GET path answers 2xx or 3xx
	CheckNone CheckType = "none" // backends are always considered up
)

// AllDown is what a VIP does when every backend fails its health check.
type AllDown string

const (
	AllDownDrop         AllDown = "drop"          // drop new flows (counted)
	AllDownIgnoreHealth AllDown = "ignore_health" // send to every enabled backend anyway
)

// InitState is what a backend does before its first health check ends.
type InitState string

const (
	// InitDown: no new flows before the first check (which alone then
	// decides up or down, without rise or fall); the box is not ready
	// (systemd, BGP, keepalived-check) before the first round.
	InitDown InitState = "down"
	// InitUp: new flows at once, as if up; a first failure counts toward
	// fall like any other.
	InitUp InitState = "up"
)

// HealthCheck is a VIP's [vip.healthcheck] table.
type HealthCheck struct {
	Type CheckType `toml:"type"`
	// Port to probe; 0 means the backend's port (NAT) or the VIP port (DSR).
	Port     uint16   `toml:"port"`
	Path     string   `toml:"path"` // HTTP only
	Interval Duration `toml:"interval"`
	Timeout  Duration `toml:"timeout"`
	// Rise consecutive successes bring a backend up; Fall consecutive
	// failures take it down.
	Rise int `toml:"rise"`
	Fall int `toml:"fall"`
	// SlowStart ramps a backend that comes up from 0 to its full weight
	// over this long; 0 disables the ramp.
	SlowStart Duration `toml:"slow_start"`
	OnAllDown AllDown  `toml:"on_all_down"`
	// InitState is what a backend does before its first check ends, at
	// start and when a reload adds it.
	InitState InitState `toml:"init_state"`
	// DrainStatus, when not 0, is the HTTP status a backend answers while it
	// shuts down (lame duck): it then takes no new flows but keeps its own.
	DrainStatus int `toml:"drain_status"`
	// DrainHeader, when set, must also be present in such an answer.
	DrainHeader string `toml:"drain_header"`
	// Probe is where a probe goes: ProbeTunnel or ProbeDirect. Unset, it
	// is filled in by mode: tunnel for DSR, direct for NAT.
	Probe Probe `toml:"probe"`

	// Backend-reported load (sched.go, package health): with LoadReport,
	// an HTTP check reads the backend's utilization (0..1) from header
	// LoadHeader, and the backend's weight is scaled by (1 − utilization)
	// × (1 − ErrorPenalty × error rate), both smoothed with half-life
	// LoadHalfLife, never under MinWeightPercent of the weight.
	LoadReport       bool     `toml:"load_report"`
	LoadHeader       string   `toml:"load_header"`
	LoadHalfLife     Duration `toml:"load_half_life"`
	ErrorPenalty     float64  `toml:"error_penalty"`
	MinWeightPercent int      `toml:"min_weight_percent"`
}

// Outlier configures passive outlier detection (package outlier): a
// backend whose handshakes in Window (each given Timeout to be answered)
// fail at FailureRatio or more, once MinHandshakes were tried, is ejected
// for BaseEjection, doubled on each repeat up to MaxEjection; at most
// MaxEjectedPercent of the VIP's backends at once. It returns when its
// time is up and its active check passes.
type Outlier struct {
	Enabled           bool     `toml:"enabled"`
	Window            Duration `toml:"window"`
	Timeout           Duration `toml:"timeout"`
	MinHandshakes     int      `toml:"min_handshakes"`
	FailureRatio      float64  `toml:"failure_ratio"`
	BaseEjection      Duration `toml:"base_ejection"`
	MaxEjection       Duration `toml:"max_ejection"`
	MaxEjectedPercent int      `toml:"max_ejected_percent"`
}

// Probe is the path of a VIP's health probes.
type Probe string

const (
	// ProbeDirect probes each backend's own address.
	ProbeDirect Probe = "direct"
	// ProbeTunnel (DSR only) probes VIP:port through the backend's
	// tunnel, encapsulated as the VIP's traffic is: the backend is up only
	// if it decapsulates and holds the VIP.
	ProbeTunnel Probe = "tunnel"
)

// BackendState is an operator's intent for a backend.
type BackendState string

const (
	StateActive   BackendState = "active"   // takes new flows when healthy
	StateDraining BackendState = "draining" // keeps its flows, takes no new ones
	StateDisabled BackendState = "disabled" // out of the pool; its flows are re-picked
)

// Backend is one [[vip.backend]].
type Backend struct {
	Address netip.Addr `toml:"address"`
	// Port is the destination port after NAT; 0 keeps the client's
	// destination port. Must be 0 in DSR mode, where the packet is not
	// rewritten.
	Port   uint16       `toml:"port"`
	Weight uint32       `toml:"weight"`
	State  BackendState `toml:"state"`
	// MaxFlows, when not 0, is the most flows the backend holds before it
	// takes no new ones (ipvsadm's upper threshold); it takes new flows
	// again under 3/4 of it. Checked once a second.
	MaxFlows int `toml:"max_flows"`
	// QUICLBServerIDs are the backend's QUIC-LB server IDs, by
	// configuration (rotation codepoint): quic_lb_server_ids = { 0 =
	// "0a01" }.
	QUICLBServerIDs ServerIDs `toml:"quic_lb_server_ids"`
}

// Weight limits. Weights are relative; 0 is not a weight: a backend that
// should take no flows is drained or disabled through its state.
const (
	MinWeight = 1
	MaxWeight = 1000
)

// Duration is a time.Duration written in TOML as a Go duration string
// ("500ms", "5m", "1h30m").
type Duration time.Duration

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("invalid duration %q (write it like \"500ms\", \"2s\" or \"5m\")", b)
	}
	*d = Duration(v)
	return nil
}

// MarshalText writes the duration as Go formats it.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// D returns the duration as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }
