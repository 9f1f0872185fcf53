package dataplane

import (
	"encoding/binary"

	"github.com/vipd/vipd/packet"
)

// quoted is what the pipeline needs of the datagram quoted in an ICMP
// error: its addresses, transport protocol and ports.
type quoted struct {
	l4Off int // offset of the quoted transport header in the ICMP payload
	end   int // end of the quoted datagram in the ICMP payload
	proto uint8
	src   [16]byte // IPv4 in the first 4 bytes
	dst   [16]byte
	sport uint16
	dport uint16
}

// parseQuote4 reads the quote of an ICMPv4 error payload p. It is false
// when no flow can be named from it: a truncated or malformed header, a
// quoted non-first fragment, or TCP/UDP without its ports.
func parseQuote4(p []byte, q *quoted) bool {
	var pq packet.Quote
	if packet.ParseQuote4(p, &pq) != nil || !pq.HasPorts {
		return false
	}
	ip := packet.IPv4(p)
	s, d := ip.SourceAddress(), ip.DestinationAddress()
	*q = quoted{l4Off: pq.L4Off, end: pq.End, proto: pq.Proto}
	copy(q.src[:], s[:])
	copy(q.dst[:], d[:])
	q.readPorts(p)
	return true
}

// parseQuote6 is parseQuote4 for an ICMPv6 error payload; extension headers
// in the quote are skipped.
func parseQuote6(p []byte, q *quoted) bool {
	var pq packet.Quote
	if packet.ParseQuote6(p, &pq) != nil || !pq.HasPorts {
		return false
	}
	ip := packet.IPv6(p)
	*q = quoted{l4Off: pq.L4Off, end: pq.End, proto: pq.Proto, src: *ip.SourceAddress(), dst: *ip.DestinationAddress()}
	q.readPorts(p)
	return true
}

func (q *quoted) readPorts(p []byte) {
	if q.proto == packet.ProtoTCP || q.proto == packet.ProtoUDP {
		q.sport = binary.BigEndian.Uint16(p[q.l4Off:])
		q.dport = binary.BigEndian.Uint16(p[q.l4Off+2:])
	}
}
