package dsr

import (
	"encoding/binary"

	"github.com/vipd/vipd/packet"
)

// Overheads of the outer headers, in bytes.
const (
	Overhead4    = packet.IPv4MinSize                  // IPv4 in IPv4 (RFC 2003 §3.1)
	Overhead6    = packet.IPv6Size                     // IPv6 in IPv6 (RFC 2473 §3)
	OverheadGUE4 = packet.IPv4MinSize + packet.UDPSize // IPv4 in GUE over IPv4
	OverheadGUE6 = packet.IPv6Size + packet.UDPSize    // IPv6 in GUE over IPv6
)

// DefaultGUEPort is the UDP port GUE is sent to unless configured: the
// one Katran uses.
const DefaultGUEPort = 6080

// SourcePort is the UDP source port of the GUE packets of a flow whose
// hash is h: a port of the dynamic range (RFC 6335, 49152-65535) chosen by
// h's low 14 bits, so that a backend's NIC, hashing the outer ports,
// spreads flows over its receive queues and keeps each flow on one. (The
// low bits: Maglev picks the backend by the high ones.)
func SourcePort(h uint64) uint16 { return 49152 | uint16(h)&0x3fff }

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
	return outer4(buf, at-Overhead4, at, n+Overhead4, packet.ProtoIPIP, src, dst)
}

// outer4 writes an outer IPv4 header at buf[o:]: TOS that of the inner
// IPv4 packet at buf[at:], total length total, DF, TTL OuterTTL, protocol
// proto. It returns o. (Encap4 is a call of it small enough to inline.)
//
// The header checksum is summed from the fields' values, not read back
// from the header just written: the outer header goes into the frame's
// headroom, a cache line that nothing has touched since the frame's last
// use and is seldom cached on a driver's frame, and a read of it would wait
// for that line where the writes alone need not (measured on the bench's
// rig: the read-back was 40% of vipd's user time with DSR). It is also
// what packet.IPv4.ComputeChecksum would give (TestOuter4Checksum).
func outer4(buf []byte, o, at, total int, proto uint8, src, dst [4]byte) int {
	tos := buf[at+1]
	h := (*[packet.IPv4MinSize]byte)(buf[o:])
	s, d := binary.BigEndian.Uint32(src[:]), binary.BigEndian.Uint32(dst[:])
	w0 := 0x4500 | uint32(tos)                // version 4, IHL 5, TOS
	w4 := uint32(OuterTTL)<<8 | uint32(proto) // TTL, protocol
	sum := Outer4Sum(proto, src, dst) + uint32(tos) + uint32(uint16(total))
	binary.BigEndian.PutUint16(h[0:], uint16(w0))
	binary.BigEndian.PutUint16(h[2:], uint16(total))
	binary.BigEndian.PutUint32(h[4:], outerDF)
	binary.BigEndian.PutUint16(h[8:], uint16(w4))
	// The checksum field holds 0xffff (a sum of nothing) plus the words.
	binary.BigEndian.PutUint16(h[10:], packet.ChecksumAdd(0xffff, sum))
	binary.BigEndian.PutUint32(h[12:], s)
	binary.BigEndian.PutUint32(h[16:], d)
	return o
}

// outerDF is the outer header's second word: identification 0, DF, no
// offset.
const outerDF = 0x4000

// Outer4Sum is what outer4 sums into an outer IPv4 header's checksum
// before the inner TOS and the total length, which vary per packet: the
// words of version and IHL, DF, TTL and protocol, and the addresses. The
// header checksum is then ^fold(Outer4Sum + TOS + total length), for a
// fast path that writes outer headers itself (package xdpprog).
func Outer4Sum(proto uint8, src, dst [4]byte) uint32 {
	s, d := binary.BigEndian.Uint32(src[:]), binary.BigEndian.Uint32(dst[:])
	return 0x4500 + outerDF + (uint32(OuterTTL)<<8 | uint32(proto)) + s>>16 + s&0xffff + d>>16 + d&0xffff
}

// GUE4 wraps the IPv4 packet buf[at:at+n] untouched in GUE variant 1
// (draft-ietf-intarea-gue §4: the IP packet directly after the UDP header,
// its version nibble telling it from a GUE header) over IPv4, written into
// the OverheadGUE4 bytes before it, and returns the offset of the outer
// header: an outer IPv4 header as Encap4 writes it but of protocol UDP,
// then UDP from sport to dport with no checksum (0, which RFC 768 allows
// over IPv4; the inner packet carries its own). The caller guarantees at >=
// OverheadGUE4 and that the result fits the egress MTU.
func GUE4(buf []byte, at, n int, src, dst [4]byte, sport, dport uint16) int {
	return gue4(buf, at, at, n, src, dst, sport, dport)
}

// gue4 is GUE4 for a UDP payload buf[at:at+n] that starts with (at == in)
// or leads to (GUEHint4) the IP packet at buf[in:], whose TOS it copies.
func gue4(buf []byte, in, at, n int, src, dst [4]byte, sport, dport uint16) int {
	o := outer4(buf, at-OverheadGUE4, in, n+OverheadGUE4, packet.ProtoUDP, src, dst)
	u := buf[o+packet.IPv4MinSize : at]
	binary.BigEndian.PutUint16(u[0:], sport)
	binary.BigEndian.PutUint16(u[2:], dport)
	binary.BigEndian.PutUint16(u[4:], uint16(n+packet.UDPSize))
	binary.BigEndian.PutUint16(u[6:], 0)
	return o
}

// GUE6 is GUE4 for IPv6 in IPv6: the outer header as Encap6 writes it but
// with next header UDP, and a UDP checksum over the whole datagram, which
// IPv6 requires (RFC 8200 §8.1; receivers accept a zero one only where
// configured for it, RFC 6936).
func GUE6(buf []byte, at, n int, src, dst *[16]byte, flowLabel uint32, sport, dport uint16) int {
	return gue6(buf, at, at, n, src, dst, flowLabel, sport, dport)
}

// gue6 is GUE6 as gue4 is GUE4.
func gue6(buf []byte, in, at, n int, src, dst *[16]byte, flowLabel uint32, sport, dport uint16) int {
	o := outer6(buf, at-OverheadGUE6, in, n+packet.UDPSize, packet.ProtoUDP, src, dst, flowLabel)
	u := buf[o+packet.IPv6Size : at+n]
	binary.BigEndian.PutUint16(u[0:], sport)
	binary.BigEndian.PutUint16(u[2:], dport)
	binary.BigEndian.PutUint16(u[4:], uint16(n+packet.UDPSize))
	binary.BigEndian.PutUint16(u[6:], 0)
	c := packet.Checksum(u, packet.PseudoHeaderSum6(src, dst, packet.ProtoUDP, uint32(len(u))))
	if c == 0 {
		c = 0xffff // RFC 8200 §8.1: a computed 0 is sent as all ones
	}
	binary.BigEndian.PutUint16(u[6:], c)
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
	return outer6(buf, at-Overhead6, at, n, packet.ProtoIPv6, src, dst, flowLabel)
}

// outer6 writes an outer IPv6 header at buf[o:] for a payload of n bytes
// of protocol next, the traffic class copied from the inner IPv6 packet at
// buf[at:]. It returns o. (Encap6 is a call of it small enough to inline.)
func outer6(buf []byte, o, at, n int, next uint8, src, dst *[16]byte, flowLabel uint32) int {
	h := buf[o : o+packet.IPv6Size]
	tc := uint32(binary.BigEndian.Uint32(buf[at:])>>20) & 0xff
	binary.BigEndian.PutUint32(h[0:], 6<<28|tc<<20|flowLabel&0xfffff)
	binary.BigEndian.PutUint16(h[4:], uint16(n))
	h[6] = next
	h[7] = OuterTTL
	copy(h[8:24], src[:])
	copy(h[24:40], dst[:])
	return o
}
