package decap

import (
	"net/netip"
	"sync/atomic"

	"github.com/vipd/vipd/packet"
)

// filter checks and strips packets and counts what it drops and repairs.
// It is built by New; the receive goroutines share it, and only the local
// address set changes afterwards (swapped whole, see localSet).
type filter struct {
	allowed    []netip.Prefix // empty: any outer source
	chainPeers []netip.Prefix // outer sources accepted for chained packets only
	checkLocal bool
	local      *localSet
	stats      *counters
}

func (f *filter) drop(r Reason) []byte {
	f.stats.dropped[r].Add(1)
	return nil
}

func (f *filter) sourceAllowed(a netip.Addr) bool {
	return len(f.allowed) == 0 || inPrefixes(f.allowed, a)
}

// chainPeer reports whether a is in the chain peers, the backends that
// may send chained packets (and nothing else).
func (f *filter) chainPeer(a netip.Addr) bool { return inPrefixes(f.chainPeers, a) }

// inPrefixes reports whether one of ps contains a.
func inPrefixes(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func (f *filter) destinationOK(a netip.Addr) bool {
	return !f.checkLocal || f.local.contains(a)
}

// strip4 checks pkt, one packet as the raw IPIP socket returns it — the
// outer IPv4 header first — and returns the inner IPv4 packet, a subslice
// of pkt, or nil when it drops the packet (counted by reason). The outer
// header checksum is not checked: the kernel dropped bad ones before the
// socket saw them. pkt may be modified (see completeChecksum).
func (f *filter) strip4(pkt []byte) []byte {
	outer := packet.IPv4(pkt)
	if outer.Validate() != nil {
		return f.drop(DropMalformed)
	}
	if outer.Protocol() != packet.ProtoIPIP {
		return f.drop(DropProtocol)
	}
	if !f.sourceAllowed(netip.AddrFrom4(outer.SourceAddress())) {
		return f.drop(DropSource)
	}
	// Total Length, not len(pkt), is the authority on where the packet
	// ends.
	inner := pkt[outer.HeaderLength():outer.TotalLength()]
	if len(inner) == 0 || inner[0]>>4 != 4 {
		return f.drop(DropInnerVersion)
	}
	return f.inner4(inner)
}

// inner4 checks inner, an inner packet whose version nibble is 4 and
// which ends exactly where its tunnel's payload ends, and returns it or
// nil when it drops it (counted by reason). inner may be modified (see
// completeChecksum). IPIP and GUE share it.
func (f *filter) inner4(inner []byte) []byte {
	in := packet.IPv4(inner)
	if in.Validate() != nil || int(in.TotalLength()) != len(inner) {
		return f.drop(DropInnerLength)
	}
	if !in.IsChecksumValid() {
		return f.drop(DropInnerChecksum)
	}
	if !f.destinationOK(netip.AddrFrom4(in.DestinationAddress())) {
		return f.drop(DropNotLocal)
	}
	if in.IsFragment() {
		return inner // the transport header is not (all) here
	}
	src, dst := in.SourceAddress(), in.DestinationAddress()
	l4 := inner[in.HeaderLength():]
	proto := in.Protocol()
	if len(l4) > 0xffff || !isTCPOrUDP(proto) {
		return inner
	}
	return f.completeChecksum(inner, l4, proto, packet.PseudoHeaderSum4(src, dst, proto, uint16(len(l4))))
}

// strip6 checks inner, the payload of an outer IPv6 header with next
// header 41 as the raw IPv6 socket returns it (the kernel has consumed the
// outer header and any extension headers), sent from src. It returns the
// inner IPv6 packet (inner itself) or nil when it drops the packet
// (counted by reason). inner may be modified (see completeChecksum).
func (f *filter) strip6(inner []byte, src netip.Addr) []byte {
	if !f.sourceAllowed(src) {
		return f.drop(DropSource)
	}
	if len(inner) == 0 || inner[0]>>4 != 6 {
		return f.drop(DropInnerVersion)
	}
	return f.inner6(inner)
}

// inner6 is inner4 for an inner packet whose version nibble is 6.
func (f *filter) inner6(inner []byte) []byte {
	in := packet.IPv6(inner)
	// Jumbograms (Payload Length 0) cannot come through a tunnel whose
	// outer packet is at most 64 KiB, so a zero is taken literally.
	if in.Validate() != nil || packet.IPv6Size+int(in.PayloadLength()) != len(inner) {
		return f.drop(DropInnerLength)
	}
	if !f.destinationOK(netip.AddrFrom16(*in.DestinationAddress())) {
		return f.drop(DropNotLocal)
	}
	// GRO merges only segments whose transport header follows the fixed
	// header directly; with extension headers the packet passes as is.
	proto := in.NextHeader()
	if !isTCPOrUDP(proto) {
		return inner
	}
	l4 := inner[packet.IPv6Size:]
	return f.completeChecksum(inner, l4, proto,
		packet.PseudoHeaderSum6(in.SourceAddress(), in.DestinationAddress(), proto, uint32(len(l4))))
}

func isTCPOrUDP(proto uint8) bool { return proto == packet.ProtoTCP || proto == packet.ProtoUDP }

// completeChecksum repairs what receive offload did to inner, whose
// transport header and data are l4 (protocol proto, pseudo-header sum
// pseudo), and returns inner, or nil when it must drop it.
//
// When the NIC (or veth) merges consecutive segments of a tunnelled flow
// (GRO understands IPIP and IPv6-in-IPv6 even without the tunnel modules),
// the raw socket receives the merged packet as the kernel holds it: the
// inner lengths are fixed up, but the TCP or UDP checksum field holds only
// the folded pseudo-header sum — "partial", meant to be finished by
// hardware or by the stack that knows it. Written to the TUN as is, such a
// packet fails the checksum check and is lost. The test: the field equals
// the pseudo-header sum.
//
// TCP: finishing the checksum is all it takes — a merged segment is a
// valid, larger segment. A sender's valid checksum can equal the
// pseudo-header sum by chance (one in 65536 segments: over a few
// thousand, likely); the finished value is then the field itself, since a
// correct checksum is the only value that makes the sum come out right,
// and such a segment is not counted in Completed.
//
// UDP: merged datagrams (the backend's socket asked for UDP_GRO, as QUIC
// servers do) cannot be split again without the segment size the kernel
// kept beside the packet, which a raw socket does not return. They are
// dropped as DropMergedUDP. A datagram whose valid checksum equals the
// pseudo-header sum by chance is told apart by verifying the whole sum.
func (f *filter) completeChecksum(inner, l4 []byte, proto uint8, pseudo uint16) []byte {
	if proto == packet.ProtoTCP {
		if len(l4) < packet.TCPMinSize || packet.TCP(l4).Checksum() != pseudo {
			return inner
		}
		// With the field holding the pseudo-header sum, the sum over the
		// segment is the full sum; its complement is the checksum.
		if c := ^packet.Sum(l4, 0); c != pseudo {
			packet.TCP(l4).SetChecksum(c)
			f.stats.completed.Add(1)
		}
		return inner
	}
	if len(l4) < packet.UDPSize || packet.UDP(l4).Checksum() != pseudo {
		return inner
	}
	if packet.UDP(l4).IsChecksumValid(pseudo) {
		return inner // a valid checksum that happens to equal the sum
	}
	return f.drop(DropMergedUDP)
}

// localSet is the set of the host's addresses, replaced whole on every
// refresh so that readers never lock.
type localSet struct {
	addrs atomic.Pointer[map[netip.Addr]struct{}]
}

// contains reports whether a is a local address. It does not allocate: a
// netip.Addr is a comparable value, hashed in place.
func (l *localSet) contains(a netip.Addr) bool {
	m := l.addrs.Load()
	if m == nil {
		return false
	}
	_, ok := (*m)[a]
	return ok
}

func (l *localSet) store(addrs []netip.Addr) {
	m := make(map[netip.Addr]struct{}, len(addrs))
	for _, a := range addrs {
		m[a] = struct{}{}
	}
	l.addrs.Store(&m)
}
