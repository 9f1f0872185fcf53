package dataplane

import (
	"github.com/vipd/vipd/nat"
	"github.com/vipd/vipd/packet"
)

// natReply6 is natReply4 for IPv6. The steering rule reads no extension
// header but a Fragment header directly after the fixed header, so a
// packet carrying any other is no reply (it is the kernel's).
func (w *Worker) natReply6(d *Desc, frame []byte, f *packet.Frame) bool {
	s := w.snap
	ip := f.IPv6(frame)
	src := ip.SourceAddress()
	fragFirst := f.FragHdrOff == f.L3Off+packet.IPv6Size
	vi, ref := int32(-1), int32(-1)
	var cport uint16 // the client's port (TCP and UDP)
	switch {
	case f.Frag && !f.FirstFrag:
		if !fragFirst {
			return false
		}
		vi = s.cls6.replyAddr6.get(mkKey6(src, f.Proto, 0))
	case f.Proto == packet.ProtoICMPv6:
		if f.L4Off != f.L3Off+packet.IPv6Size {
			return false
		}
		return w.natReplyICMP6(d, frame, f)
	default:
		if f.L4Off != f.L3Off+packet.IPv6Size && !(fragFirst && f.L4Off == f.FragHdrOff+packet.IPv6FragmentSize) {
			return false
		}
		sp, dp, ok := ports(frame, f)
		if !ok {
			return false
		}
		if ref = s.cls6.reply6.get(mkKey6(src, f.Proto, sp)); ref < 0 {
			ref = s.cls6.reply6.get(mkKey6(src, f.Proto, 0))
		}
		if ref >= 0 {
			vi, cport = s.backends[ref].vip, dp
		}
	}
	if vi == empty || s.isLocal6(ip.DestinationAddress()) {
		return false
	}
	if vi == ambiguous {
		w.drop(d, DropFragAmbiguous)
		return true
	}
	v := &s.vips[vi]
	if ip.HopLimit() <= 1 {
		w.drop(d, DropTTLExceeded)
		return true
	}
	mac, ok := s.clientMAC6(ip.DestinationAddress(), w.neigh)
	if !ok {
		w.drop(d, DropNoNeighbor)
		return true
	}
	e := readL2(frame, f)
	if mtu := s.mtu[PortIngress]; f.L3Len > mtu {
		var own [16]byte
		if s.has6[d.RxPort] {
			own = s.addr6[d.RxPort]
		} else {
			own = *ip.DestinationAddress()
		}
		w.tooBig6(d, f, &e, mtu, &own)
		return true
	}
	w.sampleL4(frame, f)
	if w.fast6 {
		w.offerReply6(d, frame, f, v, uint32(ref), mac) // before the frame is translated
	}
	nat.SNAT6(ip, l4Of(frame, f), &v.addr6, v.port)
	ip.DecHopLimit()
	setMACs(frame, mac, s.mac[PortIngress])
	d.Len = f.L3Off + f.L3Len
	w.c.Replies++
	w.countReply(v, ref, f.L3Len)
	if ref >= 0 && isSynAck(frame, f) {
		w.handshakeAnswered(watchKey(ip.DestinationAddress(), cport, v.id), v.id, uint32(ref))
	}
	w.tx(d, PortIngress)
	return true
}

// natReplyICMP6 is natReplyICMP4 for ICMPv6 directly after the fixed
// header.
func (w *Worker) natReplyICMP6(d *Desc, frame []byte, f *packet.Frame) bool {
	s := w.snap
	ip := f.IPv6(frame)
	key, kind := icmpReplyKey6(frame[f.L3Off:])
	if !s.isReply6(ip.DestinationAddress(), key, kind) {
		return false
	}
	ic := f.ICMPv6(frame)
	var q quoted
	if !parseQuote6(ic.Payload(), &q) || q.src != *ip.DestinationAddress() {
		w.drop(d, DropICMPUnmatched)
		return true
	}
	ref := s.cls6.reply6.get(mkKey6(&q.dst, q.proto, q.dport))
	if ref < 0 {
		ref = s.cls6.reply6.get(mkKey6(&q.dst, q.proto, 0))
	}
	if ref < 0 {
		w.drop(d, DropICMPUnmatched)
		return true
	}
	if !icmp6ChecksumOK(ip, ic) {
		w.drop(d, DropBadICMPChecksum)
		return true
	}
	w.replyErrorTo(d, frame, f, &q, s.backends[ref].vip, true)
	return true
}
