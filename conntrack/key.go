package conntrack

import (
	"net/netip"
	"unsafe"
)

// Key identifies one flow as the client sent it, scoped to the VIP it
// addressed. The pipeline fills it from the packet; conntrack compares it
// whole and never hashes it (the caller passes the flow hash alongside).
//
// The layout has no padding (24 bytes), so equality is a plain memory
// compare. Every field takes part in equality, including IPv6: an IPv4 key
// and an IPv6 key whose first four address bytes agree are different flows.
type Key struct {
	_       [0]uint64 // 8-byte alignment, for equal's word loads
	Src     [16]byte  // client address; IPv4 in the first 4 bytes, the rest zero
	SrcPort uint16    // client port (0 for ICMP and other portless protocols)
	DstPort uint16    // destination port as sent by the client (the VIP port)
	VIP     uint16    // stable VIP id assigned by the control plane (survives reloads)
	Proto   uint8     // IP protocol number; 6 (TCP) selects the TCP state machine
	IPv6    bool      // Src holds an IPv6 address
}

// SrcAddr returns the client address as a netip.Addr, for display and
// admin queries; the packet path compares raw bytes instead.
func (k *Key) SrcAddr() netip.Addr {
	if k.IPv6 {
		return netip.AddrFrom16(k.Src)
	}
	return netip.AddrFrom4([4]byte(k.Src[:4]))
}

// protoTCP is the IP protocol number of TCP (RFC 9293); every other protocol
// follows the datagram (UDP) states.
const protoTCP = 6

// equal is k == *o in three word compares rather than seven field ones:
// Key has no padding and is 8-byte aligned (TestKeyLayout), so its 24
// bytes are exactly three uint64s.
func (k *Key) equal(o *Key) bool {
	a, b := (*[3]uint64)(unsafe.Pointer(k)), (*[3]uint64)(unsafe.Pointer(o))
	return a[0] == b[0] && a[1] == b[1] && a[2] == b[2]
}
