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
// for all of its changes (RFC 1624; packet.ChecksumUpdate48): the IP header
// for the address and the TTL, the transport checksum (whose pseudo-header
// covers the address) for the address and the port.
//
// In a first fragment the transport checksum covers the whole datagram;
// the incremental update is still exact, because only covered words change.
// A non-first fragment (l4.Hdr nil) only has its IP header rewritten.
func DNAT4(ip packet.IPv4, l4 L4, addr [4]byte, port uint16) {
	rewrite4(ip, l4, addr, port, dstAddrOff, dstPortOff)
}

// SNAT4 rewrites a backend's reply toward the client so that it comes from
// the VIP: source address to addr, source port to port when port is not 0,
// TTL decremented (at least 2 on entry); checksums as in DNAT4.
func SNAT4(ip packet.IPv4, l4 L4, addr [4]byte, port uint16) {
	rewrite4(ip, l4, addr, port, srcAddrOff, srcPortOff)
}

// IPv4 header offsets of the fields rewrite4 changes.
const (
	ttlOff     = 8 // TTL, high byte of the word it shares with Protocol
	srcAddrOff = 12
	dstAddrOff = 16
)

func rewrite4(ip packet.IPv4, l4 L4, addr [4]byte, port uint16, addrOff, portOff int) {
	_ = ip[packet.IPv4MinSize-1] // one bounds check for the accesses below
	oldA := binary.BigEndian.Uint32(ip[addrOff:])
	newA := binary.BigEndian.Uint32(addr[:])
	oldT := binary.BigEndian.Uint16(ip[ttlOff:])
	binary.BigEndian.PutUint32(ip[addrOff:], newA)
	ip[ttlOff]--
	ip.SetChecksum(packet.ChecksumUpdate48(ip.Checksum(), oldA, newA, oldT, oldT-0x100))
	if l4.Hdr == nil {
		return
	}
	var csumOff int
	switch l4.Proto {
	case packet.ProtoTCP:
		csumOff = tcpCsumOff
	case packet.ProtoUDP:
		csumOff = udpCsumOff
	default:
		return
	}
	oldP := binary.BigEndian.Uint16(l4.Hdr[portOff:])
	newP := oldP
	if port != 0 {
		newP = port
		binary.BigEndian.PutUint16(l4.Hdr[portOff:], port)
	}
	c := binary.BigEndian.Uint16(l4.Hdr[csumOff:])
	if l4.Proto == packet.ProtoUDP && c == 0 {
		return // no checksum (RFC 768): stays so
	}
	binary.BigEndian.PutUint16(l4.Hdr[csumOff:], nonZeroUDP(l4.Proto, packet.ChecksumUpdate48(c, oldA, newA, oldP, newP)))
}

// DNAT6 is DNAT4 for IPv6 (which has no header checksum; TCP, UDP and
// ICMPv6 all cover the addresses through the pseudo-header); the hop limit
// is the caller's.
func DNAT6(ip packet.IPv6, l4 L4, addr *[16]byte, port uint16) {
	fixPseudo6(l4, ip.DestinationAddress(), addr)
	ip.SetDestinationAddress(addr)
	if l4.Hdr != nil && port != 0 {
		setPort(l4, dstPortOff, port)
	}
}

// SNAT6 is SNAT4 for IPv6.
func SNAT6(ip packet.IPv6, l4 L4, addr *[16]byte, port uint16) {
	fixPseudo6(l4, ip.SourceAddress(), addr)
	ip.SetSourceAddress(addr)
	if l4.Hdr != nil && port != 0 {
		setPort(l4, srcPortOff, port)
	}
}

// fixPseudo6 updates the transport checksum for an address change; it must
// run before the address is overwritten, since old points into the packet.
func fixPseudo6(l4 L4, old, new *[16]byte) {
	if l4.Hdr == nil {
		return
	}
	switch l4.Proto {
	case packet.ProtoTCP:
		packet.TCP(l4.Hdr).UpdatePseudoHeaderAddress6(old, new)
	case packet.ProtoUDP:
		packet.UDP(l4.Hdr).UpdatePseudoHeaderAddress6(old, new)
	case packet.ProtoICMPv6:
		ic := packet.ICMPv6(l4.Hdr)
		ic.SetChecksum(packet.ChecksumUpdate128(ic.Checksum(), old, new))
	}
}

func setPort(l4 L4, off int, port uint16) {
	switch l4.Proto {
	case packet.ProtoTCP:
		t := packet.TCP(l4.Hdr)
		if off == srcPortOff {
			t.SetSourcePortWithChecksumUpdate(port)
		} else {
			t.SetDestinationPortWithChecksumUpdate(port)
		}
	case packet.ProtoUDP:
		u := packet.UDP(l4.Hdr)
		if off == srcPortOff {
			u.SetSourcePortWithChecksumUpdate(port)
		} else {
			u.SetDestinationPortWithChecksumUpdate(port)
		}
	}
}
