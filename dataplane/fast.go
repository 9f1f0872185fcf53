package dataplane

import (
	"encoding/binary"
	"time"

	"github.com/vipd/vipd/conntrack"
	"github.com/vipd/vipd/dsr"
	"github.com/vipd/vipd/nat"
	"github.com/vipd/vipd/packet"
)

// FastFlow is a flow a worker hands to a fast path: how its packets are
// translated or encapsulated, as the worker just did it to one of them.
// It is a client's tracked flow of a NAT or DSR VIP (forwardClean;
// over IPv6, V6, forward6 and encap6), or the replies of a NAT backend to
// one client (SNAT; natReply4, natReply6). Everything is in host order
// except the addresses and MACs.
type FastFlow struct {
	// The flow as it arrives: source, destination, ports, protocol (6 or
	// 17). A client's flow goes from the client to the VIP, a reply
	// flow from the backend to the client.
	Src, Dst         [4]byte
	SrcPort, DstPort uint16
	Proto            uint8
	// Gen is the generation of the snapshot the translation comes from
	// (Snapshot.Generation).
	Gen uint32
	// Addr and Port are the new destination, the backend's (Port 0 keeps
	// the VIP's port); with SNAT the new source, the VIP's (Port 0 keeps
	// the backend's port).
	Addr [4]byte
	Port uint16
	// SNAT: the source is translated (a NAT backend's reply), not the
	// destination.
	SNAT bool
	// IPSum and L4Sum are what the translation adds to the IPv4 header
	// checksum and to the TCP or UDP checksum (nat.Sums4).
	IPSum, L4Sum uint32
	// MACs are the frame's new destination and source Ethernet addresses.
	MACs [12]byte
	// MaxLen is the egress MTU: the longest IPv4 packet translated this
	// way (a longer one needs vipd).
	MaxLen uint16
	// RxPort and TxPort are where the flow's packets come in and leave
	// (PortIngress or PortEgress).
	RxPort, TxPort uint8
	// Slot is where the fast path counts the flow's packets (below
	// FastSlots): a client's flow by its backend's reference
	// (BackendSpec.Ref, below MaxFastRef), a NAT reply flow in its
	// backend's reply slot (fastReplySlot).
	Slot uint32
	// Encap (a DSR VIP): the packets are wrapped untouched in an outer
	// IPv4 header from EncapSrc to Addr, as dsr.Encap4 does, instead of
	// translated (Port, IPSum and L4Sum unused); OuterSum is
	// dsr.Outer4Sum of that header, and MaxLen the egress MTU less the
	// outer headers. With GUE the outer header is of protocol UDP and a
	// UDP header from GUESrcPort to GUEDstPort follows it, as
	// dsr.GUE4 writes them.
	Encap                  bool
	EncapSrc               [4]byte
	OuterSum               uint32
	GUE                    bool
	GUESrcPort, GUEDstPort uint16
	// V6: an IPv6 flow, whose addresses are Src6, Dst6 and Addr6 (Src,
	// Dst and Addr unused); L4Sum is then nat.Sums6, IPSum unused, and
	// MaxLen the longest IPv6 packet (40 + payload length). An IPv6
	// Encap is IPv6 in IPv6 from EncapSrc6 with flow label FlowLabel,
	// as dsr.Encap6 writes it (no GUE).
	V6                bool
	Src6, Dst6, Addr6 [16]byte
	EncapSrc6         [16]byte
	FlowLabel         uint32
	// Brief: the flow has not proven itself to conntrack yet (its proof
	// level is below conntrack.ProofTicks: evictable), so its entry
	// serves one conntrack tick (a second) at most instead of
	// fast_path_refresh: a packet of it reaches a worker every second,
	// which raises its level as if the worker had seen every packet, and
	// the flow is proven (unevictable) after some 2 s as without the fast
	// path, not after two refreshes.
	Brief bool
	// Retire: the flow ends (a FIN or RST reached a worker). Only the key
	// (the fields up to Proto, V6, Src6 and Dst6) counts: its entry, if
	// any, stops serving, so that a new connection on the same tuple goes
	// through a worker.
	Retire bool
}

// MaxFastRef bounds the backend references whose flows go to a fast path,
// which counts what it forwards by counting slot, FastSlots of them
// (xdpprog.MaxFastRefs; the daemon's tests hold the two equal): one per
// backend reference below MaxFastRef for its clients' packets, then one
// per reference for its NAT replies. A flow it could not count would be
// missing from its backend's or VIP's counters, so none is offered.
const (
	MaxFastRef = 1 << 18
	FastSlots  = 2 * MaxFastRef
)

// fastReplySlot is the counting slot of backend ref's NAT replies.
func fastReplySlot(ref uint32) uint32 { return MaxFastRef + ref }

// FastPath takes a worker's established flows to forward them without
// the worker (package xdpprog's fast path, through the daemon). A worker
// Offers flows while it processes a batch and Flushes them after the
// batch is sent; each worker has its own FastPath.
type FastPath interface {
	// Offer queues f (which the caller may reuse at once); false when
	// the queue is full (the flow is offered again by a later packet).
	Offer(f *FastFlow) bool
	// Flush hands the queued flows over and empties the queue.
	Flush() error
	// Forwarded returns the packets and IP bytes the fast path forwarded
	// in counting slot since it started (ok false when it has no count
	// for slot). Any goroutine may call it.
	Forwarded(slot uint32) (packets, bytes uint64, ok bool)
	// IPv6 reports whether it takes IPv6 flows: without, the worker
	// offers none (and spends nothing describing them).
	IPv6() bool
}

// SetFastPath gives the worker a fast path for its flows; nil, the
// default, is none. With harvest, the worker also adds what the fast path
// forwarded to its per-VIP and per-backend counters (Packets, Bytes, and
// Replies for NAT replies), at most once a second: give it to one worker
// of those that share the fast path, or the packets are counted more than
// once. Call it before Run.
func (w *Worker) SetFastPath(f FastPath, harvest bool) {
	w.fast, w.fastHarvest = f, harvest
	w.fast6 = f != nil && f.IPv6()
}

// fastHarvestEvery is how often the harvesting worker reads the fast
// path's per-backend counters: a read costs a copy per backend reference.
const fastHarvestEvery = int64(time.Second)

// harvestFast adds to the worker's per-VIP and per-backend counters what
// the fast path forwarded since the last harvest, by counting slot: the
// packets the fast path takes off the workers stay in their VIP's and
// backend's counts, a second late at most. A reference counts for the
// backend and VIP that hold it in the worker's snapshot (when one was
// just reused, its last second may go to the new holder, as the workers'
// own counts may at a snapshot change), its reply slot as its NAT
// replies, as natReply4 counts them.
func (w *Worker) harvestFast() {
	w.fastHarvested = w.now
	s := w.snap
	if s == nil {
		return
	}
	for len(w.fastSeen) < len(w.c.Backends) {
		w.fastSeen = append(w.fastSeen, [2]uint64{})
		w.fastSeenOut = append(w.fastSeenOut, [2]uint64{})
	}
	for ref := range min(len(w.c.Backends), MaxFastRef) {
		var vc *FlowCounters // the VIP that holds ref in the snapshot
		if ref < len(s.backends) && s.backends[ref].live {
			vc = &w.c.VIPs[s.vips[s.backends[ref].vip].id]
		}
		if dp, db, ok := w.fastDelta(uint32(ref), &w.fastSeen[ref]); ok {
			c := &w.c.Backends[ref]
			c.Packets += dp
			c.Bytes += db
			if vc != nil {
				vc.Packets += dp
				vc.Bytes += db
			}
		}
		if dp, db, ok := w.fastDelta(fastReplySlot(uint32(ref)), &w.fastSeenOut[ref]); ok {
			c := &w.c.Backends[ref]
			c.OutPackets += dp
			c.OutBytes += db
			if vc != nil {
				vc.OutPackets += dp
				vc.OutBytes += db
			}
			w.c.Replies += dp
		}
	}
}

// fastDelta returns what the fast path forwarded in slot since seen, and
// sets seen to its counts; ok is false when that is nothing.
func (w *Worker) fastDelta(slot uint32, seen *[2]uint64) (packets, bytes uint64, ok bool) {
	p, b, ok := w.fast.Forwarded(slot)
	if !ok || p == seen[0] && b == seen[1] {
		return 0, 0, false
	}
	dp, db := p-seen[0], b-seen[1]
	seen[0], seen[1] = p, b
	return dp, db, true
}

// stateFlags are the TCP flags that change a flow's conntrack state; the
// fast path leaves segments with any of them to the pipeline.
const stateFlags = packet.TCPFlagSYN | packet.TCPFlagFIN | packet.TCPFlagRST

// offerFast hands the flow of p, which forwardClean just translated (NAT)
// or encapsulated (DSR: IPIP or GUE) to backend b (ref) on port out with
// flags its TCP flags, to the fast path when the fast path may forward
// the flow's next packets alone: a flow conntrack found (not one this
// packet created, nor one that moved to another backend), not closing,
// this packet without stateFlags, of a VIP without previous-owner hints,
// arriving on the ingress port. So a TCP connection's handshake ACK is
// the first packet offered, a UDP flow's second datagram.
//
// What the packets the fast path forwards would have done here is only to
// renew the flow's conntrack entry and raise its proof level (conntrack's
// State: a later tick's packet). The fast path's entry expires after
// fast_path_refresh, shorter than every timeout of the states this
// admits (validated in package config): the first packet after that comes
// here, does both, and renews the entry. A flow not proven yet gets a
// Brief entry, which expires after a second: its level rises every
// second as if the worker saw every packet, so that a flood of new flows
// cannot evict it any longer than it could evict a flow the workers
// carry (TestFastProofFollowsHandshake). A segment that changes the
// state (FIN, RST, SYN) always comes here; the first FIN or RST retires
// the flow's entry (retireFast) and makes it Closing, which is never
// offered, so that the ACK and data of a new connection on the same tuple
// come here too, to be placed (TestReusedTupleLeavesDrainingBackend).
func (w *Worker) offerFast(d *Desc, p *pkt, v *vip, b *backend, ref uint32, out uint8, flags uint8) {
	if !w.mayHandDown(d, v, ref, flags) {
		return
	}
	ip := (*[packet.IPv4MinSize]byte)(p.l3)
	mtu := w.snap.mtu[out]
	f := &w.fastFlow
	// The header is translated already: the destination was the VIP's
	// address, which classify found v by.
	*f = FastFlow{
		Src: [4]byte(ip[12:16]), Dst: v.addr4, SrcPort: p.key.SrcPort, DstPort: p.key.DstPort, Proto: p.f.Proto,
		Gen: w.snap.gen, Addr: b.addr4, MACs: b.macs, RxPort: d.RxPort, TxPort: out, Slot: ref,
		Brief: brief(w.lastState),
	}
	if v.mode == ModeDSR {
		// The outer headers as wrap4 writes them for this flow.
		f.Encap = true
		proto := uint8(packet.ProtoIPIP)
		f.EncapSrc = v.encapSrc4(p.hp)
		if v.gue {
			proto, f.EncapSrc = packet.ProtoUDP, v.encap4
			f.GUE, f.GUESrcPort, f.GUEDstPort = true, dsr.SourcePort(p.hp), v.guePort
		}
		f.OuterSum = dsr.Outer4Sum(proto, f.EncapSrc, b.addr4)
		mtu -= v.over
	} else {
		f.Port = b.port
		f.IPSum, f.L4Sum = nat.Sums4(b.dnat4, p.key.DstPort, b.port)
	}
	f.MaxLen = uint16(min(mtu, 0xffff))
	w.offer(f)
}

// brief reports whether a flow in conntrack state st (before its packet
// was counted) hands down a Brief entry: one not yet proven. A packet
// that just proved it makes one brief entry more, a second of it.
func brief(st conntrack.State) bool {
	return st != conntrack.StateEstablished && st != conntrack.StateUDP
}

// retireFast tells the fast path that the client flow of p to VIP v
// ends: its entry stops serving (FastFlow.Retire). It is not a Closing
// flow's: those are never handed down, and the FIN or RST that made it
// Closing retired it.
func (w *Worker) retireFast(p *pkt, v *vip) {
	f := &w.fastFlow
	if v.v6 {
		if !w.fast6 {
			return
		}
		*f = FastFlow{V6: true, Src6: p.key.Src, Dst6: v.addr6, SrcPort: p.key.SrcPort, DstPort: p.key.DstPort, Proto: p.key.Proto, Retire: true}
	} else {
		*f = FastFlow{Src: [4]byte(p.key.Src[:4]), Dst: v.addr4, SrcPort: p.key.SrcPort, DstPort: p.key.DstPort, Proto: p.key.Proto, Retire: true}
	}
	// A later offer of the flow must not be taken for a repeat.
	w.lastOffer = [2]FastFlow{}
	if w.fast.Offer(f) {
		w.c.FastRetired++
		w.fastPending = true
	}
}

// mayHandDown reports whether the client flow of VIP v to backend ref,
// whose packet d with TCP flags flags a worker just forwarded after
// looking the flow up in conntrack, may go to the fast path: see
// offerFast.
func (w *Worker) mayHandDown(d *Desc, v *vip, ref uint32, flags uint8) bool {
	return w.lastState != 0 && w.lastState != conntrack.StateClosing &&
		flags&stateFlags == 0 && v.prev == nil && d.RxPort == PortIngress && ref < MaxFastRef
}

// offerReply hands the flow of a NAT backend's reply, which natReply4 is
// about to translate for VIP v and send to the client's next hop mac, to
// the fast path, when the fast path may translate the flow's next packets
// alone: a whole TCP or UDP packet, untagged, without IPv4 options, no
// longer than the ingress MTU, TCP without stateFlags (which the fast
// path leaves to the pipeline). Replies need no conntrack (see
// natReply4): the translation is a function of the packet and the
// snapshot, whose generation the entry carries; the entry's expiry only
// bounds how long a learned client MAC may stay stale there.
func (w *Worker) offerReply(d *Desc, frame []byte, f *packet.Frame, v *vip, ref uint32, mac [6]byte) {
	s := w.snap
	if f.Frag || !f.HasL4 || f.L3Off != packet.EthernetSize || f.L4Off != f.L3Off+packet.IPv4MinSize ||
		!isTCPUDP(f.Proto) || tcpFlags(frame, f)&stateFlags != 0 || f.L3Len > s.mtu[PortIngress] || ref >= MaxFastRef {
		return // (a reference past MaxFastRef has no reply slot: its replies would go uncounted)
	}
	ip := (*[packet.IPv4MinSize]byte)(frame[f.L3Off:])
	l4 := (*[4]byte)(frame[f.L4Off:])
	x := &w.fastFlow
	*x = FastFlow{
		Src: [4]byte(ip[12:16]), Dst: [4]byte(ip[16:20]),
		SrcPort: binary.BigEndian.Uint16(l4[:]), DstPort: binary.BigEndian.Uint16(l4[2:]), Proto: f.Proto,
		Gen: s.gen, Addr: v.addr4, Port: v.port, SNAT: true,
		MaxLen: uint16(min(s.mtu[PortIngress], 0xffff)), RxPort: d.RxPort, TxPort: PortIngress, Slot: fastReplySlot(ref),
	}
	x.IPSum, x.L4Sum = nat.Sums4(nat.AddrSum4(x.Src, v.addr4), x.SrcPort, v.port)
	copy(x.MACs[:6], mac[:])
	copy(x.MACs[6:], s.mac[PortIngress][:])
	w.offer(x)
}

// offerFast6 is offerFast for an IPv6 flow, which forward6 just
// translated (NAT) or encap6 wrapped in IPv6 in IPv6 (DSR; not GUE, whose
// UDP checksum covers the whole packet): on top of offerFast's
// conditions, the frame is untagged and carries TCP or UDP right after
// the fixed header (no extension headers), as the fast path requires.
func (w *Worker) offerFast6(d *Desc, frame []byte, p *pkt, v *vip, b *backend, ref uint32, out uint8) {
	f := &p.f
	if v.gue || !plain6(f) || !w.mayHandDown(d, v, ref, tcpFlags(frame, f)) {
		return
	}
	s := w.snap
	x := &w.fastFlow
	*x = FastFlow{
		V6: true, Src6: p.key.Src, Dst6: v.addr6, SrcPort: p.key.SrcPort, DstPort: p.key.DstPort, Proto: f.Proto,
		Gen: s.gen, Addr6: b.addr6, MACs: b.macs, RxPort: d.RxPort, TxPort: out, Slot: ref,
		Brief: brief(w.lastState),
	}
	mtu := s.mtu[out]
	if v.mode == ModeDSR {
		x.Encap, x.EncapSrc6, x.FlowLabel = true, v.encapSrc6(p.hp), s.flowLabel6(&x.Src6, ref)&0xfffff
		mtu -= v.over
	} else {
		x.Port, x.L4Sum = b.port, nat.Sums6(&x.Dst6, &x.Addr6, p.key.DstPort, b.port)
	}
	x.MaxLen = uint16(min(mtu, 0xffff))
	w.offer(x)
}

// offerReply6 is offerReply for a NAT backend's IPv6 reply, which
// natReply6 is about to translate: untagged, TCP or UDP right after the
// fixed header, TCP without stateFlags, within the ingress MTU.
func (w *Worker) offerReply6(d *Desc, frame []byte, f *packet.Frame, v *vip, ref uint32, mac [6]byte) {
	s := w.snap
	if !plain6(f) || tcpFlags(frame, f)&stateFlags != 0 || f.L3Len > s.mtu[PortIngress] || ref >= MaxFastRef {
		return
	}
	ip := f.IPv6(frame)
	l4 := (*[4]byte)(frame[f.L4Off:])
	x := &w.fastFlow
	*x = FastFlow{
		V6: true, Src6: *ip.SourceAddress(), Dst6: *ip.DestinationAddress(),
		SrcPort: binary.BigEndian.Uint16(l4[:]), DstPort: binary.BigEndian.Uint16(l4[2:]), Proto: f.Proto,
		Gen: s.gen, Addr6: v.addr6, Port: v.port, SNAT: true,
		MaxLen: uint16(min(s.mtu[PortIngress], 0xffff)), RxPort: d.RxPort, TxPort: PortIngress, Slot: fastReplySlot(ref),
	}
	x.L4Sum = nat.Sums6(&x.Src6, &x.Addr6, x.SrcPort, v.port)
	copy(x.MACs[:6], mac[:])
	copy(x.MACs[6:], s.mac[PortIngress][:])
	w.offer(x)
}

// plain6 reports an IPv6 frame the fast path can take: untagged, TCP or
// UDP directly after the fixed header, which excludes fragments.
func plain6(f *packet.Frame) bool {
	return !f.Frag && f.HasL4 && f.L3Off == packet.EthernetSize && f.L4Off == f.L3Off+packet.IPv6Size && isTCPUDP(f.Proto)
}

// offerRepeat is how long after offering a flow a worker does not offer
// it again unchanged (ns). The entry is written when the batch ends, but
// the frames the program sent to the worker before that — the rest of a
// burst that arrived with the packet that handed the flow down or renewed
// it, often dozens — still come through the worker, and each would write
// the same entry again (a map update of the kernel's each). They come
// within a ring's worth of frames: well under this. A flow's entry lasts
// fast_path_refresh, at least 100 ms, so one not written again for this
// long is written again by the flow's next packet after it.
const offerRepeat = int64(10 * time.Millisecond)

// offer queues f with the fast path and counts it, unless it is the
// flow's offer of under offerRepeat ago, unchanged (the last one
// offered from the same receive port, where a burst's frames follow each
// other).
func (w *Worker) offer(f *FastFlow) {
	p := f.RxPort & 1
	if *f == w.lastOffer[p] && w.now-w.lastOfferAt[p] < offerRepeat {
		return
	}
	if w.fast.Offer(f) {
		w.c.FastOffered++
		w.fastPending = true
		w.lastOffer[p], w.lastOfferAt[p] = *f, w.now
	}
}

// flushFast hands the flows offered during the batch to the fast path.
func (w *Worker) flushFast() {
	w.fastPending = false
	if err := w.fast.Flush(); err != nil {
		w.c.FastFlushErrors++
	}
}
