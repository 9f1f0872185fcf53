package dataplane

import (
	"net/netip"

	"github.com/vipd/vipd/dataplane/quiclb"
)

// Mode is how a VIP's packets reach its backends.
type Mode uint8

const (
	ModeNAT Mode = iota // destination rewrite, replies rewritten back
	ModeDSR             // IPIP or GUE encapsulation (VIPSpec.Encap), backends reply directly
)

// BackendState is a backend's standing in a snapshot, as the control plane
// computed it from configuration, health checks and drains.
type BackendState uint8

const (
	// BackendUp takes new flows and keeps its own.
	BackendUp BackendState = iota
	// BackendDraining keeps its flows and takes no new ones (lame duck).
	BackendDraining
	// BackendDown takes nothing: its flows are re-picked on their next
	// packet.
	BackendDown
)

// Port numbers: the interface a frame arrived on or leaves by. A one-armed
// box uses PortIngress for everything.
const (
	PortIngress uint8 = 0 // toward clients
	PortEgress  uint8 = 1 // toward backends (== PortIngress when one-armed)
)

// Spec is everything the control plane hands over to build a Snapshot. It is
// plain data: the dataplane does not parse configuration.
type Spec struct {
	// Seed is the flow-hash seed; every vipd sharing VIPs must use the same.
	Seed uint64
	// TwoArmed sends traffic toward backends out of PortEgress.
	TwoArmed bool
	Host
	VIPs []VIPSpec
}

// Host is what a snapshot needs of the box itself, as its kernel knows it:
// each port's MAC, MTU and addresses, the way back to clients, and the
// box's own addresses. It is the one statement of these fields: the
// control plane keeps a Host current (control.Host adds the backends'
// next hops) and a Spec embeds it.
type Host struct {
	// MAC is each port's own address, the source of frames vipd sends.
	MAC [2][6]byte
	// MTU is each port's IP MTU in bytes.
	MTU [2]int
	// Addr4 and Addr6 are each port's own address (invalid if none): the
	// source of ICMP errors about packets that are not sent to a VIP.
	Addr4 [2]netip.Addr
	Addr6 [2]netip.Addr
	// ClientGateway4/6 is the next hop toward clients that are not on a
	// connected subnet of the ingress port (the zero MAC if none), and
	// Neighbors maps on-link clients' addresses to their MACs. Only NAT
	// replies need them: every other packet toward a client answers a frame
	// whose source MAC is the way back.
	ClientGateway4 [6]byte
	ClientGateway6 [6]byte
	ClientOnLink   []netip.Prefix
	Neighbors      map[netip.Addr][6]byte
	// Local lists the box's own addresses, on every interface. Packets to
	// them are the kernel's, never NAT replies (health checks of a NAT
	// backend from the box), and no VIP may be one of them.
	Local []netip.Addr
}

// VIPSpec describes one VIP.
type VIPSpec struct {
	// ID is stable across reloads while the VIP exists: conntrack keys
	// carry it, so flows survive a snapshot change.
	ID    uint16
	Name  string
	Addr  netip.Addr
	Port  uint16 // 0 = every port
	Proto uint8  // 6 or 17
	Mode  Mode
	// SrcHash picks backends by client address only (affinity).
	SrcHash   bool
	TableSize uint32
	// EncapSrc is the outer source address of DSR packets.
	EncapSrc netip.Addr
	// Encap is how a DSR VIP's packets travel to its backends.
	Encap Encap
	// GUEPort is the UDP destination port of EncapGUE (0:
	// dsr.DefaultGUEPort).
	GUEPort uint16
	// EncapSrcPrefix, when valid, makes EncapIPIP's outer source per flow:
	// EncapSrc with its host bits under the prefix replaced by the flow
	// hash's, so that a backend's NIC, hashing the outer addresses, spreads
	// flows over its receive queues (Katran's approach). It must contain
	// EncapSrc; every address of it must reach the backends as a source.
	EncapSrcPrefix netip.Prefix
	Backends       []BackendSpec

	// Scheduling of new flows (sched.go). Scheduler is the VIP's
	// scheduler (zero: Maglev); LoadBound is SchedMaglevBounded's bound
	// on a backend's active flows as a multiple of its weighted share
	// (<= 1: DefaultLoadBound).
	Scheduler Scheduler
	LoadBound float64

	// Previous, when not empty, are the Maglev members of the VIP's table
	// before its backend set or weights last changed (address, port,
	// weight, in order; a GUE DSR VIP only). A packet that misses the
	// connection table and does not start a connection (TCP without SYN;
	// UDP only with PreviousUDP) and whose owner in that table is another
	// backend than the current one carries the previous owner's address
	// to the current one (dsr.GUEHint4), whose agent hands it on when
	// the connection is not its own; the flow's entry remembers it, so
	// later packets carry it too. The caller drops Previous when it
	// expires.
	Previous    []PreviousBackend
	PreviousUDP bool

	// QUIC, when not nil, routes the VIP's QUIC packets by the server ID
	// in their destination connection ID (QUIC-LB, quic.go). UDP VIPs
	// only. The caller builds it once per configuration (its Decoder holds
	// the AES key schedules) and passes the same pointer while the
	// configuration stands: a snapshot rebuilt for a health change then
	// reuses the VIP's server ID table.
	QUIC *QUICSpec
}

// QUICSpec is a VIP's QUIC-LB routing: the configurations, and which
// backend each server ID names.
type QUICSpec struct {
	Decoder *quiclb.Decoder
	Servers []QUICServer
}

// QUICServer assigns a server ID of configuration Rotation to the backend
// Ref (one of the VIP's BackendSpec.Ref). A backend may hold one per
// configuration; an ID names one backend per configuration.
type QUICServer struct {
	Ref      uint32
	Rotation uint8
	ID       string // the server ID's octets, ServerIDLen of them
}

// PreviousBackend is a member of a VIP's previous Maglev table.
type PreviousBackend struct {
	Addr   netip.Addr
	Port   uint16
	Weight uint32
}

// Encap is a DSR encapsulation.
type Encap uint8

const (
	// EncapIPIP is IP in IP: IPv4 in IPv4 (protocol 4), IPv6 in IPv6
	// (next header 41).
	EncapIPIP Encap = iota
	// EncapGUE is GUE variant 1: the packet in UDP to VIPSpec.GUEPort,
	// the source port from the flow hash (dsr.GUE4, dsr.GUE6).
	EncapGUE
)

// String returns the configuration name of e.
func (e Encap) String() string {
	switch e {
	case EncapIPIP:
		return "ipip"
	case EncapGUE:
		return "gue"
	}
	return "encap(?)"
}

// BackendSpec describes one backend of a VIP.
type BackendSpec struct {
	// Ref is the backend's stable reference, unique across all VIPs:
	// conntrack entries store it, and the backend array is indexed by it.
	// A reference may name another backend after a while (Epoch); the
	// caller must make sure that no connection-table entry still holds it
	// by then (control.Registry: refHold).
	Ref  uint32
	Addr netip.Addr
	// Port is the NAT destination port; 0 keeps the client's.
	Port uint16
	// Weight is the Maglev weight (already scaled for slow start); a
	// BackendUp backend with weight 0 takes no new flows.
	Weight uint32
	State  BackendState
	// MAC is the next hop toward the backend; the zero MAC means not
	// resolved yet, and packets for it are dropped (and counted).
	MAC [6]byte
	// Epoch tells apart the backends that Ref has named over time
	// (control.Registry reuses references): it changes whenever Ref is
	// given to another backend, and workers then restart the counters
	// they keep by Ref. 0 means the caller does not reuse references.
	Epoch uint32
}
