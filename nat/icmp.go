package nat

import (
	"encoding/binary"

	"github.com/vipd/vipd/packet"
)

// ICMP errors about a NAT flow carry a quote of the offending datagram, and
// the quote must be translated together with the outer header, or the host
// receiving the error cannot match it to its socket (RFC 5508 §7). The
// functions below take, from packet.ParseQuote4/6, the offset of the quoted
// transport header (l4, which is also the end of the quoted IP headers),
// the end of the quoted datagram and its transport protocol.
//
// Checksums are updated incrementally (RFC 1624), never recomputed: the
// ICMP checksum covers the whole quote (and, for ICMPv6, a pseudo-header
// with the outer addresses), so every field rewritten in the quote or the
// pseudo-header is folded into it as it changes, and an error that arrived
// corrupt leaves corrupt. (The pipeline drops corrupt errors before they
// get here; this keeps a slip from laundering one.) The transport checksum
// inside a quote cannot be verified — the quote is cut short — and is
// updated only when the quote holds it (TCP: 18 bytes, UDP: 8); a zero
// UDP checksum, which means "none", stays zero in either family.

// transport checksum field offsets
const (
	tcpCsumOff = 16
	udpCsumOff = 6
)

// ICMPErrorDNAT4 translates an ICMPv4 error sent to a VIP about a packet the
// VIP sent (the quote's source is the VIP) for delivery to the backend that
// owns the flow: outer destination and quoted source become addr, and the
// quoted source port becomes port when port is not 0.
func ICMPErrorDNAT4(ip packet.IPv4, icmp packet.ICMPv4, l4, end int, proto uint8, addr [4]byte, port uint16) {
	ip.SetDestinationAddressWithChecksumUpdate(addr)
	q := icmp.Payload()
	inner := packet.IPv4(q[:l4])
	old, oldSum := inner.SourceAddress(), inner.Checksum()
	inner.SetSourceAddressWithChecksumUpdate(addr)
	c := packet.ChecksumUpdate48(icmp.Checksum(), be32(old), be32(addr), oldSum, inner.Checksum())
	icmp.SetChecksum(translateQuote4(q[l4:end], proto, old, addr, srcPortOff, port, c))
}

// ICMPErrorSNAT4 translates an ICMPv4 error on its way to a client about a
// packet the client sent to a NAT backend (the quote's destination is the
// backend), so that the client can match it: the quoted destination becomes
// addr (the VIP) and the quoted destination port becomes port when port is
// not 0. When the backend itself sent the error (outer is true), the outer
// source becomes addr too; an error from a router on the way keeps its
// source.
func ICMPErrorSNAT4(ip packet.IPv4, icmp packet.ICMPv4, l4, end int, proto uint8, addr [4]byte, port uint16, outer bool) {
	if outer {
		ip.SetSourceAddressWithChecksumUpdate(addr)
	}
	q := icmp.Payload()
	inner := packet.IPv4(q[:l4])
	old, oldSum := inner.DestinationAddress(), inner.Checksum()
	inner.SetDestinationAddressWithChecksumUpdate(addr)
	c := packet.ChecksumUpdate48(icmp.Checksum(), be32(old), be32(addr), oldSum, inner.Checksum())
	icmp.SetChecksum(translateQuote4(q[l4:end], proto, old, addr, dstPortOff, port, c))
}

func be32(a [4]byte) uint32 { return binary.BigEndian.Uint32(a[:]) }

// translateQuote4 rewrites the quoted transport header l4 for an address
// change oldAddr → newAddr (its pseudo-header) and the port at portOff
// (when port is not 0), and returns the ICMP checksum icmpSum updated for
// what changed.
func translateQuote4(l4 []byte, proto uint8, oldAddr, newAddr [4]byte, portOff int, port uint16, icmpSum uint16) uint16 {
	csumOff, ok := quotedChecksum(l4, proto)
	if ok {
		c := binary.BigEndian.Uint16(l4[csumOff:])
		if proto == packet.ProtoTCP || c != 0 { // a zero UDP checksum means none
			n := nonZeroUDP(proto, packet.ChecksumUpdate32(c, be32(oldAddr), be32(newAddr)))
			binary.BigEndian.PutUint16(l4[csumOff:], n)
			icmpSum = packet.ChecksumUpdate16(icmpSum, c, n)
		}
	}
	return rewriteQuotedPort(l4, proto, portOff, port, csumOff, ok, icmpSum)
}

// ICMPErrorDNAT6 is ICMPErrorDNAT4 for ICMPv6.
func ICMPErrorDNAT6(ip packet.IPv6, icmp packet.ICMPv6, l4, end int, proto uint8, addr *[16]byte, port uint16) {
	q := icmp.Payload()
	inner := packet.IPv6(q[:l4])
	c := icmp.Checksum()
	c = packet.ChecksumUpdate128(c, ip.DestinationAddress(), addr) // pseudo-header
	c = packet.ChecksumUpdate128(c, inner.SourceAddress(), addr)
	c = translateQuote6(q[l4:end], proto, inner.SourceAddress(), addr, srcPortOff, port, c)
	inner.SetSourceAddress(addr)
	ip.SetDestinationAddress(addr)
	icmp.SetChecksum(c)
}

// ICMPErrorSNAT6 is ICMPErrorSNAT4 for ICMPv6.
func ICMPErrorSNAT6(ip packet.IPv6, icmp packet.ICMPv6, l4, end int, proto uint8, addr *[16]byte, port uint16, outer bool) {
	q := icmp.Payload()
	inner := packet.IPv6(q[:l4])
	c := icmp.Checksum()
	c = packet.ChecksumUpdate128(c, inner.DestinationAddress(), addr)
	c = translateQuote6(q[l4:end], proto, inner.DestinationAddress(), addr, dstPortOff, port, c)
	inner.SetDestinationAddress(addr)
	if outer {
		c = packet.ChecksumUpdate128(c, ip.SourceAddress(), addr) // pseudo-header
		ip.SetSourceAddress(addr)
	}
	icmp.SetChecksum(c)
}

// translateQuote6 is translateQuote4 for a quoted IPv6 packet. It must run
// before the quoted address is overwritten: old points into the packet.
func translateQuote6(l4 []byte, proto uint8, old, new *[16]byte, portOff int, port uint16, icmpSum uint16) uint16 {
	csumOff, ok := quotedChecksum(l4, proto)
	if ok {
		c := binary.BigEndian.Uint16(l4[csumOff:])
		if proto == packet.ProtoTCP || c != 0 { // a zero UDP checksum stays zero
			n := nonZeroUDP(proto, packet.ChecksumUpdate128(c, old, new))
			binary.BigEndian.PutUint16(l4[csumOff:], n)
			icmpSum = packet.ChecksumUpdate16(icmpSum, c, n)
		}
	}
	return rewriteQuotedPort(l4, proto, portOff, port, csumOff, ok, icmpSum)
}

// quotedChecksum returns where the transport checksum of a quote is and
// whether the quote is long enough to hold it.
func quotedChecksum(l4 []byte, proto uint8) (int, bool) {
	switch proto {
	case packet.ProtoTCP:
		return tcpCsumOff, len(l4) >= tcpCsumOff+2
	case packet.ProtoUDP:
		return udpCsumOff, len(l4) >= udpCsumOff+2
	}
	return 0, false
}

// rewriteQuotedPort sets the quoted port at portOff to port (unless port
// is 0), updates the quoted transport checksum when the quote holds it, and
// returns icmpSum updated for both.
func rewriteQuotedPort(l4 []byte, proto uint8, portOff int, port uint16, csumOff int, hasCsum bool, icmpSum uint16) uint16 {
	if port == 0 || (proto != packet.ProtoTCP && proto != packet.ProtoUDP) || len(l4) < portOff+2 {
		return icmpSum
	}
	old := binary.BigEndian.Uint16(l4[portOff:])
	binary.BigEndian.PutUint16(l4[portOff:], port)
	icmpSum = packet.ChecksumUpdate16(icmpSum, old, port)
	if !hasCsum {
		return icmpSum
	}
	c := binary.BigEndian.Uint16(l4[csumOff:])
	if proto == packet.ProtoUDP && c == 0 {
		return icmpSum
	}
	n := nonZeroUDP(proto, packet.ChecksumUpdate16(c, old, port))
	binary.BigEndian.PutUint16(l4[csumOff:], n)
	return packet.ChecksumUpdate16(icmpSum, c, n)
}

// nonZeroUDP maps a computed UDP checksum of 0 to 0xFFFF (RFC 768).
func nonZeroUDP(proto uint8, c uint16) uint16 {
	if proto == packet.ProtoUDP && c == 0 {
		return 0xffff
	}
	return c
}
