package packet

import "encoding/binary"

// IPv4 header (RFC 791 §3.1):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Version|  IHL  |Type of Service|          Total Length         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Identification        |Flags|      Fragment Offset    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Time to Live |    Protocol   |         Header Checksum       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       Source Address                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Destination Address                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Options                    |    Padding    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// IHL counts 32-bit words (5..15); Total Length counts bytes of header and
// data; Fragment Offset counts 8-byte units. Flags are, from the left:
// reserved (must be zero), DF (don't fragment), MF (more fragments).
const (
	ipv4VersIHL   = 0
	ipv4TOS       = 1
	ipv4TotalLen  = 2
	ipv4ID        = 4
	ipv4FlagsFrag = 6
	ipv4TTL       = 8
	ipv4Protocol  = 9
	ipv4Checksum  = 10
	ipv4Src       = 12
	ipv4Dst       = 16
	ipv4Options   = 20

	// IPv4MinSize is the length of a header without options (IHL 5).
	IPv4MinSize = 20
	// IPv4MaxHeaderSize is the length of a header with IHL 15.
	IPv4MaxHeaderSize = 60

	ipv4FlagDF       = 0x4000
	ipv4FlagMF       = 0x2000
	ipv4FragOffMask  = 0x1fff
	ipv4FragOffShift = 3 // 8-byte units to bytes
)

// IP protocol numbers (IANA "Assigned Internet Protocol Numbers"), shared by
// the IPv4 Protocol and IPv6 Next Header fields.
const (
	ProtoHopByHop uint8 = 0
	ProtoICMPv4   uint8 = 1
	ProtoIPIP     uint8 = 4 // IPv4 in IPv4 (RFC 2003)
	ProtoTCP      uint8 = 6
	ProtoUDP      uint8 = 17
	ProtoIPv6     uint8 = 41 // IPv6 encapsulation (RFC 2473)
	ProtoRouting  uint8 = 43
	ProtoFragment uint8 = 44
	ProtoESP      uint8 = 50
	ProtoAH       uint8 = 51
	ProtoICMPv6   uint8 = 58
	ProtoNoNext   uint8 = 59
	ProtoDstOpts  uint8 = 60
)

// IPv4 is a view of an IPv4 packet. Once Validate accepts it, the accessors
// are in bounds; views taken from a parsed Frame are cut at Total Length, so
// Ethernet padding is not part of them.
type IPv4 []byte

// Validate checks what the accessors rely on: a whole header of a known
// length, version 4, and a Total Length that covers the header and does not
// exceed len(b). It does not verify the header checksum (IsChecksumValid).
func (b IPv4) Validate() error {
	_, _, err := b.check()
	return err
}

// check is Validate, also returning the header and total lengths it read so
// that Parse need not read them again.
func (b IPv4) check() (hl, tl int, err error) {
	if len(b) < IPv4MinSize {
		return 0, 0, ErrTruncated
	}
	b = b[:len(b):len(b)]
	vihl := b[ipv4VersIHL]
	if vihl>>4 != 4 {
		return 0, 0, ErrBadVersion
	}
	hl = int(vihl&0x0f) * 4
	if hl < IPv4MinSize {
		return 0, 0, ErrBadIHL
	}
	if hl > len(b) {
		return 0, 0, ErrTruncated
	}
	tl = int(binary.BigEndian.Uint16(b[ipv4TotalLen:]))
	if tl < hl || tl > len(b) {
		return 0, 0, ErrBadLength
	}
	return hl, tl, nil
}

// IsValid reports whether Validate accepts b.
func (b IPv4) IsValid() bool { return b.Validate() == nil }

// Version returns the version field (4 in a valid header).
func (b IPv4) Version() uint8 { return b[ipv4VersIHL] >> 4 }

// HeaderLength returns the header length in bytes (IHL × 4, 20..60).
func (b IPv4) HeaderLength() int { return int(b[ipv4VersIHL]&0x0f) * 4 }

// TOS returns the Type of Service byte (DSCP and ECN, RFC 2474, RFC 3168).
func (b IPv4) TOS() uint8 { return b[ipv4TOS] }

// SetTOS sets the Type of Service byte; the checksum is not updated.
func (b IPv4) SetTOS(v uint8) { b[ipv4TOS] = v }

// TotalLength returns the length of header and data in bytes.
func (b IPv4) TotalLength() uint16 { return binary.BigEndian.Uint16(b[ipv4TotalLen:]) }

// SetTotalLength sets Total Length; the checksum is not updated.
func (b IPv4) SetTotalLength(v uint16) { binary.BigEndian.PutUint16(b[ipv4TotalLen:], v) }

// ID returns the Identification field.
func (b IPv4) ID() uint16 { return binary.BigEndian.Uint16(b[ipv4ID:]) }

// SetID sets the Identification field; the checksum is not updated.
func (b IPv4) SetID(v uint16) { binary.BigEndian.PutUint16(b[ipv4ID:], v) }

// Flags returns the three flag bits, right-aligned: 0b010 is DF, 0b001 MF.
func (b IPv4) Flags() uint8 { return b[ipv4FlagsFrag] >> 5 }

// DF reports whether the Don't Fragment flag is set.
func (b IPv4) DF() bool { return binary.BigEndian.Uint16(b[ipv4FlagsFrag:])&ipv4FlagDF != 0 }

// MF reports whether the More Fragments flag is set.
func (b IPv4) MF() bool { return binary.BigEndian.Uint16(b[ipv4FlagsFrag:])&ipv4FlagMF != 0 }

// FragmentOffset returns the offset of this fragment's data within the
// original datagram, in bytes (the field × 8).
func (b IPv4) FragmentOffset() uint16 {
	return (binary.BigEndian.Uint16(b[ipv4FlagsFrag:]) & ipv4FragOffMask) << ipv4FragOffShift
}

// SetFlagsFragmentOffset sets the flags (as returned by Flags) and the
// fragment offset in bytes, which must be a multiple of 8 below 65536; the
// checksum is not updated.
func (b IPv4) SetFlagsFragmentOffset(flags uint8, offset uint16) {
	v := uint16(flags&0x7)<<13 | offset>>ipv4FragOffShift
	binary.BigEndian.PutUint16(b[ipv4FlagsFrag:], v)
}

// IsFragment reports whether b is a fragment: MF set or a nonzero offset.
// A datagram with DF, or with neither MF nor an offset, is whole.
func (b IPv4) IsFragment() bool {
	return binary.BigEndian.Uint16(b[ipv4FlagsFrag:])&(ipv4FlagMF|ipv4FragOffMask) != 0
}

// IsFirstFragment reports whether b is the first fragment of a fragmented
// datagram (MF set, offset 0): the only one that carries the transport
// header.
func (b IPv4) IsFirstFragment() bool {
	return binary.BigEndian.Uint16(b[ipv4FlagsFrag:])&(ipv4FlagMF|ipv4FragOffMask) == ipv4FlagMF
}

// TTL returns the Time to Live.
func (b IPv4) TTL() uint8 { return b[ipv4TTL] }

// SetTTL sets the Time to Live; the checksum is not updated.
func (b IPv4) SetTTL(v uint8) { b[ipv4TTL] = v }

// DecTTL decrements the TTL and updates the header checksum incrementally,
// as a router does (RFC 1812 §5.3.1). If the TTL is 0 or 1 the packet must
// not be forwarded: DecTTL then leaves b unchanged and returns false.
func (b IPv4) DecTTL() bool {
	ttl := b[ipv4TTL]
	if ttl <= 1 {
		return false
	}
	// TTL is the high byte of the 16-bit word it shares with Protocol.
	old := uint16(ttl)<<8 | uint16(b[ipv4Protocol])
	b[ipv4TTL] = ttl - 1
	b.SetChecksum(ChecksumUpdate16(b.Checksum(), old, old-0x100))
	return true
}

// Protocol returns the protocol of the payload (ProtoTCP, ...).
func (b IPv4) Protocol() uint8 { return b[ipv4Protocol] }

// SetProtocol sets the Protocol field; the checksum is not updated.
func (b IPv4) SetProtocol(v uint8) { b[ipv4Protocol] = v }

// Checksum returns the Header Checksum field.
func (b IPv4) Checksum() uint16 { return binary.BigEndian.Uint16(b[ipv4Checksum:]) }

// SetChecksum sets the Header Checksum field.
func (b IPv4) SetChecksum(v uint16) { binary.BigEndian.PutUint16(b[ipv4Checksum:], v) }

// ComputeChecksum returns the header checksum that b should carry, as if
// its checksum field were zero. Use b.SetChecksum(b.ComputeChecksum())
// after raw setters.
func (b IPv4) ComputeChecksum() uint16 {
	if b.HeaderLength() == IPv4MinSize && len(b) >= IPv4MinSize {
		// The usual header without options: five words, the checksum
		// field masked out, no loop.
		_ = b[19]
		s := uint64(binary.BigEndian.Uint32(b[0:])) + uint64(binary.BigEndian.Uint32(b[4:])) +
			uint64(binary.BigEndian.Uint32(b[8:])&0xffff0000) + uint64(binary.BigEndian.Uint32(b[12:])) +
			uint64(binary.BigEndian.Uint32(b[16:]))
		return ^fold64(s)
	}
	return Checksum(b[ipv4Checksum+2:b.HeaderLength()], Sum(b[:ipv4Checksum], 0))
}

// IsChecksumValid reports whether the header checksum is correct. Parse does
// not call it; a forwarder must (RFC 1812 §5.2.2). A header without options,
// the usual case, is summed as five 32-bit words with no loop.
func (b IPv4) IsChecksumValid() bool {
	if len(b) >= IPv4MinSize && b[ipv4VersIHL]&0x0f == IPv4MinSize/4 {
		return ChecksumValid20((*[IPv4MinSize]byte)(b))
	}
	return Sum(b[:b.HeaderLength()], 0) == 0xffff
}

// ChecksumValid20 is IsChecksumValid for a header without options (IHL 5),
// h its 20 bytes: small enough for the compiler to inline.
func ChecksumValid20(h *[IPv4MinSize]byte) bool {
	// The ones' complement sum of the header's 16-bit words is 0xffff iff
	// their plain sum is a nonzero multiple of 0xffff (folding keeps the
	// value mod 0xffff and maps a nonzero sum into [1, 0xffff]). Mod
	// 0xffff, a 32-bit word is the sum of its halves (2^16 ≡ 1), and
	// reading a word in native rather than network order multiplies it by
	// 2^8, which is invertible: so the test holds on five native 32-bit
	// words as it does on ten network-order 16-bit ones, and a
	// divisibility test by a constant costs a multiply, not four folds.
	s := uint64(binary.LittleEndian.Uint32(h[0:])) + uint64(binary.LittleEndian.Uint32(h[4:])) +
		uint64(binary.LittleEndian.Uint32(h[8:])) + uint64(binary.LittleEndian.Uint32(h[12:])) +
		uint64(binary.LittleEndian.Uint32(h[16:]))
	return s != 0 && s%0xffff == 0
}

// SourceAddress returns the source address.
func (b IPv4) SourceAddress() [4]byte { return [4]byte(b[ipv4Src : ipv4Src+4]) }

// DestinationAddress returns the destination address.
func (b IPv4) DestinationAddress() [4]byte { return [4]byte(b[ipv4Dst : ipv4Dst+4]) }

// SourceUint32 returns the source address as a big-endian integer
// (198.18.0.1 is 0xc6120001).
func (b IPv4) SourceUint32() uint32 { return binary.BigEndian.Uint32(b[ipv4Src:]) }

// DestinationUint32 returns the destination address as a big-endian integer.
func (b IPv4) DestinationUint32() uint32 { return binary.BigEndian.Uint32(b[ipv4Dst:]) }

// SetSourceAddress sets the source address; the checksum is not updated.
func (b IPv4) SetSourceAddress(a [4]byte) { copy(b[ipv4Src:ipv4Src+4], a[:]) }

// SetDestinationAddress sets the destination address; the checksum is not
// updated.
func (b IPv4) SetDestinationAddress(a [4]byte) { copy(b[ipv4Dst:ipv4Dst+4], a[:]) }

// SetSourceAddressWithChecksumUpdate sets the source address and updates
// the header checksum incrementally (RFC 1624). The transport checksum,
// which covers the address through the pseudo-header, is the caller's:
// see TCP.UpdatePseudoHeaderAddress4 and UDP.UpdatePseudoHeaderAddress4.
func (b IPv4) SetSourceAddressWithChecksumUpdate(a [4]byte) {
	old := b.SourceUint32()
	b.SetSourceAddress(a)
	b.SetChecksum(ChecksumUpdate32(b.Checksum(), old, b.SourceUint32()))
}

// SetDestinationAddressWithChecksumUpdate is SetSourceAddressWithChecksumUpdate
// for the destination address.
func (b IPv4) SetDestinationAddressWithChecksumUpdate(a [4]byte) {
	old := b.DestinationUint32()
	b.SetDestinationAddress(a)
	b.SetChecksum(ChecksumUpdate32(b.Checksum(), old, b.DestinationUint32()))
}

// Options returns the options and padding between the fixed header and the
// payload (empty when IHL is 5).
func (b IPv4) Options() []byte { return b[ipv4Options:b.HeaderLength()] }

// Payload returns the bytes after the header up to Total Length.
func (b IPv4) Payload() []byte { return b[b.HeaderLength():b.TotalLength()] }

// PayloadLength returns Total Length minus the header length: the length
// that goes into the transport pseudo-header.
func (b IPv4) PayloadLength() uint16 { return b.TotalLength() - uint16(b.HeaderLength()) }
