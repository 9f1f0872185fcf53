package dataplane

import (
	"encoding/binary"

	"github.com/vipd/vipd/dsr"
	"github.com/vipd/vipd/nat"
	"github.com/vipd/vipd/packet"
)

// egress is the port toward backends.
func (s *Snapshot) egress() uint8 {
	if s.twoArmed {
		return PortEgress
	}
	return PortIngress
}

// forward sends a client's packet for VIP vi to its backend: the part
// both families share (the TTL or hop limit, the backend, its next hop,
// the counters), then forward4 or forward6.
func (w *Worker) forward(d *Desc, frame []byte, p *pkt, vi int) {
	v := &w.snap.vips[vi]
	var ttl uint8
	if v.v6 {
		ttl = packet.IPv6(p.l3).HopLimit()
	} else {
		ttl = packet.IPv4(p.l3).TTL()
	}
	if ttl == 0 || (v.mode == ModeNAT && ttl == 1) {
		// NAT forwards as a router and must decrement; DSR leaves the
		// inner packet untouched, but a TTL of 0 never travels.
		w.drop(d, DropTTLExceeded)
		return
	}
	b, ref := w.pick(frame, p, vi, v)
	if !w.reachable(d, b) {
		return
	}
	w.count(v, ref, p.f.L3Len)
	if v.v6 {
		w.forward6(d, frame, p, v, b, ref)
	} else {
		w.forward4(d, frame, p, v, b)
	}
}

// reachable reports whether a packet can go to backend b: there is one,
// and its MAC is known; otherwise d is dropped and counted for why.
func (w *Worker) reachable(d *Desc, b *backend) bool {
	switch {
	case b == nil:
		w.drop(d, DropNoBackend)
		return false
	case !b.hasMAC:
		w.drop(d, DropNoNeighbor)
		return false
	}
	return true
}

// forwardClean is forward for a packet classifyCommon marked isClean
// (IPv4, TCP or UDP, no options, not a fragment, for VIP p.vi), in one
// function for the commonest case, a NAT translation that fits the egress
// MTU; every other case goes on with forward's steps where it departs.
func (w *Worker) forwardClean(d *Desc, p *pkt) {
	s := w.snap
	vi, v := int(p.vi), p.v
	ip := (*[packet.IPv4MinSize]byte)(p.l3)
	if ip[8] <= 1 { // the TTL
		w.forward(d, d.Buf[d.Off:d.Off+d.Len], p, vi) // and its TTL rules
		return
	}
	var flags uint8
	if p.f.Proto == packet.ProtoTCP {
		flags = p.l3[packet.IPv4MinSize+13]
	}
	b, ref := w.track(p, flags, vi, v)
	if !w.reachable(d, b) {
		return
	}
	w.count(v, ref, p.f.L3Len)
	out := s.egress()
	n, mtu := p.f.L3Len, s.mtu[out]
	switch {
	case v.mode == ModeNAT && n <= mtu:
		if len(s.onLink4) > 0 { // checked here too: no call for the usual routed clients
			w.learnClient4(d, binary.BigEndian.Uint32(ip[12:]), [6]byte(p.eth[6:12]))
		}
		if w.l4Tick++; w.l4Tick&(l4SampleEvery-1) == 0 { // sampleL4
			w.verifyL4(d.Buf[d.Off:d.Off+d.Len], &p.f)
		}
		// The destination is the VIP's address: classify found v by it.
		nat.DNAT4Sum(p.l3, nat.L4{Proto: p.f.Proto, Hdr: p.l3[packet.IPv4MinSize:]}, b.addr4, b.dnat4, b.port)
		setBackendMACs(p.eth[:], b)
		d.Len = packet.EthernetSize + n // drop Ethernet padding
		if w.fast != nil {
			w.offerFast(d, p, v, b, ref, out, flags)
		}
	case v.mode == ModeDSR && n+v.over <= mtu && d.Off >= v.over && w.hint < 0:
		var o int
		if v.plain {
			o = dsr.Encap4(d.Buf, d.Off+packet.EthernetSize, n, v.encap4, b.addr4)
		} else {
			o = v.wrap4(d.Buf, d.Off+packet.EthernetSize, n, b, p.hp)
		}
		d.Off = o - packet.EthernetSize
		d.Len = packet.EthernetSize + v.over + n
		eth := d.Buf[d.Off : d.Off+packet.EthernetSize]
		setBackendMACs(eth, b)
		binary.BigEndian.PutUint16(eth[12:], packet.EtherTypeIPv4)
		if w.fast != nil {
			w.offerFast(d, p, v, b, ref, out, flags)
		}
	default:
		w.forward4(d, d.Buf[d.Off:d.Off+d.Len], p, v, b) // client learning, MTU, headroom
		return
	}
	w.tx(d, out)
}

// flagPrevious, in a conntrack entry's flags, marks a flow that started
// with a previous-owner hint: its packets keep carrying one while the
// VIP's previous table picks another backend than the entry's.
const flagPrevious = 1
