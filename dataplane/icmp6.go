package dataplane

import (
	"github.com/vipd/vipd/conntrack"
	"github.com/vipd/vipd/dataplane/icmperr"
	"github.com/vipd/vipd/hashing"
	"github.com/vipd/vipd/packet"
)

// icmp6ChecksumOK reports whether an ICMPv6 message's checksum, which
// covers the pseudo-header of ip, is right.
func icmp6ChecksumOK(ip packet.IPv6, ic packet.ICMPv6) bool {
	return ic.IsChecksumValid(packet.PseudoHeaderSum6(ip.SourceAddress(), ip.DestinationAddress(), packet.ProtoICMPv6, uint32(len(ic))))
}

// ICMPv6 echo types (RFC 4443 §4).
const (
	icmp6EchoRequest = 128
	icmp6EchoReply   = 129
)

// icmpToVIP6 is icmpToVIP4 for ICMPv6. Neighbour discovery directly after
// the fixed header is the kernel's (vipd answers it for VIPs off the packet
// path); behind extension headers it is not NDP the steering rule
// recognises, and is dropped with the other types vipd does not handle.
func (w *Worker) icmpToVIP6(d *Desc, frame []byte, f *packet.Frame) {
	ic := f.ICMPv6(frame)
	switch t := ic.Type(); {
	case t >= packet.ICMPv6NDPFirst && t <= packet.ICMPv6NDPLast && f.L4Off == f.L3Off+packet.IPv6Size:
		w.kernel(d)
	case f.Frag:
		w.drop(d, DropICMPType)
	case t == icmp6EchoRequest && ic.Code() == 0:
		w.echo6(d, frame, f)
	case ic.IsFlowError():
		w.steer6(d, frame, f)
	default:
		w.drop(d, DropICMPType)
	}
}

// echo6 answers an echo request to a VIP in place. Swapping the addresses
// leaves the pseudo-header sum, and so the checksum, unchanged.
func (w *Worker) echo6(d *Desc, frame []byte, f *packet.Frame) {
	if !w.icmpAllowed(d, DropICMPRateLimited) {
		return
	}
	ip := f.IPv6(frame)
	src, dst := *ip.SourceAddress(), *ip.DestinationAddress()
	ip.SetSourceAddress(&dst)
	ip.SetDestinationAddress(&src)
	ip.SetHopLimit(icmperr.TTL)
	ic := f.ICMPv6(frame)
	ic.SetType(icmp6EchoReply)
	ic.SetChecksum(packet.ChecksumUpdate16(ic.Checksum(), icmp6EchoRequest<<8, icmp6EchoReply<<8))
	w.echoBack(d, frame, f)
}

func (w *Worker) steer6(d *Desc, frame []byte, f *packet.Frame) {
	s := w.snap
	ip := f.IPv6(frame)
	ic := f.ICMPv6(frame)
	var q quoted
	if !parseQuote6(ic.Payload(), &q) || q.src != *ip.DestinationAddress() {
		w.drop(d, DropICMPUnmatched)
		return
	}
	vi := s.cls6.exact6.get(mkKey6(&q.src, q.proto, q.sport))
	if vi < 0 {
		vi = s.cls6.exact6.get(mkKey6(&q.src, q.proto, 0))
	}
	if vi < 0 {
		w.drop(d, DropICMPUnmatched)
		return
	}
	v := &s.vips[vi]
	h := hashing.Flow6(&q.dst, &q.src, q.dport, q.sport, q.proto, s.seed)
	hp := h
	if v.srcHash {
		hp = hashing.Src6(&q.dst, s.seed)
	}
	if !icmp6ChecksumOK(ip, ic) {
		w.drop(d, DropBadICMPChecksum)
		return
	}
	k := conntrack.Key{Src: q.dst, SrcPort: q.dport, DstPort: q.sport, VIP: v.id, Proto: q.proto, IPv6: true}
	w.steerTo(d, frame, f, &q, &k, h, hp, vi)
}
