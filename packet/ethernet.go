package packet

import "encoding/binary"

// Ethernet II header (IEEE 802.3), optionally carrying one IEEE 802.1Q tag:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|               Destination MAC address, bytes 0-3              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Destination, bytes 4-5      |    Source MAC, bytes 0-1      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 Source MAC address, bytes 2-5                 |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   EtherType or TPID 0x8100    |  PCP|D|  VLAN ID (if tagged)  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   EtherType (if tagged)       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// The frame check sequence is not part of the view: NICs strip it.
const (
	ethDst     = 0
	ethSrc     = 6
	ethType    = 12
	ethVLANTCI = 14 // tagged frames only
	ethVLANTyp = 16 // tagged frames only

	// EthernetSize is the length of an untagged Ethernet header.
	EthernetSize = 14
	// VLANTagSize is the length of one 802.1Q tag.
	VLANTagSize = 4
)

// EtherType values (IEEE Registration Authority).
const (
	EtherTypeIPv4 uint16 = 0x0800
	EtherTypeARP  uint16 = 0x0806
	EtherTypeVLAN uint16 = 0x8100 // IEEE 802.1Q tag protocol identifier
	EtherTypeIPv6 uint16 = 0x86dd
)

// Ethernet is a view of a frame starting at its Ethernet header.
//
// Only one 802.1Q tag is understood. A second tag (QinQ, whether 0x88a8 or a
// repeated 0x8100) is reported as the EtherType, which is not IP, so such
// frames go to the kernel rather than being misparsed.
type Ethernet []byte

// IsValid reports whether e holds a whole header, including the 802.1Q tag
// when one is announced. The other methods may panic on an invalid view.
func (e Ethernet) IsValid() bool {
	if len(e) < EthernetSize {
		return false
	}
	return !e.HasVLAN() || len(e) >= EthernetSize+VLANTagSize
}

// Destination returns the destination MAC address.
func (e Ethernet) Destination() [6]byte { return [6]byte(e[ethDst : ethDst+6]) }

// Source returns the source MAC address.
func (e Ethernet) Source() [6]byte { return [6]byte(e[ethSrc : ethSrc+6]) }

// SetDestination sets the destination MAC address.
func (e Ethernet) SetDestination(a [6]byte) { copy(e[ethDst:ethDst+6], a[:]) }

// SetSource sets the source MAC address.
func (e Ethernet) SetSource(a [6]byte) { copy(e[ethSrc:ethSrc+6], a[:]) }

// HasVLAN reports whether the frame carries an 802.1Q tag.
func (e Ethernet) HasVLAN() bool {
	return binary.BigEndian.Uint16(e[ethType:]) == EtherTypeVLAN
}

// VLANTCI returns the tag control information (PCP, DEI, VLAN ID) of a
// tagged frame; call it only when HasVLAN.
func (e Ethernet) VLANTCI() uint16 { return binary.BigEndian.Uint16(e[ethVLANTCI:]) }

// VLANID returns the 12-bit VLAN identifier of a tagged frame; call it only
// when HasVLAN.
func (e Ethernet) VLANID() uint16 { return e.VLANTCI() & 0x0fff }

// EtherType returns the type of the payload, after the tag if there is one.
func (e Ethernet) EtherType() uint16 {
	if e.HasVLAN() {
		return binary.BigEndian.Uint16(e[ethVLANTyp:])
	}
	return binary.BigEndian.Uint16(e[ethType:])
}

// HeaderLength returns the length of the header in bytes: 14, or 18 when
// tagged. The network-layer header starts there.
func (e Ethernet) HeaderLength() int {
	if e.HasVLAN() {
		return EthernetSize + VLANTagSize
	}
	return EthernetSize
}

// Payload returns the bytes after the header, including any padding added
// to reach the minimum frame size.
func (e Ethernet) Payload() []byte { return e[e.HeaderLength():] }
