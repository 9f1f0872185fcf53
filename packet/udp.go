package packet

import "encoding/binary"

// UDP header (RFC 768):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          Source Port          |       Destination Port        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|            Length             |           Checksum            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Length counts header and data in bytes. The checksum covers a
// pseudo-header, the header and the data. A zero checksum field means "no
// checksum" over IPv4 (RFC 768) and is invalid over IPv6 (RFC 8200 §8.1);
// a computed zero is therefore sent as 0xFFFF.
const (
	udpSrcPort  = 0
	udpDstPort  = 2
	udpLength   = 4
	udpChecksum = 6

	// UDPSize is the length of the header.
	UDPSize = 8
)

// UDP is a view of a UDP datagram, cut at the end of the IP payload
// (Frame.UDP does this).
type UDP []byte

// Validate checks a whole header and, unless the datagram is fragmented
// (frag), that Length is in 8..len(b). A fragment holds only part of the
// datagram Length counts, so then only Length >= 8 is checked. Length may
// be less than len(b): the IP payload then has trailing bytes, which the
// checksum does not cover.
func (b UDP) Validate(frag bool) error {
	if len(b) < UDPSize {
		return ErrTruncated
	}
	l := int(b.Length())
	if l < UDPSize || (!frag && l > len(b)) {
		return ErrBadUDPLength
	}
	return nil
}

// SourcePort returns the source port.
func (b UDP) SourcePort() uint16 { return binary.BigEndian.Uint16(b[udpSrcPort:]) }

// DestinationPort returns the destination port.
func (b UDP) DestinationPort() uint16 { return binary.BigEndian.Uint16(b[udpDstPort:]) }

// SetSourcePort sets the source port; the checksum is not updated.
func (b UDP) SetSourcePort(p uint16) { binary.BigEndian.PutUint16(b[udpSrcPort:], p) }

// SetDestinationPort sets the destination port; the checksum is not updated.
func (b UDP) SetDestinationPort(p uint16) { binary.BigEndian.PutUint16(b[udpDstPort:], p) }

// Length returns the Length field (header and data, in bytes).
func (b UDP) Length() uint16 { return binary.BigEndian.Uint16(b[udpLength:]) }

// SetLength sets the Length field; the checksum is not updated.
func (b UDP) SetLength(v uint16) { binary.BigEndian.PutUint16(b[udpLength:], v) }

// Checksum returns the checksum field.
func (b UDP) Checksum() uint16 { return binary.BigEndian.Uint16(b[udpChecksum:]) }

// SetChecksum sets the checksum field.
func (b UDP) SetChecksum(v uint16) { binary.BigEndian.PutUint16(b[udpChecksum:], v) }

// Payload returns the data: the bytes after the header up to Length, or up
// to the end of b if that comes first (a fragment).
func (b UDP) Payload() []byte { return b[UDPSize:b.end()] }

// ComputeChecksum returns the checksum b should carry, given the sum of its
// pseudo-header (whose length is Length), over b[:Length] as if the field
// were zero; never 0 (a computed 0 is sent as 0xFFFF). The result is
// meaningful only for a whole datagram; in a fragment, which holds less than
// Length bytes, it covers what is there.
func (b UDP) ComputeChecksum(pseudo uint16) uint16 {
	s := Sum(b[:udpChecksum], pseudo)
	return udpChecksumFix(Checksum(b[udpChecksum+2:b.end()], s))
}

// IsChecksumValid reports whether the checksum over b[:Length] is right for
// the given pseudo-header sum (meaningful for a whole datagram only). A
// zero field is not special here: over IPv4 the caller treats it as "no
// checksum" before asking.
func (b UDP) IsChecksumValid(pseudo uint16) bool {
	return Sum(b[:b.end()], pseudo) == 0xffff
}

// end is Length, or len(b) if the datagram is cut short (a fragment).
func (b UDP) end() int { return min(int(b.Length()), len(b)) }

// The updates below leave a zero checksum alone: over IPv4 it means "no
// checksum" and must stay so (RFC 768); over IPv6 it cannot occur in a frame
// Parse accepted.

// SetSourcePortWithChecksumUpdate sets the source port and updates the
// checksum incrementally (RFC 1624).
func (b UDP) SetSourcePortWithChecksumUpdate(p uint16) {
	old := b.SourcePort()
	b.SetSourcePort(p)
	b.updateChecksum16(old, p)
}

// SetDestinationPortWithChecksumUpdate sets the destination port and
// updates the checksum incrementally (RFC 1624).
func (b UDP) SetDestinationPortWithChecksumUpdate(p uint16) {
	old := b.DestinationPort()
	b.SetDestinationPort(p)
	b.updateChecksum16(old, p)
}

// UpdatePseudoHeaderAddress4 updates the checksum for an IPv4 address in
// the pseudo-header changing from old to new.
func (b UDP) UpdatePseudoHeaderAddress4(old, new [4]byte) {
	if c := b.Checksum(); c != 0 {
		b.SetChecksum(udpChecksumFix(ChecksumUpdate32(c,
			binary.BigEndian.Uint32(old[:]), binary.BigEndian.Uint32(new[:]))))
	}
}

// UpdatePseudoHeaderAddress6 updates the checksum for an IPv6 address in
// the pseudo-header changing from old to new. Call it before overwriting
// the address if old points into the packet.
func (b UDP) UpdatePseudoHeaderAddress6(old, new *[16]byte) {
	if c := b.Checksum(); c != 0 {
		b.SetChecksum(udpChecksumFix(ChecksumUpdate128(c, old, new)))
	}
}

func (b UDP) updateChecksum16(old, new uint16) {
	if c := b.Checksum(); c != 0 {
		b.SetChecksum(udpChecksumFix(ChecksumUpdate16(c, old, new)))
	}
}
