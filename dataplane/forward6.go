package dataplane

import (
	"encoding/binary"

	"github.com/vipd/vipd/dataplane/icmperr"
	"github.com/vipd/vipd/dsr"
	"github.com/vipd/vipd/hashing"
	"github.com/vipd/vipd/nat"
	"github.com/vipd/vipd/packet"
)

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
