package dataplane

import (
	"encoding/binary"

	"github.com/vipd/vipd/conntrack"
	"github.com/vipd/vipd/packet"
)

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
		b := s.backendFor(ref, vi)
		if flags&(packet.TCPFlagSYN|packet.TCPFlagACK) == packet.TCPFlagSYN {
			if b == nil || !b.takes {
				// A SYN on the tuple while its backend takes no new
				// flows (draining, weight 0, down, disabled, gone):
				// a new connection (the tuple reused by a client
				// behind CGNAT or a proxy, after a close vipd never
				// saw) is placed afresh, unless it is the same SYN
				// again, whose SYN-ACK may be on its way.
				if !w.resent(e, p) {
					return w.reused(e, p, vi, v)
				}
			} else if e.State() == conntrack.StateClosing {
				// A new connection on the tuple of a closed one, on
				// a backend that takes it: the same backend, a new
				// flow (its own age and proof).
				w.ct.Renew(e, ref, flags, synMark(p))
				w.lastState = 0
				w.handshakeStarted(&p.key, ref)
				return b, ref
			}
		}
		if b != nil {
			st := e.State()
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
				if v.mode != ModeNAT {
					// Past its SYNs: the client got the SYN-ACK, which
					// in NAT mode counted as it passed (natReply4).
					w.handshakeAnswered(watchKey(&p.key.Src, p.key.SrcPort, p.key.VIP), p.key.VIP, ref)
				}
			case flags&(packet.TCPFlagSYN|packet.TCPFlagACK) == packet.TCPFlagSYN:
				// The SYN the entry keeps the mark of: the latest.
				e.SetFlags(e.Flags()&flagPrevious | synMark(p))
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
		b, ref = w.maglev(v, p.hp)
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
		e.SetFlags(synMark(p))
		w.handshakeStarted(&p.key, ref)
	}
	w.c.VIPs[v.id].NewFlows++
	w.c.Backends[ref].NewFlows++
	return b, ref
}

// reused places the SYN p of a new connection on the tuple of entry e,
// whose backend takes no new flows (draining, weight 0, down, disabled,
// removed), as a new flow: by the scheduler, the entry renewed for it
// (its backend, state, age and flags those of a new flow) and the tuple's
// fast path entry, if any, retired, so that the new connection's ACK and
// data reach a worker instead of the old backend. Kept on a draining
// backend, such connections would break when it is removed after its
// active flows reach 0 (the drain's promise), and a client that reuses
// its ports within the old entry's timeout would never leave it. This is
// what IPVS does with conn_reuse_mode and expire_nodest_conn.
func (w *Worker) reused(e conntrack.Entry, p *pkt, vi int, v *vip) (*backend, uint32) {
	w.lastState = 0
	b, ref := w.schedule(vi, v, p.hp)
	if b == nil {
		return nil, 0 // no backend takes new flows: as for a miss
	}
	w.ct.Renew(e, ref, packet.TCPFlagSYN, synMark(p))
	if w.fast != nil {
		w.retireFast(p, v)
	}
	w.c.Reused++
	w.c.VIPs[v.id].NewFlows++
	w.c.Backends[ref].NewFlows++
	w.handshakeStarted(&p.key, ref)
	return b, ref
}

// synMark is the mark of TCP SYN p's sequence number that its flow's
// entry keeps in the flags bits above flagPrevious: seven bits of a
// multiplicative hash of it. The client's retransmissions of a SYN carry
// its sequence number again; a new connection's SYN has another,
// chosen at random (RFC 9293, 3.4.1), whose mark differs but in one case
// out of 128.
func synMark(p *pkt) uint8 {
	o := p.f.L4Off - p.f.L3Off + 4 // the sequence number
	if o < 0 || o+4 > len(p.l3) {
		return 0
	}
	seq := binary.BigEndian.Uint32(p.l3[o:])
	return uint8(seq*0x9e3779b1>>25) << 1
}

// resent reports whether SYN p is a retransmission of the SYN that
// started entry e's connection: the entry has seen nothing but SYNs, the
// last of which had p's sequence number (its mark). Past its SYNs the
// client has had its SYN-ACK, and a SYN is a new connection's, as IPVS
// takes it (one delayed past the handshake's ACK, rare, is taken so too).
func (w *Worker) resent(e conntrack.Entry, p *pkt) bool {
	return e.State() == conntrack.StateSynSent && e.Flags()&^flagPrevious == synMark(p)
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
