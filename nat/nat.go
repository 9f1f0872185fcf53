package nat

import (
	"encoding/binary"

	"github.com/vipd/vipd/packet"
)

// L4 describes the transport part of a packet being translated: its
// protocol and, when the packet carries the transport header (not a non-first
// fragment), the header bytes. Hdr runs from the transport header to the end
// of the IP packet (or fragment).
type L4 struct {
	Proto uint8
	Hdr   []byte // nil when the packet carries no transport header
}

// port field offsets, common to TCP and UDP (RFC 9293, RFC 768).
const (
	srcPortOff = 0
	dstPortOff = 2
)

// DNAT4 rewrites a client's IPv4 packet toward a backend, as a router
// forwarding it: destination address to addr, destination port to port
// when port is not 0, and the TTL decremented. The caller guarantees a TTL
// of at least 2 (see packet.IPv4.DecTTL). Each checksum is updated once
// for all of its changes (RFC 1624): the IP header for the address and the
// TTL, the transport checksum (whose pseudo-header covers the address) for
// the address and the port.
//
// In a first fragment the transport checksum covers the whole datagram;
// the incremental update is still exact, because only covered words change.
// A non-first fragment (l4.Hdr nil) only has its IP header rewritten.
func DNAT4(ip packet.IPv4, l4 L4, addr [4]byte, port uint16) {
	DNAT4Sum(ip, l4, addr, AddrSum4(ip.DestinationAddress(), addr), port)
}

// DNAT4Sum is DNAT4 for a packet whose destination address is old, with
// sum = AddrSum4(old, addr) computed ahead: a load balancer knows the
// address it classified the packet by, and computes the sum once per
// (VIP, backend) rather than once per packet.
func DNAT4Sum(ip packet.IPv4, l4 L4, addr [4]byte, sum uint32, port uint16) {
	rewrite4(ip, l4, addr, sum, port, true)
}

// Sums4 returns what DNAT4Sum(ip, l4, addr, sum, port) adds to the IPv4
// header checksum and to the TCP or UDP checksum of a packet whose
// destination port is oldPort, unfolded; and what SNAT4(ip, l4, addr,
// port) adds to those of a packet whose source address's change to addr
// adds sum and whose source port is oldPort. It is for a fast path that
// replays the translation of one flow with the sums computed once
// (packet.ChecksumAdd with them gives the rewrites' checksums; TestSums4).
func Sums4(sum uint32, oldPort, port uint16) (ipSum, l4Sum uint32) {
	if port == 0 {
		port = oldPort
	}
	return sum + ttlSum, sum + uint32(^oldPort) + uint32(port)
}

// SNAT4 rewrites a backend's reply toward the client so that it comes from
// the VIP: source address to addr, source port to port when port is not 0,
// TTL decremented (at least 2 on entry); checksums as in DNAT4.
func SNAT4(ip packet.IPv4, l4 L4, addr [4]byte, port uint16) {
	rewrite4(ip, l4, addr, AddrSum4(ip.SourceAddress(), addr), port, false)
}

// AddrSum4 is what changing an IPv4 address from old to new adds to every
// checksum that covers it: ~old + new over the addresses' two 16-bit
// words each (RFC 1624, eqn. 3), unfolded (at most 4 × 0xffff).
func AddrSum4(old, new [4]byte) uint32 {
	o, n := binary.BigEndian.Uint32(old[:]), binary.BigEndian.Uint32(new[:])
	return uint32(^uint16(o>>16)) + uint32(^uint16(o)) + uint32(uint16(n>>16)) + uint32(uint16(n))
}

// IPv4 header offsets of the fields rewrite4 changes.
const (
	ttlOff     = 8 // TTL, high byte of the word it shares with Protocol
	csumOff4   = 10
	srcAddrOff = 12
	dstAddrOff = 16
)

// ttlSum is what decrementing the TTL adds to the header checksum: the
// word TTL<<8|Protocol goes from w to w-0x100, and ~w + (w-0x100) is
// 0xffff-0x100 for every w >= 0x100 (a TTL of at least 1).
const ttlSum = 0xfeff

// rewrite4 sets the destination (dst) or source address to addr, whose
// change adds sum to the checksums, the port on the same side to port
// (unless 0), and decrements the TTL.
func rewrite4(ip packet.IPv4, l4 L4, addr [4]byte, sum uint32, port uint16, dst bool) {
	h := (*[packet.IPv4MinSize]byte)(ip)
	if dst {
		*(*[4]byte)(h[dstAddrOff:]) = addr
	} else {
		*(*[4]byte)(h[srcAddrOff:]) = addr
	}
	h[ttlOff]--
	binary.BigEndian.PutUint16(h[csumOff4:], packet.ChecksumAdd(binary.BigEndian.Uint16(h[csumOff4:]), sum+ttlSum))
	if l4.Hdr == nil {
		return
	}
	// Fixed-size views (one length check each) of the ports and the
	// checksum, which both headers start with or hold at a fixed offset.
	var ports *[4]byte
	var cs *[2]byte
	switch l4.Proto {
	case packet.ProtoTCP:
		t := (*[tcpCsumOff + 2]byte)(l4.Hdr)
		ports, cs = (*[4]byte)(t[:]), (*[2]byte)(t[tcpCsumOff:])
	case packet.ProtoUDP:
		u := (*[udpCsumOff + 2]byte)(l4.Hdr)
		ports, cs = (*[4]byte)(u[:]), (*[2]byte)(u[udpCsumOff:])
	default:
		return
	}
	pp := (*[2]byte)(ports[srcPortOff:])
	if dst {
		pp = (*[2]byte)(ports[dstPortOff:])
	}
	oldP := binary.BigEndian.Uint16(pp[:])
	if port != 0 {
		binary.BigEndian.PutUint16(pp[:], port)
	} else {
		port = oldP
	}
	c := binary.BigEndian.Uint16(cs[:])
	if l4.Proto == packet.ProtoUDP && c == 0 {
		return // no checksum (RFC 768): stays so
	}
	binary.BigEndian.PutUint16(cs[:], nonZeroUDP(l4.Proto, packet.ChecksumAdd(c, sum+uint32(^oldP)+uint32(port))))
}

// DNAT6 is DNAT4 for IPv6 (which has no header checksum; TCP, UDP and
// ICMPv6 all cover the addresses through the pseudo-header); the hop limit
// is the caller's. As in DNAT4, the transport checksum is updated once for
// the address and the port (Sums6).
func DNAT6(ip packet.IPv6, l4 L4, addr *[16]byte, port uint16) {
	rewrite6(l4, ip.DestinationAddress(), addr, dstPortOff, port)
	ip.SetDestinationAddress(addr)
}

// SNAT6 is SNAT4 for IPv6.
func SNAT6(ip packet.IPv6, l4 L4, addr *[16]byte, port uint16) {
	rewrite6(l4, ip.SourceAddress(), addr, srcPortOff, port)
	ip.SetSourceAddress(addr)
}

// Sums6 returns what DNAT6 (SNAT6) adds to the TCP or UDP checksum of a
// packet whose destination (source) address old becomes addr and whose
// port on that side, oldPort, becomes port (0: kept), unfolded. It is for
// a fast path that replays one flow's translation with the sum computed
// once (packet.ChecksumAdd with it gives the rewrite's checksum;
// TestSums6).
func Sums6(old, addr *[16]byte, oldPort, port uint16) uint32 {
	if port == 0 {
		port = oldPort
	}
	s := uint32(^oldPort) + uint32(port)
	for i := 0; i < 16; i += 2 {
		s += uint32(^binary.BigEndian.Uint16(old[i:])) + uint32(binary.BigEndian.Uint16(addr[i:]))
	}
	return s // at most 17 × 2 × 0xffff: no overflow
}

// rewrite6 updates the transport header of an IPv6 packet whose address
// old (at the side of portOff) becomes addr: the port at portOff to port
// (unless 0) and the checksum, once for both; it must run before the
// address is overwritten, since old points into the packet.
func rewrite6(l4 L4, old, addr *[16]byte, portOff int, port uint16) {
	if l4.Hdr == nil {
		return
	}
	var csOff int
	switch l4.Proto {
	case packet.ProtoTCP:
		csOff = tcpCsumOff
	case packet.ProtoUDP:
		csOff = udpCsumOff
	case packet.ProtoICMPv6:
		ic := packet.ICMPv6(l4.Hdr)
		ic.SetChecksum(packet.ChecksumUpdate128(ic.Checksum(), old, addr))
		return
	default:
		return
	}
	h := l4.Hdr[:csOff+2]
	pp := (*[2]byte)(h[portOff:])
	oldP := binary.BigEndian.Uint16(pp[:])
	if port != 0 {
		binary.BigEndian.PutUint16(pp[:], port)
	}
	c := binary.BigEndian.Uint16(h[csOff:])
	if l4.Proto == packet.ProtoUDP && c == 0 {
		return // no checksum: stays so (not valid over IPv6; the caller's to refuse)
	}
	binary.BigEndian.PutUint16(h[csOff:], nonZeroUDP(l4.Proto, packet.ChecksumAdd(c, Sums6(old, addr, oldP, port))))
}
