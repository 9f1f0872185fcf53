package packet

import "encoding/binary"

// TCP header (RFC 9293 §3.1):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          Source Port          |       Destination Port        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                        Sequence Number                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Acknowledgment Number                      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Data |       |C|E|U|A|P|R|S|F|                               |
//	| Offset| Rsrvd |W|C|R|C|S|S|Y|I|            Window             |
//	|       |       |R|E|G|K|H|T|N|N|                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|           Checksum            |         Urgent Pointer        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                           [Options]                           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Data Offset counts 32-bit words (5..15). The checksum covers a
// pseudo-header (PseudoHeaderSum4, PseudoHeaderSum6), the header and the
// data.
const (
	tcpSrcPort  = 0
	tcpDstPort  = 2
	tcpSeq      = 4
	tcpAck      = 8
	tcpDataOff  = 12
	tcpFlags    = 13
	tcpWindow   = 14
	tcpChecksum = 16
	tcpUrgent   = 18
	tcpOptions  = 20

	// TCPMinSize is the length of a header without options.
	TCPMinSize = 20
)

// TCP flag bits, as in the byte returned by TCP.Flags.
const (
	TCPFlagFIN uint8 = 1 << iota
	TCPFlagSYN
	TCPFlagRST
	TCPFlagPSH
	TCPFlagACK
	TCPFlagURG
	TCPFlagECE
	TCPFlagCWR
)

// TCP is a view of a TCP segment: header and data, cut at the end of the IP
// payload (Frame.TCP does this).
type TCP []byte

// Validate checks a whole fixed header and a Data Offset in 20..len(b).
func (b TCP) Validate() error {
	if len(b) < TCPMinSize {
		return ErrTruncated
	}
	if do := b.DataOffset(); do < TCPMinSize || do > len(b) {
		return ErrBadTCPOffset
	}
	return nil
}

// IsValid reports whether Validate accepts b.
func (b TCP) IsValid() bool { return b.Validate() == nil }

// SourcePort returns the source port.
func (b TCP) SourcePort() uint16 { return binary.BigEndian.Uint16(b[tcpSrcPort:]) }

// DestinationPort returns the destination port.
func (b TCP) DestinationPort() uint16 { return binary.BigEndian.Uint16(b[tcpDstPort:]) }

// SetSourcePort sets the source port; the checksum is not updated.
func (b TCP) SetSourcePort(p uint16) { binary.BigEndian.PutUint16(b[tcpSrcPort:], p) }

// SetDestinationPort sets the destination port; the checksum is not updated.
func (b TCP) SetDestinationPort(p uint16) { binary.BigEndian.PutUint16(b[tcpDstPort:], p) }

// SequenceNumber returns the sequence number.
func (b TCP) SequenceNumber() uint32 { return binary.BigEndian.Uint32(b[tcpSeq:]) }

// SetSequenceNumber sets the sequence number; the checksum is not updated.
func (b TCP) SetSequenceNumber(v uint32) { binary.BigEndian.PutUint32(b[tcpSeq:], v) }

// AckNumber returns the acknowledgment number.
func (b TCP) AckNumber() uint32 { return binary.BigEndian.Uint32(b[tcpAck:]) }

// SetAckNumber sets the acknowledgment number; the checksum is not updated.
func (b TCP) SetAckNumber(v uint32) { binary.BigEndian.PutUint32(b[tcpAck:], v) }

// DataOffset returns the header length in bytes (Data Offset × 4).
func (b TCP) DataOffset() int { return int(b[tcpDataOff]>>4) * 4 }

// Flags returns the flag byte (TCPFlagFIN ... TCPFlagCWR).
func (b TCP) Flags() uint8 { return b[tcpFlags] }

// SetFlags sets the flag byte; the checksum is not updated.
func (b TCP) SetFlags(v uint8) { b[tcpFlags] = v }

// WindowSize returns the (unscaled) window.
func (b TCP) WindowSize() uint16 { return binary.BigEndian.Uint16(b[tcpWindow:]) }

// Checksum returns the checksum field.
func (b TCP) Checksum() uint16 { return binary.BigEndian.Uint16(b[tcpChecksum:]) }

// SetChecksum sets the checksum field.
func (b TCP) SetChecksum(v uint16) { binary.BigEndian.PutUint16(b[tcpChecksum:], v) }

// UrgentPointer returns the urgent pointer.
func (b TCP) UrgentPointer() uint16 { return binary.BigEndian.Uint16(b[tcpUrgent:]) }

// Options returns the options after the fixed header.
func (b TCP) Options() []byte { return b[tcpOptions:b.DataOffset()] }

// Payload returns the data after the header.
func (b TCP) Payload() []byte { return b[b.DataOffset():] }

// ComputeChecksum returns the checksum b should carry, given the sum of its
// pseudo-header (whose length is len(b)), as if the field were zero.
func (b TCP) ComputeChecksum(pseudo uint16) uint16 {
	s := Sum(b[:tcpChecksum], pseudo)
	return Checksum(b[tcpChecksum+2:], s)
}

// IsChecksumValid reports whether the checksum is right for the given
// pseudo-header sum.
func (b TCP) IsChecksumValid(pseudo uint16) bool { return Sum(b, pseudo) == 0xffff }

// SetSourcePortWithChecksumUpdate sets the source port and updates the
// checksum incrementally (RFC 1624).
func (b TCP) SetSourcePortWithChecksumUpdate(p uint16) {
	old := b.SourcePort()
	b.SetSourcePort(p)
	b.SetChecksum(ChecksumUpdate16(b.Checksum(), old, p))
}

// SetDestinationPortWithChecksumUpdate sets the destination port and
// updates the checksum incrementally (RFC 1624).
func (b TCP) SetDestinationPortWithChecksumUpdate(p uint16) {
	old := b.DestinationPort()
	b.SetDestinationPort(p)
	b.SetChecksum(ChecksumUpdate16(b.Checksum(), old, p))
}

// UpdatePseudoHeaderAddress4 updates the checksum for an IPv4 address in
// the pseudo-header changing from old to new (NAT of the IP header).
func (b TCP) UpdatePseudoHeaderAddress4(old, new [4]byte) {
	b.SetChecksum(ChecksumUpdate32(b.Checksum(),
		binary.BigEndian.Uint32(old[:]), binary.BigEndian.Uint32(new[:])))
}

// UpdatePseudoHeaderAddress6 updates the checksum for an IPv6 address in
// the pseudo-header changing from old to new. Call it before overwriting
// the address if old points into the packet.
func (b TCP) UpdatePseudoHeaderAddress6(old, new *[16]byte) {
	b.SetChecksum(ChecksumUpdate128(b.Checksum(), old, new))
}
