package dataplane

import (
	"encoding/binary"

	"github.com/vipd/vipd/conntrack"
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

// pick finds the backend of a packet for VIP vi: for a tracked flow, the
// one conntrack pinned it to, if that one still keeps flows, else Maglev's
// choice (pinned now); for a fragment, Maglev's choice by the stateless
// hash classify computed.
func (w *Worker) pick(frame []byte, p *pkt, vi int, v *vip) (*backend, uint32) {
	if p.f.Frag {
		w.c.Stateless++
		return w.maglev(v, p.hp)
	}
	return w.track(p, tcpFlags(frame, &p.f), vi, v)
}

// track looks the flow classify found up in the shard and pins it on a
// miss.
//
// Not inlined: inlined into forwardClean (which PGO allows when the
// profile does not make its own calls hot), it leaves forwardClean too big
// to inline LookupAt, and a hit costs some 25 instructions more (callgrind,
// BenchmarkHit/nat4).
//
//go:noinline
func (w *Worker) track(p *pkt, flags uint8, vi int, v *vip) (*backend, uint32) {
	if v.quic != nil {
		if b, ref, ok := w.trackQUIC(p, flags, vi, v); ok {
			return b, ref
		}
	}
	s := w.snap
	if e, ok := w.lookup(p); ok {
		w.c.FlowHits++
		ref := e.Backend()
		if b := s.backendFor(ref, vi); b != nil {
			st := e.State()
			if st == conntrack.StateClosing && flags&(packet.TCPFlagSYN|packet.TCPFlagACK) == packet.TCPFlagSYN && !b.takes {
				// The tuple reused by a new connection (clients
				// behind CGNAT or a proxy, load generators) while
				// the backend takes no new ones: draining, weight 0.
				return w.reused(e, p, vi, v)
			}
			if v.prev != nil && e.Flags()&flagPrevious != 0 {
				if flags&(packet.TCPFlagSYN|packet.TCPFlagACK) == packet.TCPFlagSYN {
					e.SetFlags(0) // the tuple reused by a new connection: its own, here
				} else {
					w.previous(v, b, p.hp)
				}
			}
			w.lastState = st
			switch {
			case st == conntrack.StateSynSent && flags&(packet.TCPFlagSYN|packet.TCPFlagFIN|packet.TCPFlagRST) == 0:
				w.c.Backends[ref].Answered++ // past its SYNs: the client got the SYN-ACK
			case st == conntrack.StateClosing && flags&(packet.TCPFlagSYN|packet.TCPFlagACK) == packet.TCPFlagSYN:
				w.c.Backends[ref].Handshakes++ // the tuple reused: a new handshake
			case flags&(packet.TCPFlagFIN|packet.TCPFlagRST) != 0 && st != conntrack.StateClosing && w.fast != nil:
				// The connection ends: its fast path entry, if it has
				// one, must not carry the ACK and data of a new
				// connection on the same tuple past the workers.
				w.retireFast(p, v)
			}
			w.ct.Touch(e, flags)
			return b, ref
		}
		// Its backend is down or gone: re-pick, keep the entry.
		w.lastState = 0
		b, ref := w.maglev(v, p.hp)
		if b != nil {
			e.SetFlags(0) // a hint was about the backend it left
			w.ct.SetBackend(e, ref)
			w.ct.Touch(e, flags)
			w.c.Repicked++
			w.c.Backends[ref].NewFlows++
		}
		return b, ref
	}
	w.c.FlowMisses++
	w.lastState = 0
	b, ref := w.schedule(vi, v, p.hp)
	if b == nil {
		return nil, 0
	}
	e, res := w.ct.InsertMissed(&p.key, p.loc, ref, flags)
	if !res.Tracked() {
		// Untracked: every packet is placed anew, so by the stateless
		// choice, and the scheduler's count of a pinned flow is taken
		// back (each packet would add one).
		w.sch.unpin(v, ref)
		b, ref = w.maglev(v, p.hp)
	}
	// Mid-stream (no SYN; UDP only when the VIP says so), a flow that the
	// previous table gave another backend carries that one as a hint.
	hinted := v.prev != nil && (p.key.Proto == packet.ProtoTCP && flags&packet.TCPFlagSYN == 0 || p.key.Proto == packet.ProtoUDP && v.prevUDP) &&
		w.previous(v, b, p.hp)
	if !res.Tracked() {
		w.c.Untracked++
		w.c.Stateless++
	} else if hinted {
		e.SetFlags(flagPrevious)
		w.c.HintedFlows++
	} else if p.key.Proto == packet.ProtoTCP && flags&(packet.TCPFlagSYN|packet.TCPFlagACK) == packet.TCPFlagSYN {
		w.c.Backends[ref].Handshakes++
	}
	w.c.VIPs[v.id].NewFlows++
	w.c.Backends[ref].NewFlows++
	return b, ref
}

// reused places the SYN p of a new connection on the tuple of entry e, a
// Closing flow whose backend takes no new flows, as a new flow: by the
// scheduler, the entry pinned to its choice. Kept on the draining
// backend, such connections would break when it is removed after its
// active flows reach 0 (the drain's promise), and a client that reuses
// its ports within tcp_closing would never leave it.
func (w *Worker) reused(e conntrack.Entry, p *pkt, vi int, v *vip) (*backend, uint32) {
	w.lastState = 0
	b, ref := w.schedule(vi, v, p.hp)
	if b == nil {
		return nil, 0 // no backend takes new flows: as for a miss
	}
	e.SetFlags(0) // a hint was about the old connection
	w.ct.SetBackend(e, ref)
	w.ct.Touch(e, packet.TCPFlagSYN)
	w.c.Reused++
	w.c.VIPs[v.id].NewFlows++
	w.c.Backends[ref].NewFlows++
	w.c.Backends[ref].Handshakes++
	return b, ref
}

// lookup is the shard's LookupAt of p's flow, or, when p is of the flow
// the last lookup found (a burst's next packet: flow4's or classify6's
// memo gave both the same serial) and the shard's epoch is the same,
// that lookup's entry, which LookupAt would find again
// (conntrack.Shard.Epoch).
func (w *Worker) lookup(p *pkt) (conntrack.Entry, bool) {
	if p.serial != 0 && p.serial == w.hit.serial && w.hit.epoch == w.ct.Epoch() {
		return w.hit.e, true
	}
	e, ok := w.ct.LookupAt(&p.key, p.loc)
	if ok {
		w.hit.e, w.hit.serial, w.hit.epoch = e, p.serial, w.ct.Epoch()
	}
	return e, ok
}

// flagPrevious, in a conntrack entry's flags, marks a flow that started
// with a previous-owner hint: its packets keep carrying one while the
// VIP's previous table picks another backend than the entry's.
const flagPrevious = 1

// previous sets w.hint when VIP v's previous table gives hash h to another
// backend than b, and reports whether it did.
func (w *Worker) previous(v *vip, b *backend, h uint64) bool {
	i := v.prev.Lookup(h)
	if i < 0 {
		return false
	}
	if v.v6 {
		if v.prevAddr6[i] == b.addr6 {
			return false
		}
	} else if v.prevAddr4[i] == b.addr4 {
		return false
	}
	w.hint = int32(i)
	w.c.HintedPackets++
	return true
}

// maglev returns the backend Maglev picks for h.
func (w *Worker) maglev(v *vip, h uint64) (*backend, uint32) {
	i := v.table.Lookup(h)
	if i < 0 {
		return nil, 0
	}
	ref := v.refs[i]
	return &w.snap.backends[ref], ref
}
