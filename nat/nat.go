package nat

import "github.com/vipd/vipd/packet"

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

// DNAT4 rewrites a client's IPv4 packet toward a backend: destination
// address to addr and, when port is not 0, destination port to port. The IP
// header checksum and the transport checksum (whose pseudo-header covers the
// address) are updated incrementally (RFC 1624). The TTL is not touched: the
// caller decides about it (it must be at least 2, see packet.IPv4.DecTTL).
//
// In a first fragment the transport checksum covers the whole datagram;
// the incremental update is still exact, because only covered words change.
// A non-first fragment (l4.Hdr nil) only has its IP header rewritten.
func DNAT4(ip packet.IPv4, l4 L4, addr [4]byte, port uint16) {
	old := ip.DestinationAddress()
	ip.SetDestinationAddressWithChecksumUpdate(addr)
	if l4.Hdr == nil {
		return
	}
	switch l4.Proto {
	case packet.ProtoTCP:
		t := packet.TCP(l4.Hdr)
		t.UpdatePseudoHeaderAddress4(old, addr)
		if port != 0 {
			t.SetDestinationPortWithChecksumUpdate(port)
		}
	case packet.ProtoUDP:
		u := packet.UDP(l4.Hdr)
		u.UpdatePseudoHeaderAddress4(old, addr)
		if port != 0 {
			u.SetDestinationPortWithChecksumUpdate(port)
		}
	}
}

// SNAT4 rewrites a backend's reply toward the client so that it comes from
// the VIP: source address to addr and, when port is not 0, source port to
// port; checksums as in DNAT4.
func SNAT4(ip packet.IPv4, l4 L4, addr [4]byte, port uint16) {
	old := ip.SourceAddress()
	ip.SetSourceAddressWithChecksumUpdate(addr)
	if l4.Hdr == nil {
		return
	}
	switch l4.Proto {
	case packet.ProtoTCP:
		t := packet.TCP(l4.Hdr)
		t.UpdatePseudoHeaderAddress4(old, addr)
		if port != 0 {
			t.SetSourcePortWithChecksumUpdate(port)
		}
	case packet.ProtoUDP:
		u := packet.UDP(l4.Hdr)
		u.UpdatePseudoHeaderAddress4(old, addr)
		if port != 0 {
			u.SetSourcePortWithChecksumUpdate(port)
		}
	}
}

// DNAT6 is DNAT4 for IPv6 (which has no header checksum; TCP, UDP and
// ICMPv6 all cover the addresses through the pseudo-header).
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
