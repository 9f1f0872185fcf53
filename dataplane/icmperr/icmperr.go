package icmperr

import (
	"encoding/binary"

	"github.com/vipd/vipd/packet"
)

// Sizes of ICMP errors vipd builds. An ICMPv4 error quotes as much of the
// offending datagram as fits in 576 bytes, the size every IPv4 host accepts
// (RFC 1812 §4.3.2.3); an ICMPv6 error as much as fits in the IPv6 minimum
// MTU of 1280 (RFC 4443 §2.4(c)).
const (
	maxICMPv4Error = 576
	maxICMPv6Error = 1280

	// Headroom4 and Headroom6 are the bytes FragNeeded4 and PacketTooBig6
	// write before the offending packet.
	Headroom4 = packet.IPv4MinSize + packet.ICMPSize
	Headroom6 = packet.IPv6Size + packet.ICMPSize
)

// TTL is the TTL (hop limit) of the messages vipd originates: ICMP errors
// and echo replies.
const TTL = 64

// ICMP types and codes used here.
const (
	icmpv4DestUnreach  = 3
	icmpv4FragNeeded   = 4 // code of type 3 (RFC 1191)
	icmpv6PacketTooBig = 2
)

// FragNeeded4 turns the IPv4 packet buf[at:at+n] into an ICMP
// destination-unreachable / fragmentation-needed message (RFC 792, RFC 1191
// §4) from src back to the packet's sender, advertising mtu. For a packet to
// a VIP, src is the VIP.
// The reply is built in the Headroom4 bytes before the packet, quoting the
// packet's start, so nothing is copied; it returns the reply's offset and
// length. The caller guarantees at >= Headroom4.
func FragNeeded4(buf []byte, at, n int, mtu uint16, src [4]byte) (int, int) {
	orig := packet.IPv4(buf[at : at+n])
	sender := orig.SourceAddress()
	q := min(n, maxICMPv4Error-Headroom4)
	o := at - Headroom4
	total := Headroom4 + q

	ic := packet.ICMPv4(buf[o+packet.IPv4MinSize : o+total])
	ic.SetType(icmpv4DestUnreach)
	ic.SetCode(icmpv4FragNeeded)
	binary.BigEndian.PutUint16(ic[4:], 0) // unused
	ic.SetMTU(mtu)
	ic.SetChecksum(0)
	ic.SetChecksum(ic.ComputeChecksum())

	writeReplyIPv4(buf[o:o+packet.IPv4MinSize], total, packet.ProtoICMPv4, src, sender)
	return o, total
}

// writeReplyIPv4 writes a 20-byte IPv4 header for a message vipd originates.
// TOS 0xc0 (precedence "internetwork control") is what routers put on ICMP
// errors (RFC 1812 §4.3.2.5).
func writeReplyIPv4(h packet.IPv4, total int, proto uint8, src, dst [4]byte) {
	h[0] = 0x45
	h[1] = 0xc0
	binary.BigEndian.PutUint16(h[2:], uint16(total))
	// ID 0 with DF set: an atomic datagram (RFC 6864 §4.1), which may
	// repeat its ID; under 576 bytes it is never fragmented anyway.
	binary.BigEndian.PutUint16(h[4:], 0)
	binary.BigEndian.PutUint16(h[6:], 0x4000)
	h[8] = TTL
	h[9] = proto
	h.SetSourceAddress(src)
	h.SetDestinationAddress(dst)
	h.SetChecksum(0)
	h.SetChecksum(h.ComputeChecksum())
}

// PacketTooBig6 is FragNeeded4 for IPv6: an ICMPv6 Packet Too Big message
// (RFC 4443 §3.2) from src to the packet's sender, advertising mtu, built in
// the Headroom6 bytes before the packet.
func PacketTooBig6(buf []byte, at, n int, mtu uint32, src *[16]byte) (int, int) {
	orig := packet.IPv6(buf[at : at+n])
	client, vip := *orig.SourceAddress(), *src
	q := min(n, maxICMPv6Error-Headroom6)
	o := at - Headroom6
	plen := packet.ICMPSize + q

	ic := packet.ICMPv6(buf[o+packet.IPv6Size : o+packet.IPv6Size+plen])
	ic.SetType(icmpv6PacketTooBig)
	ic.SetCode(0)
	ic.SetMTU(mtu)
	ic.SetChecksum(0)
	ic.SetChecksum(ic.ComputeChecksum(packet.PseudoHeaderSum6(&vip, &client, packet.ProtoICMPv6, uint32(plen))))

	h := buf[o : o+packet.IPv6Size]
	binary.BigEndian.PutUint32(h[0:], 6<<28)
	binary.BigEndian.PutUint16(h[4:], uint16(plen))
	h[6] = packet.ProtoICMPv6
	h[7] = TTL
	copy(h[8:24], vip[:])
	copy(h[24:40], client[:])
	return o, packet.IPv6Size + plen
}
