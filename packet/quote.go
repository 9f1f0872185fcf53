package packet

import "encoding/binary"

// An ICMP error quotes the datagram that caused it: its IP header and at
// least the first 8 bytes of what followed (RFC 792; RFC 1812 §4.3.2.3 lets
// routers send more), or for ICMPv6 as much as fits in the minimum MTU (RFC
// 4443 §2.4 (c)). Those 8 bytes hold the ports of TCP and UDP, which is
// what a load balancer needs to find the flow an error belongs to.
//
// A quote is cut short by design, so its IP length fields describe the
// original datagram, not the bytes at hand. The quote parsers below check
// what is there instead and bound every offset by len(b).

// Quote describes a datagram quoted in an ICMP error. Offsets are from the
// start of the quote (the ICMP payload).
type Quote struct {
	// L4Off is where the transport header starts (or, in a non-first
	// fragment, the fragment's data).
	L4Off int
	// End is where the quoted datagram ends: its declared length, or
	// len(b) if the quote is shorter, as it usually is.
	End int
	// Proto is the upper-layer protocol, as in Frame.
	Proto uint8
	// Frag and FirstFrag are as in Frame.
	Frag, FirstFrag bool
	// FragHdrOff is the offset of an IPv6 Fragment header, or 0.
	FragHdrOff int
	// HasPorts reports that the first 8 bytes of the transport header are
	// quoted, so that TCP and UDP ports (and an ICMP type, code and echo
	// identifier) may be read. Only those 8 bytes: a TCP view of a quote
	// has valid SourcePort, DestinationPort and SequenceNumber and nothing
	// else.
	HasPorts bool
}

// QuotedPortsSize is the part of the transport header an ICMP error is sure
// to quote.
const QuotedPortsSize = 8

// ParseQuote4 parses b, the payload of an ICMPv4 error message, as an IPv4
// header (options allowed) followed by part of a datagram. It returns
// ErrTruncated if the header is not whole, ErrBadVersion, ErrBadIHL, or
// ErrBadLength if Total Length is smaller than the header. IPv4(b) then has
// a valid header, but its Payload must not be used: Total Length exceeds
// len(b).
func ParseQuote4(b []byte, q *Quote) error {
	*q = Quote{}
	if len(b) < IPv4MinSize {
		return ErrTruncated
	}
	if b[ipv4VersIHL]>>4 != 4 {
		return ErrBadVersion
	}
	hl := int(b[ipv4VersIHL]&0x0f) * 4
	if hl < IPv4MinSize {
		return ErrBadIHL
	}
	if hl > len(b) {
		return ErrTruncated
	}
	tl := int(binary.BigEndian.Uint16(b[ipv4TotalLen:]))
	if tl < hl {
		return ErrBadLength
	}
	ip := IPv4(b)
	q.L4Off = hl
	q.End = min(tl, len(b))
	q.Proto = ip.Protocol()
	q.Frag = ip.IsFragment()
	q.FirstFrag = ip.IsFirstFragment()
	q.HasPorts = ip.FragmentOffset() == 0 && q.L4Off+QuotedPortsSize <= q.End
	return nil
}

// ParseQuote6 parses b, the payload of an ICMPv6 error message, as an IPv6
// header, its extension headers and part of a datagram. It returns
// ErrTruncated if the fixed header or an extension header is not whole,
// ErrBadVersion, and the errors of IPv6.ExtHeaders. The fixed-header
// accessors of IPv6(b) are then valid, but not Payload.
func ParseQuote6(b []byte, q *Quote) error {
	*q = Quote{}
	if len(b) < IPv6Size {
		return ErrTruncated
	}
	if b[ipv6VersTCFlow]>>4 != 6 {
		return ErrBadVersion
	}
	ip := IPv6(b)
	end := min(IPv6Size+int(ip.PayloadLength()), len(b))
	var x IPv6ExtHeaders
	if err := ip[:end].ExtHeaders(&x); err != nil {
		return err
	}
	q.End = end
	q.L4Off = x.Off
	q.Proto = x.Proto
	q.Frag = x.Frag
	q.FirstFrag = x.Frag && x.FragOff == 0
	q.FragHdrOff = x.FragHdrOff
	q.HasPorts = x.FragOff == 0 && q.L4Off+QuotedPortsSize <= q.End
	return nil
}
