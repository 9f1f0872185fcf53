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
// Transport checksums inside a quote are updated only when the quote holds
// the checksum field (TCP: 18 bytes, UDP: 8); the ICMP checksum, which covers
// the whole quote, is recomputed, since an error is rare and short.

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
	old := inner.SourceAddress()
	inner.SetSourceAddressWithChecksumUpdate(addr)
	translateQuote4(q[l4:end], proto, old, addr, srcPortOff, port)
	icmp.SetChecksum(0)
	icmp.SetChecksum(icmp.ComputeChecksum())
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
	old := inner.DestinationAddress()
	inner.SetDestinationAddressWithChecksumUpdate(addr)
	translateQuote4(q[l4:end], proto, old, addr, dstPortOff, port)
	icmp.SetChecksum(0)
	icmp.SetChecksum(icmp.ComputeChecksum())
}

func translateQuote4(l4 []byte, proto uint8, oldAddr, newAddr [4]byte, portOff int, port uint16) {
	o, n := binary.BigEndian.Uint32(oldAddr[:]), binary.BigEndian.Uint32(newAddr[:])
	csumOff, ok := quotedChecksum(l4, proto)
	if ok {
		c := binary.BigEndian.Uint16(l4[csumOff:])
		if proto == packet.ProtoTCP || c != 0 { // a zero UDP checksum means none
			c = packet.ChecksumUpdate32(c, o, n)
			binary.BigEndian.PutUint16(l4[csumOff:], nonZeroUDP(proto, c))
		}
	}
	rewriteQuotedPort(l4, proto, portOff, port, csumOff, ok)
}

// ICMPErrorDNAT6 is ICMPErrorDNAT4 for ICMPv6.
func ICMPErrorDNAT6(ip packet.IPv6, icmp packet.ICMPv6, l4, end int, proto uint8, addr *[16]byte, port uint16) {
	q := icmp.Payload()
	inner := packet.IPv6(q[:l4])
	translateQuote6(q[l4:end], proto, inner.SourceAddress(), addr, srcPortOff, port)
	inner.SetSourceAddress(addr)
	ip.SetDestinationAddress(addr)
	icmp.SetChecksum(0)
	icmp.SetChecksum(icmp.ComputeChecksum(packet.PseudoHeaderSum6(ip.SourceAddress(), ip.DestinationAddress(), packet.ProtoICMPv6, uint32(len(icmp)))))
}

// ICMPErrorSNAT6 is ICMPErrorSNAT4 for ICMPv6.
func ICMPErrorSNAT6(ip packet.IPv6, icmp packet.ICMPv6, l4, end int, proto uint8, addr *[16]byte, port uint16, outer bool) {
	q := icmp.Payload()
	inner := packet.IPv6(q[:l4])
	translateQuote6(q[l4:end], proto, inner.DestinationAddress(), addr, dstPortOff, port)
	inner.SetDestinationAddress(addr)
	if outer {
		ip.SetSourceAddress(addr)
	}
	icmp.SetChecksum(0)
	icmp.SetChecksum(icmp.ComputeChecksum(packet.PseudoHeaderSum6(ip.SourceAddress(), ip.DestinationAddress(), packet.ProtoICMPv6, uint32(len(icmp)))))
}

// translateQuote6 must run before the quoted address is overwritten: old
// points into the packet.
func translateQuote6(l4 []byte, proto uint8, old, new *[16]byte, portOff int, port uint16) {
	csumOff, ok := quotedChecksum(l4, proto)
	if ok {
		c := packet.ChecksumUpdate128(binary.BigEndian.Uint16(l4[csumOff:]), old, new)
		binary.BigEndian.PutUint16(l4[csumOff:], nonZeroUDP(proto, c))
	}
	rewriteQuotedPort(l4, proto, portOff, port, csumOff, ok)
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

func rewriteQuotedPort(l4 []byte, proto uint8, portOff int, port uint16, csumOff int, hasCsum bool) {
	if port == 0 || (proto != packet.ProtoTCP && proto != packet.ProtoUDP) || len(l4) < portOff+2 {
		return
	}
	old := binary.BigEndian.Uint16(l4[portOff:])
	binary.BigEndian.PutUint16(l4[portOff:], port)
	if !hasCsum {
		return
	}
	c := binary.BigEndian.Uint16(l4[csumOff:])
	if proto == packet.ProtoUDP && c == 0 {
		return
	}
	binary.BigEndian.PutUint16(l4[csumOff:], nonZeroUDP(proto, packet.ChecksumUpdate16(c, old, port)))
}

// nonZeroUDP maps a computed UDP checksum of 0 to 0xFFFF (RFC 768).
func nonZeroUDP(proto uint8, c uint16) uint16 {
	if proto == packet.ProtoUDP && c == 0 {
		return 0xffff
	}
	return c
}
