package dataplane

import (
	"time"

	"github.com/vipd/vipd/conntrack"
	"github.com/vipd/vipd/encap"
	"github.com/vipd/vipd/nat"
	"github.com/vipd/vipd/packet"
)

// FastFlow is a tracked IPv4 NAT flow a worker hands to a fast path: how
// its client's packets are translated, as forwardClean just did it to one
// of them. Everything is in host order except the addresses and MACs.
type FastFlow struct {
	// The flow as it arrives: client, VIP, ports, protocol (6 or 17).
	Src, Dst         [4]byte
	SrcPort, DstPort uint16
	Proto            uint8
	// Gen is the generation of the snapshot the translation comes from
	// (Snapshot.Generation).
	Gen uint32
	// Addr and Port are the backend's; Port 0 keeps the VIP's port.
	Addr [4]byte
	Port uint16
	// IPSum and L4Sum are what the translation adds to the IPv4 header
	// checksum and to the TCP or UDP checksum (nat.DNAT4Sums).
	IPSum, L4Sum uint32
	// MACs are the frame's new destination and source Ethernet addresses.
	MACs [12]byte
	// MaxLen is the egress MTU: the longest IPv4 packet translated this
	// way (a longer one needs vipd).
	MaxLen uint16
	// RxPort and TxPort are where the flow's packets come in and leave
	// (PortIngress or PortEgress).
	RxPort, TxPort uint8
	// Backend is the backend's reference (BackendSpec.Ref), below
	// MaxFastRef: the fast path counts the flow's packets by it.
	Backend uint32
	// Encap (a DSR VIP with IPIP encapsulation): the packets are wrapped
	// untouched in an outer IPv4 header from EncapSrc to Addr, as
	// encap.Encap4 does, instead of translated (Port, IPSum and L4Sum
	// unused); OuterSum is encap.Outer4Sum of that header, and MaxLen
	// the egress MTU less the outer header.
	Encap    bool
	EncapSrc [4]byte
	OuterSum uint32
}

// MaxFastRef bounds the backend references whose flows go to a fast path:
// xdpprog counts forwarded frames per reference below it
// (xdpprog.MaxFastRefs; the daemon's tests hold the two equal), and a flow
// it could not count would be missing from its backend's counters.
const MaxFastRef = 1 << 18

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
	// for backend ref since it started (ok false when it has no count
	// for ref). Any goroutine may call it.
	Forwarded(ref uint32) (packets, bytes uint64, ok bool)
}

// SetFastPath gives the worker a fast path for its NAT flows; nil, the
// default, is none. With harvest, the worker also adds what the fast path
// forwarded to its per-VIP and per-backend counters (Packets, Bytes), at
// most once a second: give it to one worker of those that share the fast
// path, or the packets are counted more than once. Call it before Run.
func (w *Worker) SetFastPath(f FastPath, harvest bool) { w.fast, w.fastHarvest = f, harvest }

// fastHarvestEvery is how often the harvesting worker reads the fast
// path's per-backend counters: a read costs a copy per backend reference.
const fastHarvestEvery = int64(time.Second)

// harvestFast adds to the worker's per-VIP and per-backend counters what
// the fast path forwarded since the last harvest, by backend reference:
// the packets the fast path takes off the workers stay in their VIP's and
// backend's counts, a second late at most. A reference counts for the
// backend and VIP that hold it in the worker's snapshot (when one was
// just reused, its last second may go to the new holder, as the workers'
// own counts may at a snapshot change).
func (w *Worker) harvestFast() {
	w.fastHarvested = w.now
	s := w.snap
	if s == nil {
		return
	}
	for len(w.fastSeen) < len(w.c.Backends) {
		w.fastSeen = append(w.fastSeen, [2]uint64{})
	}
	for ref := range w.c.Backends {
		p, b, ok := w.fast.Forwarded(uint32(ref))
		if !ok {
			break // references from here on are not counted
		}
		seen := &w.fastSeen[ref]
		dp, db := p-seen[0], b-seen[1]
		if dp == 0 && db == 0 {
			continue
		}
		seen[0], seen[1] = p, b
		w.c.Backends[ref].Packets += dp
		w.c.Backends[ref].Bytes += db
		if ref < len(s.backends) && s.backends[ref].live {
			c := &w.c.VIPs[s.vips[s.backends[ref].vip].id]
			c.Packets += dp
			c.Bytes += db
		}
	}
}

// stateFlags are the TCP flags that change a flow's conntrack state; the
// fast path leaves segments with any of them to the pipeline.
const stateFlags = packet.TCPFlagSYN | packet.TCPFlagFIN | packet.TCPFlagRST

// offerFast hands the flow of p, which forwardClean just translated (NAT)
// or encapsulated (DSR, IPIP) to backend b (ref) on port out with flags
// its TCP flags, to the fast path
// when the fast path may forward the flow's next packets alone: a flow
// conntrack found (not one this packet created, nor one that moved to
// another backend), not closing, this packet without stateFlags, of a VIP
// without previous-owner hints, arriving on the ingress port. So a TCP
// connection's handshake ACK is the first packet offered, a UDP flow's
// second datagram.
//
// What the packets the fast path forwards would have done here is only to
// renew the flow's conntrack entry and raise its proof level (conntrack's
// State: a later tick's packet). The fast path's entry expires after
// fast_path_refresh, shorter than every timeout of the states this
// admits (validated in package config): the first packet after that comes
// here, does both, and renews the entry. A segment that changes the
// state (FIN, RST, SYN) always comes here; after a FIN the flow is
// Closing and no longer offered, and its entry serves at most a refresh
// more, within the closing timeout, for the backend conntrack still pins.
func (w *Worker) offerFast(d *Desc, p *pkt, v *vip, b *backend, ref uint32, out uint8, flags uint8) {
	if w.lastState == 0 || w.lastState == conntrack.StateClosing ||
		flags&stateFlags != 0 || v.prev != nil || d.RxPort != PortIngress || ref >= MaxFastRef {
		return
	}
	f := &w.fastFlow
	ip := (*[packet.IPv4MinSize]byte)(p.l3)
	// The header is translated already: the destination was the VIP's
	// address, which classify found v by.
	f.Src, f.Dst = [4]byte(ip[12:16]), v.addr4
	f.SrcPort, f.DstPort, f.Proto = p.key.SrcPort, p.key.DstPort, p.f.Proto
	f.Gen = w.snap.gen
	f.Addr, f.MACs = b.addr4, b.macs
	mtu := w.snap.mtu[out]
	if f.Encap = v.mode == ModeDSR; f.Encap {
		f.Port, f.IPSum, f.L4Sum = 0, 0, 0
		f.EncapSrc, f.OuterSum = v.encap4, encap.Outer4Sum(packet.ProtoIPIP, v.encap4, b.addr4)
		mtu -= v.over
	} else {
		f.Port = b.port
		f.IPSum, f.L4Sum = nat.DNAT4Sums(b.dnat4, p.key.DstPort, b.port)
		f.EncapSrc, f.OuterSum = [4]byte{}, 0
	}
	f.MaxLen = uint16(min(mtu, 0xffff))
	f.RxPort, f.TxPort, f.Backend = d.RxPort, out, ref
	if w.fast.Offer(f) {
		w.c.FastOffered++
		w.fastPending = true
	}
}

// flushFast hands the flows offered during the batch to the fast path.
func (w *Worker) flushFast() {
	w.fastPending = false
	if err := w.fast.Flush(); err != nil {
		w.c.FastFlushErrors++
	}
}
