package dataplane

import (
	"encoding/binary"

	"github.com/vipd/vipd/conntrack"
	"github.com/vipd/vipd/dsr"
	"github.com/vipd/vipd/hashing"
	"github.com/vipd/vipd/icmperr"
	"github.com/vipd/vipd/nat"
	"github.com/vipd/vipd/packet"
)

// classify6 is classify4 for IPv6. IPv4-mapped addresses are not
// classified: ip hands them to the kernel.
func (w *Worker) classify6(frame []byte, p *pkt) {
	s := w.snap
	f := &p.f
	ip := packet.IPv6(p.l3)
	_ = ip[packet.IPv6Size-1] // Parse checked it; one bounds check for what follows
	src, dst := ip.SourceAddress(), ip.DestinationAddress()
	if mapped(dst[:]) || mapped(src[:]) {
		p.is = isMapped
		return
	}
	var sp, dp uint16
	var ok bool
	if f.Frag && !f.FirstFrag {
		if isTCPUDP(f.Proto) {
			p.vi = s.cls6.addr6.get(mkKey6(dst, f.Proto, 0))
		}
	} else if sp, dp, ok = ports(frame, f); ok {
		if p.vi = s.cls6.exact6.get(mkKey6(dst, f.Proto, dp)); p.vi < 0 {
			p.vi = s.cls6.exact6.get(mkKey6(dst, f.Proto, 0))
		}
	}
	if p.vi < 0 {
		if p.vi == empty && s.cls6.addr6.get(mkKey6(dst, 0, 0)) >= 0 {
			p.is = isDstVIP
		}
		return
	}
	if s.cls6.addr6.get(mkKey6(src, 0, 0)) >= 0 {
		p.is = isSrcVIP
	}
	v := &s.vips[p.vi]
	if f.Frag {
		p.hp = hashing.Frag6(src, dst, f.Proto, s.seed)
		if v.srcHash {
			p.hp = hashing.Src6(src, s.seed)
		}
		return
	}
	p.is |= isTracked
	// Field by field: a literal would be built on the stack and
	// copied (see Desc.Set).
	k := &p.key
	k.Src, k.SrcPort, k.DstPort, k.VIP, k.Proto, k.IPv6 = *src, sp, dp, v.id, f.Proto, true
	// A packet of the IPv6 flow hashed last takes its hashes, location
	// and serial, as flow4 does (the VIP id fixes the destination).
	m := &w.memo6
	tag := uint64(sp) | uint64(dp)<<16 | uint64(v.id)<<32 | uint64(f.Proto)<<48
	if tag == m.tag && *src == m.src {
		p.h, p.hp, p.loc, p.serial = m.h, m.hp, m.loc, m.serial
		return
	}
	p.h = hashing.Flow6(src, dst, sp, dp, f.Proto, s.seed)
	p.hp = p.h
	if v.srcHash {
		p.hp = hashing.Src6(src, s.seed)
	}
	p.loc = w.ct.Locate(p.h)
	w.serials++
	m.src, m.tag, m.h, m.hp, m.loc, m.serial, p.serial = *src, tag, p.h, p.hp, p.loc, w.serials, w.serials
}

// forward6 sends a client's IPv6 packet for VIP v to backend b (ref),
// which forward chose: encapsulated (DSR) or translated (NAT). IPv6
// packets are never fragmented on the way (RFC 8200 §5): whatever does
// not fit is answered with Packet Too Big.
func (w *Worker) forward6(d *Desc, frame []byte, p *pkt, v *vip, b *backend, ref uint32) {
	s := w.snap
	f := &p.f
	ip := packet.IPv6(p.l3)
	e := readL2(frame, f)
	out := s.egress()
	if v.mode == ModeDSR {
		w.encap6(d, frame, f, &e, v, b, out, ref, p.hp)
		if w.fast6 && d.Verdict == VerdictTX {
			w.offerFast6(d, frame, p, v, b, ref, out)
		}
		return
	}
	if len(s.onLink6) > 0 && d.RxPort == PortIngress {
		w.learn6(ip.SourceAddress(), e.src)
	}
	if mtu := s.mtu[out]; f.L3Len > mtu {
		w.tooBig6(d, f, &e, mtu, &v.addr6)
		return
	}
	w.sampleL4(frame, f)
	nat.DNAT6(ip, l4Of(frame, f), &b.addr6, b.port)
	ip.DecHopLimit()
	setBackendMACs(frame, b)
	d.Len = f.L3Off + f.L3Len
	if w.fast6 {
		w.offerFast6(d, frame, p, v, b, ref, out)
	}
	w.tx(d, out)
}

// l4Of returns the transport part of a packet for the nat functions.
func l4Of(frame []byte, f *packet.Frame) nat.L4 {
	l4 := nat.L4{Proto: f.Proto}
	if f.HasL4 {
		l4.Hdr = frame[f.L4Off : f.L3Off+f.L3Len]
	}
	return l4
}

// encap6 wraps the packet in VIP v's encapsulation toward backend b (ref),
// h the flow hash (see wrap6).
func (w *Worker) encap6(d *Desc, frame []byte, f *packet.Frame, e *l2, v *vip, b *backend, out uint8, ref uint32, h uint64) {
	s := w.snap
	over := w.over(v)
	if mtu := s.mtu[out]; f.L3Len+over > mtu {
		// RFC 8200 guarantees 1280 bytes end to end; an egress link that
		// cannot carry 1280 + 40 would need outer fragmentation, which
		// vipd does not do: the packet is dropped (counted) instead of
		// advertising an MTU below the IPv6 minimum.
		if mtu-over < 1280 {
			w.drop(d, DropTooBig)
			return
		}
		w.tooBig6(d, f, e, mtu-over, &v.addr6)
		return
	}
	at := d.Off + f.L3Off
	if at < over+e.hlen {
		w.drop(d, DropNoHeadroom)
		return
	}
	ip := f.IPv6(frame)
	label := s.flowLabel6(ip.SourceAddress(), ref)
	var o int
	switch {
	case v.plain:
		o = dsr.Encap6(d.Buf, at, f.L3Len, &v.encap6, &b.addr6, label)
	case w.hint >= 0:
		o = dsr.GUEHint6(d.Buf, at, f.L3Len, &v.encap6, &b.addr6, label, dsr.SourcePort(h), v.guePort, &v.prevAddr6[w.hint], 0)
	default:
		o = v.wrap6(d.Buf, at, f.L3Len, b, label, h)
	}
	d.Off = o - e.hlen
	d.Len = e.hlen + over + f.L3Len
	e.write(d.Buf[d.Off:], b.mac, s.mac[out], packet.EtherTypeIPv6)
	w.tx(d, out)
}

// tooBig6 answers with an ICMPv6 Packet Too Big from src, rate-limited.
func (w *Worker) tooBig6(d *Desc, f *packet.Frame, e *l2, mtu int, src *[16]byte) {
	if !w.icmpAllowed(d, DropTooBig) {
		return
	}
	at := d.Off + f.L3Off
	if at < icmperr.Headroom6+e.hlen {
		w.drop(d, DropNoHeadroom)
		return
	}
	o, n := icmperr.PacketTooBig6(d.Buf, at, f.L3Len, uint32(mtu), src)
	w.tooBigReply(d, e, o, n, packet.EtherTypeIPv6)
}

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

// natReply6 is natReply4 for IPv6. The steering rule reads no extension
// header but a Fragment header directly after the fixed header, so a
// packet carrying any other is no reply (it is the kernel's).
func (w *Worker) natReply6(d *Desc, frame []byte, f *packet.Frame) bool {
	s := w.snap
	ip := f.IPv6(frame)
	src := ip.SourceAddress()
	fragFirst := f.FragHdrOff == f.L3Off+packet.IPv6Size
	vi := int32(-1)
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
		sp, _, ok := ports(frame, f)
		if !ok {
			return false
		}
		if vi = s.cls6.reply6.get(mkKey6(src, f.Proto, sp)); vi < 0 {
			vi = s.cls6.reply6.get(mkKey6(src, f.Proto, 0))
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
		w.offerReply6(d, frame, f, v, mac) // before the frame is translated
	}
	nat.SNAT6(ip, l4Of(frame, f), &v.addr6, v.port)
	ip.DecHopLimit()
	setMACs(frame, mac, s.mac[PortIngress])
	d.Len = f.L3Off + f.L3Len
	w.c.Replies++
	w.countVIP(v, f.L3Len)
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
	vi := s.cls6.reply6.get(mkKey6(&q.dst, q.proto, q.dport))
	if vi < 0 {
		vi = s.cls6.reply6.get(mkKey6(&q.dst, q.proto, 0))
	}
	if vi < 0 {
		w.drop(d, DropICMPUnmatched)
		return true
	}
	if !icmp6ChecksumOK(ip, ic) {
		w.drop(d, DropBadICMPChecksum)
		return true
	}
	w.replyErrorTo(d, frame, f, &q, vi, true)
	return true
}

// learn6 records an IPv6 client's MAC when it is on a connected subnet of
// the ingress port.
func (w *Worker) learn6(src *[16]byte, mac [6]byte) {
	if w.snap.onLinkClient6(src) {
		hi, lo := nkey6(src)
		w.neigh.learn(hi, lo, mac)
	}
}

// wrap6 is wrap4 for IPv6, label the outer flow label.
func (v *vip) wrap6(buf []byte, at, n int, b *backend, label uint32, h uint64) int {
	if v.gue {
		return dsr.GUE6(buf, at, n, &v.encap6, &b.addr6, label, dsr.SourcePort(h), v.guePort)
	}
	src := v.encapSrc6(h)
	return dsr.Encap6(buf, at, n, &src, &b.addr6, label)
}

// flowLabel6 is the outer flow label of the IPv6 encapsulation of a
// client src's packets to backend ref: a hash of both, so that a backend's
// NIC can spread the tunnels over its queues (RFC 6438) while each
// client's packets stay in order (dsr.Encap6 keeps its low 20 bits).
func (s *Snapshot) flowLabel6(src *[16]byte, ref uint32) uint32 {
	return uint32(hashing.Src6(src, s.seed) ^ uint64(ref))
}

// encapSrc6 is encapSrc4 for IPv6: EncapSrc, its host bits (srcBits6,
// within the low 64) taken from h when the VIP has a source prefix.
func (v *vip) encapSrc6(h uint64) [16]byte {
	src := v.encap6
	if v.srcBits6 != 0 {
		lo := binary.BigEndian.Uint64(src[8:])
		binary.BigEndian.PutUint64(src[8:], lo&^v.srcBits6|h&v.srcBits6)
	}
	return src
}
