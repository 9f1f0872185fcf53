package packet

import "encoding/binary"

// IPv6 fixed header (RFC 8200 §3):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Version| Traffic Class |           Flow Label                  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Payload Length        |  Next Header  |   Hop Limit   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |
//	+                         Source Address                        +
//	|                          (16 bytes)                           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |
//	+                      Destination Address                      +
//	|                          (16 bytes)                           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Payload Length counts the bytes after the fixed header, extension headers
// included. IPv6 has no header checksum; the pseudo-header of the transport
// checksum covers the addresses.
const (
	ipv6VersTCFlow = 0
	ipv6PayloadLen = 4
	ipv6NextHeader = 6
	ipv6HopLimit   = 7
	ipv6Src        = 8
	ipv6Dst        = 24

	// IPv6Size is the length of the fixed header.
	IPv6Size = 40
)

// IPv6 is a view of an IPv6 packet. Once Validate accepts it the fixed
// header accessors are in bounds; views taken from a parsed Frame are cut at
// 40 + Payload Length.
type IPv6 []byte

// Validate checks the fixed header: long enough, version 6, and a Payload
// Length that fits in len(b). Jumbograms (RFC 2675, Payload Length 0 with a
// hop-by-hop option) are not supported: a zero Payload Length is taken
// literally.
func (b IPv6) Validate() error {
	if len(b) < IPv6Size {
		return ErrTruncated
	}
	if b[ipv6VersTCFlow]>>4 != 6 {
		return ErrBadVersion
	}
	if IPv6Size+int(b.PayloadLength()) > len(b) {
		return ErrBadLength
	}
	return nil
}

// IsValid reports whether Validate accepts b.
func (b IPv6) IsValid() bool { return b.Validate() == nil }

// Version returns the version field (6 in a valid header).
func (b IPv6) Version() uint8 { return b[ipv6VersTCFlow] >> 4 }

// TrafficClass returns the traffic class (DSCP and ECN).
func (b IPv6) TrafficClass() uint8 {
	return uint8(binary.BigEndian.Uint16(b[ipv6VersTCFlow:]) >> 4)
}

// FlowLabel returns the 20-bit flow label (RFC 6437).
func (b IPv6) FlowLabel() uint32 {
	return binary.BigEndian.Uint32(b[ipv6VersTCFlow:]) & 0x000fffff
}

// PayloadLength returns the length of everything after the fixed header.
func (b IPv6) PayloadLength() uint16 { return binary.BigEndian.Uint16(b[ipv6PayloadLen:]) }

// SetPayloadLength sets Payload Length.
func (b IPv6) SetPayloadLength(v uint16) { binary.BigEndian.PutUint16(b[ipv6PayloadLen:], v) }

// NextHeader returns the type of the header that follows the fixed header:
// an extension header or the upper-layer protocol (see ExtHeaders).
func (b IPv6) NextHeader() uint8 { return b[ipv6NextHeader] }

// SetNextHeader sets Next Header.
func (b IPv6) SetNextHeader(v uint8) { b[ipv6NextHeader] = v }

// HopLimit returns the hop limit.
func (b IPv6) HopLimit() uint8 { return b[ipv6HopLimit] }

// SetHopLimit sets the hop limit.
func (b IPv6) SetHopLimit(v uint8) { b[ipv6HopLimit] = v }

// DecHopLimit decrements the hop limit as a router does (RFC 8200 §3). If
// it is 0 or 1 the packet must not be forwarded: DecHopLimit then leaves b
// unchanged and returns false. No checksum covers the hop limit.
func (b IPv6) DecHopLimit() bool {
	if b[ipv6HopLimit] <= 1 {
		return false
	}
	b[ipv6HopLimit]--
	return true
}

// SourceAddress returns the source address. The pointer aliases b: writes
// through it change the packet, and a later write to the packet changes what
// it points at. Copy it (a := *b.SourceAddress()) to keep the old value.
func (b IPv6) SourceAddress() *[16]byte { return (*[16]byte)(b[ipv6Src : ipv6Src+16]) }

// DestinationAddress returns the destination address, aliasing b like
// SourceAddress.
func (b IPv6) DestinationAddress() *[16]byte { return (*[16]byte)(b[ipv6Dst : ipv6Dst+16]) }

// SetSourceAddress sets the source address. a may alias b.
func (b IPv6) SetSourceAddress(a *[16]byte) { copy(b[ipv6Src:ipv6Src+16], a[:]) }

// SetDestinationAddress sets the destination address. a may alias b.
func (b IPv6) SetDestinationAddress(a *[16]byte) { copy(b[ipv6Dst:ipv6Dst+16], a[:]) }

// Payload returns the bytes after the fixed header up to 40 + Payload
// Length: extension headers, then the upper-layer packet.
func (b IPv6) Payload() []byte { return b[IPv6Size : IPv6Size+int(b.PayloadLength())] }
