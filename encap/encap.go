package encap

import (
	"encoding/binary"

	"github.com/vipd/vipd/packet"
)

// Overheads of the outer headers, in bytes.
const (
	Overhead4 = packet.IPv4MinSize // IPv4 in IPv4 (RFC 2003 §3.1)
	Overhead6 = packet.IPv6Size    // IPv6 in IPv6 (RFC 2473 §3)
)

// OuterTTL is the TTL (hop limit) of outer headers: the tunnel is a fresh
// path from vipd to the backend, and the inner TTL is left untouched.
const OuterTTL = 64

// Encap4 wraps the IPv4 packet buf[at:at+n] untouched in an outer IPv4
// header (protocol 4) written into the Overhead4 bytes before it, and
// returns the offset of the outer header. The caller guarantees at >=
// Overhead4 and that the result fits the egress MTU.
//
// The outer header copies the inner TOS (DSCP and ECN, RFC 6040 normal
// mode), sets DF — the MTU check has already been made, and a backend must
// not receive outer fragments — and identification 0, which RFC 6864 §4.1
// allows for atomic datagrams.
func Encap4(buf []byte, at, n int, src, dst [4]byte) int {
	o := at - Overhead4
	h := packet.IPv4(buf[o:at])
	h[0] = 0x45 // version 4, IHL 5
	h[1] = buf[at+1]
	binary.BigEndian.PutUint16(h[2:], uint16(n+Overhead4))
	binary.BigEndian.PutUint32(h[4:], 0x4000) // ID 0, DF, offset 0
	h[8] = OuterTTL
	h[9] = packet.ProtoIPIP
	h.SetSourceAddress(src)
	h.SetDestinationAddress(dst)
	h.SetChecksum(0)
	h.SetChecksum(h.ComputeChecksum())
	return o
}

// Encap6 wraps the IPv6 packet buf[at:at+n] in an outer IPv6 header (next
// header 41) in the Overhead6 bytes before it and returns the offset of the
// outer header. The traffic class is copied from the inner packet; the flow
// label is the low 20 bits of flowLabel, which the caller chooses: the
// pipeline derives it from a hash of the client's address and the backend,
// so that a backend's NIC can spread tunnels over its receive queues (RFC
// 6438) while each client's packets stay in order on one.
func Encap6(buf []byte, at, n int, src, dst *[16]byte, flowLabel uint32) int {
	o := at - Overhead6
	h := buf[o:at]
	tc := uint32(binary.BigEndian.Uint32(buf[at:])>>20) & 0xff
	binary.BigEndian.PutUint32(h[0:], 6<<28|tc<<20|flowLabel&0xfffff)
	binary.BigEndian.PutUint16(h[4:], uint16(n))
	h[6] = packet.ProtoIPv6
	h[7] = OuterTTL
	copy(h[8:24], src[:])
	copy(h[24:40], dst[:])
	return o
}
