package packet

import "encoding/binary"

// ICMPv4 (RFC 792) and ICMPv6 (RFC 4443 §2.1) share the first 8 bytes:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Type      |     Code      |          Checksum             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                     Rest of header                            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                     Payload ...                               |
//
// The rest of the header is, for echo: identifier and sequence number; for
// ICMPv4 fragmentation needed (type 3 code 4): unused (16 bits) and the
// next-hop MTU (16 bits, RFC 1191 §4); for ICMPv6 Packet Too Big: the MTU
// (32 bits, RFC 4443 §3.2). The payload of an error message is as much of
// the offending datagram as fits: at least its IP header and 8 bytes of data
// for ICMPv4 (RFC 792, RFC 1812 §4.3.2.3 allows more), as much as fits in
// the minimum IPv6 MTU for ICMPv6.
//
// The ICMPv4 checksum covers the ICMP message only; the ICMPv6 checksum
// also covers a pseudo-header (RFC 4443 §2.3) with protocol ProtoICMPv6.
const (
	icmpType     = 0
	icmpCode     = 1
	icmpChecksum = 2
	icmpRest     = 4
	icmpIdent    = 4
	icmpSeq      = 6
	icmpV4MTU    = 6
	icmpV6MTU    = 4

	// ICMPSize is the length of the ICMPv4 or ICMPv6 header, rest of
	// header included.
	ICMPSize = 8
)

// ICMPv4 types (RFC 792) and the codes used here.
const (
	ICMPv4EchoReply      uint8 = 0
	ICMPv4DstUnreachable uint8 = 3
	ICMPv4SourceQuench   uint8 = 4 // deprecated, RFC 6633
	ICMPv4Redirect       uint8 = 5
	ICMPv4Echo           uint8 = 8
	ICMPv4TimeExceeded   uint8 = 11
	ICMPv4ParamProblem   uint8 = 12

	// ICMPv4FragNeeded is the Destination Unreachable code for
	// "fragmentation needed and DF set" (RFC 792, RFC 1191).
	ICMPv4FragNeeded uint8 = 4
)

// ICMPv6 types (RFC 4443, RFC 4861).
const (
	ICMPv6DstUnreachable        uint8 = 1
	ICMPv6PacketTooBig          uint8 = 2
	ICMPv6TimeExceeded          uint8 = 3
	ICMPv6ParamProblem          uint8 = 4
	ICMPv6EchoRequest           uint8 = 128
	ICMPv6EchoReply             uint8 = 129
	ICMPv6RouterSolicitation    uint8 = 133
	ICMPv6RouterAdvertisement   uint8 = 134
	ICMPv6NeighborSolicitation  uint8 = 135
	ICMPv6NeighborAdvertisement uint8 = 136
	ICMPv6Redirect              uint8 = 137
)

// The ICMP errors vipd relays: it steers them to the backend that owns the
// flow they quote, or translates them on their way to a NAT client. They
// are the errors a host acts on for a connection (path MTU, unreachable,
// time exceeded, parameter problem). Every other type — redirects, source
// quench (deprecated, RFC 6633), informational messages — is not relayed:
// addressed to a VIP it is dropped and counted; on its way elsewhere it is
// the kernel's. The XDP steering program is built from these same values.
var ICMPv4FlowErrors = [...]uint8{ICMPv4DstUnreachable, ICMPv4TimeExceeded, ICMPv4ParamProblem}

// ICMPv6FlowErrorFirst..ICMPv6FlowErrorLast are the ICMPv6 errors vipd
// relays (see ICMPv4FlowErrors): destination unreachable, packet too big,
// time exceeded, parameter problem — every error type RFC 4443 defines.
const (
	ICMPv6FlowErrorFirst = ICMPv6DstUnreachable
	ICMPv6FlowErrorLast  = ICMPv6ParamProblem
)

// ICMPv6NDPFirst..ICMPv6NDPLast are the neighbour discovery types (RFC
// 4861 §4): router and neighbour solicitation and advertisement, redirect.
const (
	ICMPv6NDPFirst = ICMPv6RouterSolicitation
	ICMPv6NDPLast  = ICMPv6Redirect
)

// IsICMPv4FlowError reports whether t is in ICMPv4FlowErrors.
func IsICMPv4FlowError(t uint8) bool {
	return t == ICMPv4DstUnreachable || t == ICMPv4TimeExceeded || t == ICMPv4ParamProblem
}

// IsICMPv6FlowError reports whether t is an ICMPv6 error vipd relays.
func IsICMPv6FlowError(t uint8) bool { return t >= ICMPv6FlowErrorFirst && t <= ICMPv6FlowErrorLast }

// ICMPv4 is a view of an ICMPv4 message, at least ICMPSize bytes (Parse
// checks), cut at the end of the IP payload.
type ICMPv4 []byte

// Type returns the message type.
func (b ICMPv4) Type() uint8 { return b[icmpType] }

// Code returns the message code.
func (b ICMPv4) Code() uint8 { return b[icmpCode] }

// SetType sets the type; the checksum is not updated.
func (b ICMPv4) SetType(v uint8) { b[icmpType] = v }

// SetCode sets the code; the checksum is not updated.
func (b ICMPv4) SetCode(v uint8) { b[icmpCode] = v }

// Checksum returns the checksum field.
func (b ICMPv4) Checksum() uint16 { return binary.BigEndian.Uint16(b[icmpChecksum:]) }

// SetChecksum sets the checksum field.
func (b ICMPv4) SetChecksum(v uint16) { binary.BigEndian.PutUint16(b[icmpChecksum:], v) }

// RestOfHeader returns bytes 4..7, whose meaning depends on the type.
func (b ICMPv4) RestOfHeader() [4]byte { return [4]byte(b[icmpRest : icmpRest+4]) }

// SetRestOfHeader sets bytes 4..7; the checksum is not updated.
func (b ICMPv4) SetRestOfHeader(v [4]byte) { copy(b[icmpRest:icmpRest+4], v[:]) }

// Ident returns the echo identifier (echo and echo reply only).
func (b ICMPv4) Ident() uint16 { return binary.BigEndian.Uint16(b[icmpIdent:]) }

// Sequence returns the echo sequence number (echo and echo reply only).
func (b ICMPv4) Sequence() uint16 { return binary.BigEndian.Uint16(b[icmpSeq:]) }

// MTU returns the next-hop MTU of a "fragmentation needed" message (RFC
// 1191 §4); 0 from a router that predates RFC 1191.
func (b ICMPv4) MTU() uint16 { return binary.BigEndian.Uint16(b[icmpV4MTU:]) }

// SetMTU sets the next-hop MTU; the checksum is not updated.
func (b ICMPv4) SetMTU(v uint16) { binary.BigEndian.PutUint16(b[icmpV4MTU:], v) }

// Payload returns the bytes after the 8-byte header: for an error, the
// quoted datagram.
func (b ICMPv4) Payload() []byte { return b[ICMPSize:] }

// IsFlowError reports whether the message is an error vipd relays (see
// ICMPv4FlowErrors). Redirects and source quench quote a datagram too, but
// are not relayed.
func (b ICMPv4) IsFlowError() bool { return IsICMPv4FlowError(b.Type()) }

// ComputeChecksum returns the checksum the whole of b should carry, as if
// the field were zero. b must hold the whole message (not a fragment).
func (b ICMPv4) ComputeChecksum() uint16 {
	return Checksum(b[icmpChecksum+2:], Sum(b[:icmpChecksum], 0))
}

// IsChecksumValid reports whether the checksum over the whole of b is right.
func (b ICMPv4) IsChecksumValid() bool { return Sum(b, 0) == 0xffff }

// ICMPv6 is a view of an ICMPv6 message, at least ICMPSize bytes (Parse
// checks), cut at the end of the IP payload.
type ICMPv6 []byte

// Type returns the message type.
func (b ICMPv6) Type() uint8 { return b[icmpType] }

// Code returns the message code.
func (b ICMPv6) Code() uint8 { return b[icmpCode] }

// SetType sets the type; the checksum is not updated.
func (b ICMPv6) SetType(v uint8) { b[icmpType] = v }

// SetCode sets the code; the checksum is not updated.
func (b ICMPv6) SetCode(v uint8) { b[icmpCode] = v }

// Checksum returns the checksum field.
func (b ICMPv6) Checksum() uint16 { return binary.BigEndian.Uint16(b[icmpChecksum:]) }

// SetChecksum sets the checksum field.
func (b ICMPv6) SetChecksum(v uint16) { binary.BigEndian.PutUint16(b[icmpChecksum:], v) }

// RestOfHeader returns bytes 4..7, whose meaning depends on the type.
func (b ICMPv6) RestOfHeader() [4]byte { return [4]byte(b[icmpRest : icmpRest+4]) }

// SetRestOfHeader sets bytes 4..7; the checksum is not updated.
func (b ICMPv6) SetRestOfHeader(v [4]byte) { copy(b[icmpRest:icmpRest+4], v[:]) }

// Ident returns the echo identifier (echo request and reply only).
func (b ICMPv6) Ident() uint16 { return binary.BigEndian.Uint16(b[icmpIdent:]) }

// Sequence returns the echo sequence number (echo request and reply only).
func (b ICMPv6) Sequence() uint16 { return binary.BigEndian.Uint16(b[icmpSeq:]) }

// MTU returns the MTU of a Packet Too Big message (RFC 4443 §3.2).
func (b ICMPv6) MTU() uint32 { return binary.BigEndian.Uint32(b[icmpV6MTU:]) }

// SetMTU sets the MTU; the checksum is not updated.
func (b ICMPv6) SetMTU(v uint32) { binary.BigEndian.PutUint32(b[icmpV6MTU:], v) }

// Payload returns the bytes after the 8-byte header: for an error, the
// quoted packet.
func (b ICMPv6) Payload() []byte { return b[ICMPSize:] }

// IsFlowError reports whether the message is an error vipd relays: types
// 1 to 4 (RFC 4443 §3). Types 0 and 5..127 are errors too, but none is
// defined that a host would act on.
func (b ICMPv6) IsFlowError() bool { return IsICMPv6FlowError(b.Type()) }

// ComputeChecksum returns the checksum the whole of b should carry, given
// the pseudo-header sum (PseudoHeaderSum6 with ProtoICMPv6 and len(b)), as
// if the field were zero.
func (b ICMPv6) ComputeChecksum(pseudo uint16) uint16 {
	return Checksum(b[icmpChecksum+2:], Sum(b[:icmpChecksum], pseudo))
}

// IsChecksumValid reports whether the checksum is right for the given
// pseudo-header sum.
func (b ICMPv6) IsChecksumValid(pseudo uint16) bool { return Sum(b, pseudo) == 0xffff }
