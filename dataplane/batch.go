package dataplane

import (
	"github.com/vipd/vipd/conntrack"
	"github.com/vipd/vipd/packet"
)

// pkt is what the first stage of the pipeline (classify) learns about a
// frame for the second (act). A worker keeps one per frame of its largest
// batch, so nothing is allocated per packet.
type pkt struct {
	f packet.Frame
	// err is Parse's error when is has isMalformed, and then nothing
	// below is set; otherwise it is stale (not cleared per frame: an
	// interface store costs a write barrier check).
	err error
	// l3 is the IP packet (f.L3 of the frame) when f.EtherType is IPv4 or
	// IPv6: sliced once here rather than in every stage.
	l3 []byte
	// eth is the frame's Ethernet header, set with isClean only (whose
	// frames are untagged).
	eth *[packet.EthernetSize]byte
	// v is the VIP vi names (&Snapshot.vips[vi]), set by classifyCommon
	// and read with isClean only: classify had it in hand, and indexing
	// again costs a bounds check and a multiply. Worker.adopt clears it
	// when the snapshot changes.
	v *vip
	// vi is the VIP the packet is for (an index into Snapshot.vips),
	// empty if none, or ambiguous (a non-first fragment for an address
	// several VIPs of its protocol share).
	vi int32
	// is holds what classify found besides: isTracked, isSrcVIP (known
	// when vi >= 0), isDstVIP (known when vi is empty), isMapped,
	// isMalformed.
	is uint8
	// isTracked: the packet belongs to a flow conntrack tracks (TCP or UDP,
	// not a fragment, for VIP vi), whose key and hashes follow. h is the
	// 5-tuple hash (conntrack's), hp the one Maglev picks by (h, or the
	// source hash of a VIP with source affinity). A fragment for VIP vi is
	// not tracked and has only hp, from addresses and protocol (or the
	// source alone), so that all of a datagram's fragments pick alike.
	h, hp uint64
	loc   conntrack.Loc // of h in the worker's shard
	key   conntrack.Key
	// serial names the flow among those the memos (flow4's, classify6's)
	// held: the same serial, the same key. See Worker.lookup.
	serial uint64
}

// prefetchMinFlows is the shard size below which ProcessBatch makes no
// prefetch passes: 4096 flows touch at most 8192 cache lines (512 KiB) of
// the table, which stay cached between their packets on a server CPU.
const prefetchMinFlows = 4096

// Bits of pkt.is.
const (
	isTracked uint8 = 1 << iota // a flow conntrack tracks: key, h, hp and loc are set
	isSrcVIP                    // the source is a VIP address (spoofed)
	isDstVIP                    // the destination is a VIP address
	isMapped                    // an IPv4-mapped IPv6 address, which nothing classifies
	isAlt                       // no tag matched in the primary bucket: prefetch went to the alternate
	// isClean: for VIP vi, IPv4 with a valid header checksum, from an
	// address that is no VIP's; set by classifyCommon, whose frames ip
	// would forward straight away.
	isClean
	isMalformed // Parse failed: err says why, nothing else is set
)

// ProcessBatch runs the pipeline on every frame of a batch, in passes: it
// touches every frame's headers, classifies every frame (parse, VIP, flow
// key and hash), starts loading each tracked flow's conntrack bucket and
// then its record (prefetch passes, from prefetchMinFlows live flows on),
// and only then looks the flows up and decides, frame by frame (act). On a
// table larger than the CPU's caches a lookup waits for memory; the passes
// let those loads overlap across the batch rather than wait one after the
// other. Verdicts are those Process would give each frame in turn: the
// passes before act read nothing act writes.
func (w *Worker) ProcessBatch(descs []Desc) {
	if len(descs) > len(w.pkts) {
		w.pkts = make([]pkt, len(descs)) // once per larger batch, not per packet
	}
	pk := w.pkts[:len(descs)]
	// Start loading every frame's first cache line (its headers) before
	// parsing any: a driver's frames were written by the kernel, often on
	// another core, and the first read of each would wait for it.
	var sink byte // in a register: w.sink's load and store once per batch
	for i := range descs {
		if d := &descs[i]; d.Len > 0 {
			sink += d.Buf[d.Off]
		}
	}
	w.sink += sink
	w.c.RxFrames += uint64(len(descs))
	for i := range descs {
		d := &descs[i]
		w.c.RxBytes += uint64(d.Len)
		w.classify(d, &pk[i])
	}
	// The prefetch passes are tight loops of their own, not part of
	// classify: what keeps a load from stalling the CPU is room in its
	// reorder window for the loads after it, and a pass of a few
	// instructions per frame leaves room for a batch's worth.
	passes := w.prefetch
	if w.ct.Live() < w.prefetchMin {
		passes = 0
	} else if w.newFlows {
		passes = min(passes, w.newFlowPasses)
	}
	hits, misses := w.c.FlowHits, w.c.FlowMisses
	if passes >= 1 {
		for i := range pk {
			if pk[i].is&isTracked != 0 {
				w.ct.Prefetch(pk[i].loc)
			}
		}
	}
	if passes >= 2 {
		alt := false
		for i := range pk {
			if pk[i].is&isTracked != 0 && w.ct.PrefetchRecord(pk[i].loc) {
				pk[i].is |= isAlt
				alt = true
			}
		}
		if alt && passes >= 3 {
			for i := range pk {
				if pk[i].is&isAlt != 0 {
					w.ct.PrefetchAltRecord(pk[i].loc)
				}
			}
		}
	}
	for i := range descs {
		w.act(&descs[i], &pk[i])
	}
	// Over 8 new flows to a known one: below that the record passes'
	// gain on the known flows (at 1M flows, ~180 ns each) outweighs
	// their cost on the new ones (~20 ns each; BenchmarkPrefetch).
	w.newFlows = w.c.FlowMisses-misses > 8*(w.c.FlowHits-hits)
}
