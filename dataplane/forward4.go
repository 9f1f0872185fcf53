package dataplane

import (
	"encoding/binary"

	"github.com/vipd/vipd/dataplane/icmperr"
	"github.com/vipd/vipd/dsr"
	"github.com/vipd/vipd/nat"
	"github.com/vipd/vipd/packet"
)

// forward4 sends a client's IPv4 packet for VIP v to backend b, which
// forward chose: encapsulated (DSR), or translated (NAT) and fragmented if
// it does not fit the egress MTU and may be.
func (w *Worker) forward4(d *Desc, frame []byte, p *pkt, v *vip, b *backend) {
	s := w.snap
	f := &p.f
	ip := packet.IPv4(p.l3)
	if v.mode == ModeNAT {
		w.learnClient4(d, ip.SourceUint32(), [6]byte(frame[6:12]))
	}
	out := s.egress()
	if v.mode == ModeDSR {
		e := readL2(frame, f)
		w.encap4(d, frame, f, &e, v, b, out, p.hp)
		return
	}
	mtu := s.mtu[out]
	var e l2 // read only when the packet does not fit: the common path needs none of it
	if f.L3Len > mtu {
		e = readL2(frame, f)
		if ip.DF() {
			w.tooBig4(d, f, &e, mtu, v.addr4)
			return
		}
	}
	var l4 nat.L4
	l4.Proto = f.Proto
	if f.HasL4 {
		l4.Hdr = frame[f.L4Off : f.L3Off+f.L3Len]
	}
	w.sampleL4(frame, f)
	// The destination is the VIP's address: classify found v by it.
	nat.DNAT4Sum(ip, l4, b.addr4, b.dnat4, b.port) // and the TTL, checked in forward
	setBackendMACs(frame, b)
	d.Len = f.L3Off + f.L3Len // drop Ethernet padding
	if f.L3Len > mtu {
		w.fragment4(d, f, &e, b, out, mtu, nil, 0)
		return
	}
	w.tx(d, out)
}

// learnClient4 records the MAC of a NAT client on a connected subnet, which
// its replies will need, from a packet received on the ingress port.
func (w *Worker) learnClient4(d *Desc, src uint32, mac [6]byte) {
	if s := w.snap; len(s.onLink4) > 0 && d.RxPort == PortIngress && s.onLinkClient4(src) {
		w.neigh.learn(0, 0xffff<<32|uint64(src), mac)
	}
}

// encap4 wraps the packet in VIP v's encapsulation toward backend b (h
// the flow hash, see wrap4), or handles it when the result would exceed
// the egress MTU.
func (w *Worker) encap4(d *Desc, frame []byte, f *packet.Frame, e *l2, v *vip, b *backend, out uint8, h uint64) {
	s := w.snap
	mtu, over := s.mtu[out], w.over(v)
	if f.L3Len+over > mtu {
		if f.IPv4(frame).DF() {
			w.tooBig4(d, f, e, mtu-over, v.addr4)
			return
		}
		w.fragment4(d, f, e, b, out, mtu-over, v, h)
		return
	}
	at := d.Off + f.L3Off
	if at < over+e.hlen {
		w.drop(d, DropNoHeadroom)
		return
	}
	o := w.wrap4(v, d.Buf, at, f.L3Len, b, h)
	d.Off = o - e.hlen
	d.Len = e.hlen + over + f.L3Len
	e.write(d.Buf[d.Off:], b.mac, s.mac[out], packet.EtherTypeIPv4)
	w.tx(d, out)
}

// tooBig4 answers a packet that does not fit the MTU and may not be
// fragmented with an ICMP fragmentation-needed from src, rate-limited.
func (w *Worker) tooBig4(d *Desc, f *packet.Frame, e *l2, mtu int, src [4]byte) {
	if !w.icmpAllowed(d, DropTooBig) {
		return
	}
	at := d.Off + f.L3Off
	if at < icmperr.Headroom4+e.hlen {
		w.drop(d, DropNoHeadroom)
		return
	}
	o, n := icmperr.FragNeeded4(d.Buf, at, f.L3Len, uint16(mtu), src)
	w.tooBigReply(d, e, o, n, packet.EtherTypeIPv4)
}

// fragment4 splits the IPv4 packet of d (DF clear) into fragments of at
// most maxTotal bytes and sends them to backend b: NAT-translated already
// when v is nil, or each encapsulated for DSR VIP v (h the flow hash).
// Fragment 0 stays in d; the others are emitted through the batch's
// Emitter.
func (w *Worker) fragment4(d *Desc, f *packet.Frame, e *l2, b *backend, out uint8, maxTotal int, v *vip, h uint64) {
	s := w.snap
	ip := packet.IPv4(d.Buf[d.Off+f.L3Off : d.Off+f.L3Off+f.L3Len])
	n := w.frag.Init(ip, maxTotal)
	if n == 0 {
		w.drop(d, DropTooBig)
		return
	}
	if w.emit == nil {
		w.drop(d, DropNoTxFrame)
		return
	}
	over := 0
	if v != nil {
		over = w.over(v)
	}
	if d.Off+f.L3Off < over+e.hlen {
		w.drop(d, DropNoHeadroom)
		return
	}
	for i := 1; i < n; i++ {
		buf, off, ok := w.emit.Alloc(out)
		if !ok {
			w.drop(d, DropNoTxFrame)
			return
		}
		at := off + e.hlen + over
		l := w.frag.Write(i, buf[at:])
		start := off
		if v != nil {
			start = w.wrap4(v, buf, at, l, b, h) - e.hlen
		}
		e.write(buf[start:], b.mac, s.mac[out], packet.EtherTypeIPv4)
		w.emit.Emit(buf, start, e.hlen+over+l, out)
		w.c.FragmentsOut++
	}
	at := d.Off + f.L3Off
	l := w.frag.Write(0, d.Buf[at:])
	start := d.Off
	if v != nil {
		start = w.wrap4(v, d.Buf, at, l, b, h) - e.hlen
	}
	e.write(d.Buf[start:], b.mac, s.mac[out], packet.EtherTypeIPv4)
	d.Off = start
	d.Len = e.hlen + over + l
	w.c.FragmentsOut++
	w.tx(d, out)
}

// over is the bytes VIP v's encapsulation adds to the packet being
// forwarded: more with a previous-owner hint.
func (w *Worker) over(v *vip) int {
	if w.hint >= 0 {
		return v.hintOver
	}
	return v.over
}

// wrap4 is v.wrap4, with the packet's previous-owner hint if it has one.
func (w *Worker) wrap4(v *vip, buf []byte, at, n int, b *backend, h uint64) int {
	if w.hint >= 0 {
		return dsr.GUEHint4(buf, at, n, v.encap4, b.addr4, dsr.SourcePort(h), v.guePort, v.prevAddr4[w.hint], 0)
	}
	return v.wrap4(buf, at, n, b, h)
}

// wrap4 encapsulates the IPv4 packet buf[at:at+n] (at >= v.over) toward
// backend b in DSR VIP v's encapsulation and returns the offset of the
// outer header. h is the flow's hash: GUE's source port, or the host bits
// of a per-flow outer source, come from it.
func (v *vip) wrap4(buf []byte, at, n int, b *backend, h uint64) int {
	if v.gue {
		return dsr.GUE4(buf, at, n, v.encap4, b.addr4, dsr.SourcePort(h), v.guePort)
	}
	return dsr.Encap4(buf, at, n, v.encapSrc4(h), b.addr4)
}

// encapSrc4 is the outer source of the IPIP packets of a flow of hash h:
// EncapSrc, its host bits (srcBits4) taken from h when the VIP has a
// source prefix.
func (v *vip) encapSrc4(h uint64) [4]byte {
	src := v.encap4
	if v.srcBits4 != 0 {
		binary.BigEndian.PutUint32(src[:], u32(src)&^v.srcBits4|uint32(h)&v.srcBits4)
	}
	return src
}
