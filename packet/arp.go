package packet

import "encoding/binary"

// ARP packet (RFC 826) for Ethernet hardware and IPv4 protocol addresses,
// the only kind this package understands:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Hardware type (1)           |   Protocol type (0x0800)      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| HW len (6)    | Proto len (4) |          Operation            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          Sender hardware address (6 bytes) ...                |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  ...                          | Sender protocol address ...   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  ... (4 bytes)                | Target hardware address ...   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  ... (6 bytes)                                                |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          Target protocol address (4 bytes)                    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
const (
	arpHType = 0
	arpPType = 2
	arpHLen  = 4
	arpPLen  = 5
	arpOp    = 6
	arpSHA   = 8
	arpSPA   = 14
	arpTHA   = 18
	arpTPA   = 24

	// ARPSize is the length of an Ethernet/IPv4 ARP packet.
	ARPSize = 28
)

// ARP operations (RFC 826).
const (
	ARPRequest uint16 = 1
	ARPReply   uint16 = 2
)

// ARP is a view of an ARP packet (the Ethernet payload).
type ARP []byte

// IsValid reports whether a holds a whole ARP packet for Ethernet (hardware
// type 1, 6-byte addresses) and IPv4 (protocol type 0x0800, 4-byte
// addresses). Parse does not check ARP: call IsValid before the accessors.
func (a ARP) IsValid() bool {
	return len(a) >= ARPSize &&
		binary.BigEndian.Uint16(a[arpHType:]) == 1 &&
		binary.BigEndian.Uint16(a[arpPType:]) == EtherTypeIPv4 &&
		a[arpHLen] == 6 && a[arpPLen] == 4
}

// Op returns the operation (ARPRequest, ARPReply, ...).
func (a ARP) Op() uint16 { return binary.BigEndian.Uint16(a[arpOp:]) }

// SetOp sets the operation.
func (a ARP) SetOp(op uint16) { binary.BigEndian.PutUint16(a[arpOp:], op) }

// SenderHardwareAddress returns the sender's MAC address.
func (a ARP) SenderHardwareAddress() [6]byte { return [6]byte(a[arpSHA : arpSHA+6]) }

// SenderProtocolAddress returns the sender's IPv4 address.
func (a ARP) SenderProtocolAddress() [4]byte { return [4]byte(a[arpSPA : arpSPA+4]) }

// TargetHardwareAddress returns the target's MAC address (zero in requests).
func (a ARP) TargetHardwareAddress() [6]byte { return [6]byte(a[arpTHA : arpTHA+6]) }

// TargetProtocolAddress returns the target's IPv4 address.
func (a ARP) TargetProtocolAddress() [4]byte { return [4]byte(a[arpTPA : arpTPA+4]) }

// SetSenderHardwareAddress sets the sender's MAC address.
func (a ARP) SetSenderHardwareAddress(m [6]byte) { copy(a[arpSHA:arpSHA+6], m[:]) }

// SetSenderProtocolAddress sets the sender's IPv4 address.
func (a ARP) SetSenderProtocolAddress(ip [4]byte) { copy(a[arpSPA:arpSPA+4], ip[:]) }

// SetTargetHardwareAddress sets the target's MAC address.
func (a ARP) SetTargetHardwareAddress(m [6]byte) { copy(a[arpTHA:arpTHA+6], m[:]) }

// SetTargetProtocolAddress sets the target's IPv4 address.
func (a ARP) SetTargetProtocolAddress(ip [4]byte) { copy(a[arpTPA:arpTPA+4], ip[:]) }
