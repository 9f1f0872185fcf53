package dsr

import (
	"encoding/binary"

	"github.com/vipd/vipd/packet"
)

// Embedded describes the datagram quoted in an ICMP error (RFC 792: the
// offending datagram's IP header and at least its first 8 data bytes; RFC
// 4443: as much as fits). The quote is usually cut short, so its IP length
// fields describe the original datagram, not the bytes present; offsets are
// relative to the start of the ICMP payload.
type Embedded struct {
	HdrLen  int   // IP header length (IPv6: 40; extension headers are not walked)
	Proto   uint8 // transport protocol of the original datagram
	L4Off   int   // offset of the transport header
	L4Len   int   // bytes of the transport header and data present in the quote
	Src     [16]byte
	Dst     [16]byte
	SrcPort uint16 // 0 unless Proto is TCP or UDP
	DstPort uint16
}

// ParseEmbedded4 parses the IPv4 datagram quoted in an ICMPv4 error payload
// p. It requires a whole IP header and, for TCP and UDP, the 4 bytes of
// ports that every ICMPv4 error carries (RFC 792 quotes 64 data bits). A
// quoted non-first fragment has no ports: ok is false, since no flow can be
// named from it.
func ParseEmbedded4(p []byte, e *Embedded) bool {
	if len(p) < packet.IPv4MinSize || p[0]>>4 != 4 {
		return false
	}
	hl := int(p[0]&0x0f) * 4
	if hl < packet.IPv4MinSize || hl > len(p) {
		return false
	}
	ip := packet.IPv4(p)
	if ip.FragmentOffset() != 0 {
		return false
	}
	*e = Embedded{HdrLen: hl, Proto: ip.Protocol(), L4Off: hl, L4Len: len(p) - hl}
	src, dst := ip.SourceAddress(), ip.DestinationAddress()
	copy(e.Src[:], src[:])
	copy(e.Dst[:], dst[:])
	return e.ports(p)
}

// ParseEmbedded6 is ParseEmbedded4 for an ICMPv6 error payload. Only a
// transport header directly after the fixed header is recognised: a quoted
// packet with extension headers is not steered (ok false).
func ParseEmbedded6(p []byte, e *Embedded) bool {
	if len(p) < packet.IPv6Size || p[0]>>4 != 6 {
		return false
	}
	ip := packet.IPv6(p)
	*e = Embedded{HdrLen: packet.IPv6Size, Proto: ip.NextHeader(), L4Off: packet.IPv6Size, L4Len: len(p) - packet.IPv6Size}
	e.Src, e.Dst = *ip.SourceAddress(), *ip.DestinationAddress()
	switch e.Proto {
	case packet.ProtoTCP, packet.ProtoUDP, packet.ProtoICMPv6:
	default:
		return false
	}
	return e.ports(p)
}

func (e *Embedded) ports(p []byte) bool {
	switch e.Proto {
	case packet.ProtoTCP, packet.ProtoUDP:
		if e.L4Len < 4 {
			return false
		}
		e.SrcPort = binary.BigEndian.Uint16(p[e.L4Off:])
		e.DstPort = binary.BigEndian.Uint16(p[e.L4Off+2:])
	}
	return true
}
