package dataplane

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vipd/vipd/conntrack"
	"github.com/vipd/vipd/dataplane/ipfrag"
)

// Headroom is the space a driver must leave free before each received frame
// (Desc.Off >= Headroom): the pipeline prepends up to 40 bytes of outer IPv6
// header plus an Ethernet header with a VLAN tag, or builds an ICMP reply in
// front of the packet it quotes. AF_XDP gives 256 bytes (XDP_PACKET_HEADROOM).
const Headroom = 128

// Desc is one frame handed to the pipeline, and the verdict it gets back.
type Desc struct {
	// Buf is the frame's storage; the frame is Buf[Off:Off+Len]. The
	// pipeline rewrites in place and may move Off back to prepend headers
	// (never before 0) and change Len.
	Buf    []byte
	Off    int
	Len    int
	RxPort uint8

	// Set by Process.
	Verdict Verdict
	Port    uint8      // transmit port for VerdictTX and VerdictReply
	Reason  DropReason // for VerdictDrop
}

// Set makes d the received frame buf[off:off+n] from port, with no
// verdict. A driver fills its batch with it rather than with
// descs[i] = Desc{...}: the compiler builds such a literal on the stack
// and copies it in 16-byte moves, and each move's load waits for the
// narrower stores of the fields it spans to reach the cache (a failed
// store-to-load forward, a dozen cycles per frame).
func (d *Desc) Set(buf []byte, off, n int, port uint8) {
	d.Buf, d.Off, d.Len, d.RxPort = buf, off, n, port
	d.Verdict, d.Port, d.Reason = 0, 0, 0
}

// Emitter gives the pipeline frames beyond the one it was handed, for the
// fragments of a packet too big for the egress MTU whose DF bit is clear.
type Emitter interface {
	// Alloc returns storage for one frame to be sent on port, to be built
	// at buf[off:]; off leaves Headroom free. ok is false when no frame is
	// free. (Drivers with per-port frame pools, like AF_XDP's UMEMs, take
	// the frame from the port's own.)
	Alloc(port uint8) (buf []byte, off int, ok bool)
	// Emit queues buf[off:off+n], a frame Alloc returned, for transmission
	// on port. Frames are sent in the order emitted, after the batch.
	Emit(buf []byte, off, n int, port uint8)
}

// WorkerOptions tune a Worker.
type WorkerOptions struct {
	// ICMPRate is how many ICMP messages (frag-needed, packet too big,
	// echo replies) one worker may send per second; ICMPBurst how many at
	// once. Defaults: 1000 and 50.
	ICMPRate  int
	ICMPBurst int
	// PublishEvery is how often End publishes counters for other
	// goroutines. Default 100 ms.
	PublishEvery time.Duration
	// Neighbors is where workers learn the MACs of clients on the ingress
	// subnets; the daemon gives all workers the same one. nil: a private
	// cache.
	Neighbors *NeighborCache
	// Relay lets workers hand each other ICMP errors about flows they do
	// not hold (see relay.go); the daemon gives all workers the same one,
	// made for their number. nil: every worker steers such errors alone.
	Relay *Relay
	// Load is where the control plane publishes the active flows per
	// backend that the load-aware schedulers read (sched.go); the daemon
	// gives all workers the same one. nil: a worker counts only its own
	// new flows.
	Load *LoadBoard
	// Stopwatch keeps the start times of TCP handshakes in progress
	// (handshake.go); the daemon gives all workers the same one, since a
	// NAT backend's SYN-ACK may reach another worker than the client's
	// SYN. nil: a private one of DefaultStopwatchSlots.
	Stopwatch *Stopwatch
}

// Worker runs the pipeline for one NIC queue. It owns its conntrack shard
// and its counters; nothing in it is shared with other workers, and all of
// its methods except Published must be called from one goroutine.
type Worker struct {
	snap   *Snapshot
	ct     *conntrack.Shard
	emit   Emitter
	now    int64 // nanoseconds, from Begin: the pipeline never reads a clock
	icmp   limiter
	neigh  *NeighborCache
	watch  *Stopwatch
	c      Counters
	epochs []uint32 // per ref: the backend c.Backends counts (syncCounters)
	frag   ipfrag.Fragmenter
	l4Tick uint32 // NAT'ed packets seen, for sampleL4
	// hint is the previous owner (an index into the VIP's prevAddr4 or
	// prevAddr6) of the packet being forwarded, -1 for none: set by track
	// for a client packet it finds a previous owner for, reset by act for
	// every packet, read by the DSR encapsulation.
	hint int32
	// quic is the worker's QUIC-LB scratch (quic.go): the server ID a
	// decode found, and the AES buffers, kept here so that nothing a
	// decode touches escapes to the heap per packet.
	quic quicScratch

	// What classify found for each frame of the batch (ProcessBatch), and
	// for a frame processed alone (Process, relayed errors).
	pkts []pkt
	one  pkt
	// prefetch is how many prefetch passes ProcessBatch makes: 3 (bucket
	// metadata, records, records in alternate buckets), as measured best;
	// BenchmarkPrefetch compares 0-3.
	// It makes none while the shard holds fewer than prefetchMin flows:
	// their buckets stay in the CPU's caches, and the passes would cost
	// instructions for nothing (BenchmarkPrefetch).
	prefetch, prefetchMin int
	// newFlows is set when nearly all tracked packets of the last batch
	// (over 8 in 9) were new flows (conntrack misses): the next batch
	// then makes at most newFlowPasses passes (1: the bucket pass). The
	// record passes find no record to load for a new flow, and their
	// reads of bucket lines still on their way cost a flood of new flows
	// (SYNs, a port scan) more than they save (BenchmarkPrefetch,
	// new-flows rows).
	newFlows      bool
	newFlowPasses int
	// noCommon turns classifyCommon (and so forwardClean) off: tests hold
	// the shortcuts to the general path's verdicts, bytes and counters.
	noCommon bool
	sink     uint8 // folds the frame prefetch loads, so they stay

	// The ICMP relay (relay.go): this worker's index and inbox, the worker
	// that received the frame in process (id for the worker's own frames),
	// and room to work on a frame from the inbox.
	relay   *Relay
	id      int
	inbox   *inbox
	origin  int
	scratch []byte

	publishEvery int64
	lastPublish  int64
	pub          atomic.Pointer[Counters]

	countMu  sync.Mutex // one flow count at a time
	countReq atomic.Pointer[flowCount]

	listMu  sync.Mutex // one flow listing at a time (conns.go)
	listReq atomic.Pointer[flowList]

	// sch is the schedulers' state (sched.go).
	sch schedState

	// The fast path (dataplane/fast.go): where established flows go, nil for
	// none; the conntrack state track found the last flow in before its
	// packet (0 for a new or re-picked flow); room to describe a flow;
	// whether flows were offered since the last flush.
	fast        FastPath
	fast6       bool // fast takes IPv6 flows
	lastState   conntrack.State
	fastFlow    FastFlow
	fastPending bool
	// lastOffer is the flow last offered per receive port, at
	// lastOfferAt (w.now): see offer.
	lastOffer   [2]FastFlow
	lastOfferAt [2]int64

	// memo4 and memo6 are the last IPv4 flow flow4 hashed and the last
	// IPv6 flow classify6 did.
	memo4 flowMemo[uint32]
	memo6 flowMemo[[16]byte]
	// serials counts the flows the memos have held, both families: a
	// flow's serial names it to lookup's memo (hit), so no two flows,
	// IPv4 or IPv6, may share one.
	serials uint64
	// hit is the entry of the last lookup that found its flow, the
	// flow's serial and the shard's epoch then: see lookup.
	hit struct {
		e             conntrack.Entry
		serial, epoch uint64
	}
	// fastHarvest: this worker adds the fast path's counts to its
	// counters (harvestFast), last at fastHarvested (w.now), having seen
	// fastSeen[ref] (packets, bytes) of each backend reference's
	// clients and fastSeenOut[ref] of its NAT replies by then.
	fastHarvest   bool
	fastHarvested int64
	fastSeen      [][2]uint64
	fastSeenOut   [][2]uint64
}

// flowCount is a request for the live flows per backend reference, served
// by the worker between batches in bounded steps.
type flowCount struct {
	dst  map[uint32]int
	next int
	done chan struct{}
}

// countStep is how many conntrack buckets (8 flows each) a worker counts
// between two batches.
const countStep = 1024

// CountFlows returns the worker's live flows per backend reference. It may
// be called from any goroutine while the worker runs (Run); the worker
// walks its shard in steps between batches, so the answer takes a while on
// a big table and is a gauge: flows created or ended meanwhile may be
// missed or counted twice.
func (w *Worker) CountFlows(ctx context.Context) (map[uint32]int, error) {
	w.countMu.Lock()
	defer w.countMu.Unlock()
	r := &flowCount{dst: map[uint32]int{}, done: make(chan struct{})}
	w.countReq.Store(r)
	select {
	case <-r.done:
		return r.dst, nil
	case <-ctx.Done():
		// Withdraw r. A worker already in a step on it finishes that
		// step on r's own map, which nobody reads any more.
		w.countReq.CompareAndSwap(r, nil)
		return nil, ctx.Err()
	}
}

// serveCount advances a pending flow count by up to steps steps.
func (w *Worker) serveCount(steps int) {
	w.serveList(steps)
	r := w.countReq.Load()
	if r == nil {
		return
	}
	for i := 0; i < steps; i++ {
		r.next = w.ct.CountByBackend(r.dst, r.next, countStep)
		if r.next == 0 || w.countReq.Load() != r {
			w.countReq.CompareAndSwap(r, nil)
			close(r.done)
			return
		}
	}
}

// NewWorker returns a worker that tracks flows in ct.
func NewWorker(ct *conntrack.Shard, opts WorkerOptions) *Worker {
	if opts.ICMPRate <= 0 {
		opts.ICMPRate = 1000
	}
	if opts.ICMPBurst <= 0 {
		opts.ICMPBurst = 50
	}
	if opts.PublishEvery <= 0 {
		opts.PublishEvery = 100 * time.Millisecond
	}
	if opts.Neighbors == nil {
		opts.Neighbors = NewNeighborCache(1024)
	}
	w := &Worker{ct: ct, publishEvery: int64(opts.PublishEvery), neigh: opts.Neighbors, prefetch: 3, prefetchMin: prefetchMinFlows, newFlowPasses: 1}
	if r := opts.Relay; r != nil && len(r.inboxes) > 1 {
		if id := r.join(); id >= 0 {
			w.relay, w.id, w.origin, w.inbox = r, id, id, r.inboxes[id]
			w.scratch = make([]byte, Headroom+relayFrameMax)
		}
	}
	w.icmp = newLimiter(opts.ICMPRate, opts.ICMPBurst)
	w.sch.board = opts.Load
	if w.watch = opts.Stopwatch; w.watch == nil {
		w.watch = NewStopwatch(DefaultStopwatchSlots)
	}
	w.pub.Store(w.c.clone())
	return w
}

// flowMemo is a flow a worker hashed, with its hashes and location: the
// client's address (A: IPv4 or IPv6), and its ports, VIP id and protocol
// in tag (a zero tag is no flow's: a flow's protocol is 6 or 17). The VIP
// id stands for the destination, the VIP's one address.
type flowMemo[A uint32 | [16]byte] struct {
	src    A
	tag    uint64
	h, hp  uint64
	loc    conntrack.Loc
	serial uint64 // the flow's: see Worker.serials
}

// Begin starts a batch: it adopts the current snapshot, the batch's time
// (nanoseconds on a monotonic clock; conntrack ticks are whole seconds of
// it) and the emitter for extra frames (nil: fragments cannot be made and
// such packets are dropped as no_tx_frame). It also does the conntrack
// shard's bounded expiry work.
func (w *Worker) Begin(snap *Snapshot, now int64, emit Emitter) {
	w.adopt(snap)
	w.sch.adopt(snap, false) // the latest published load
	w.now = now
	w.emit = emit
	w.ct.Advance(conntrack.Tick(now / int64(time.Second)))
}

// adopt makes snap the worker's snapshot, with what it keeps per VIP and
// backend resized to it: Begin and an idle Run both come here, so that no
// path takes a snapshot the worker's per-reference arrays do not cover.
func (w *Worker) adopt(snap *Snapshot) {
	if snap == w.snap {
		return
	}
	w.resize(snap)
	w.sch.adopt(snap, true)
	w.snap = snap
	w.memo4.tag, w.memo6.tag = 0, 0 // their hashes are of the old seed
	for i := range w.pkts {
		w.pkts[i].v = nil // let the old snapshot go: a slot past the batches to come would pin it
	}
}

// resize grows the per-VIP and per-backend counters to cover snap. It runs
// once per snapshot change, never per packet.
func (w *Worker) resize(snap *Snapshot) {
	for len(w.c.VIPs) <= snap.maxVIPID {
		w.c.VIPs = append(w.c.VIPs, FlowCounters{})
	}
	w.c.Backends, w.epochs = snap.syncCounters(w.c.Backends, w.epochs)
}

// End closes a batch of n frames and, every PublishEvery, publishes a copy
// of the counters for Published.
func (w *Worker) End(n int) {
	w.c.Batches++
	w.c.BatchFrames += uint64(n)
	b := 0
	for b < len(w.c.BatchSizes)-1 && n > 1<<b {
		b++
	}
	w.c.BatchSizes[b]++
	if w.now-w.lastPublish >= w.publishEvery {
		w.Publish()
	}
}

// Publish makes the current counters visible to Published.
func (w *Worker) Publish() {
	if w.fastHarvest && w.now-w.fastHarvested >= fastHarvestEvery {
		w.harvestFast()
	}
	w.lastPublish = w.now
	w.pub.Store(w.c.clone())
}

// Counters returns the worker's live counters; only the worker's goroutine
// may read them.
func (w *Worker) Counters() *Counters { return &w.c }

// Published returns the counters as of the last publication. It is safe to
// call from any goroutine; the result must not be modified.
func (w *Worker) Published() *Counters { return w.pub.Load() }

// Shard returns the worker's conntrack shard.
func (w *Worker) Shard() *conntrack.Shard { return w.ct }

func (w *Worker) drop(d *Desc, r DropReason) {
	d.Verdict = VerdictDrop
	d.Reason = r
	w.c.Verdicts[VerdictDrop]++
	w.c.Drops[r]++
}

func (w *Worker) tx(d *Desc, port uint8) {
	d.Verdict = VerdictTX
	d.Port = port
	w.c.Verdicts[VerdictTX]++
}

func (w *Worker) reply(d *Desc, port uint8) {
	d.Verdict = VerdictReply
	d.Port = port
	w.c.Verdicts[VerdictReply]++
	w.c.ICMPSent++
}

func (w *Worker) kernel(d *Desc) {
	d.Verdict = VerdictKernel
	w.c.Verdicts[VerdictKernel]++
}

// limiter is a GCRA token bucket: tat is the theoretical arrival time of
// the next conforming message; a message conforms if tat is at most
// (burst-1) intervals ahead of now.
type limiter struct {
	interval int64
	slack    int64
	tat      int64
}

func newLimiter(rate, burst int) limiter {
	iv := int64(time.Second) / int64(rate)
	return limiter{interval: iv, slack: int64(burst-1) * iv}
}

func (l *limiter) allow(now int64) bool {
	tat := max(l.tat, now)
	if tat-now > l.slack {
		return false
	}
	l.tat = tat + l.interval
	return true
}

// countVIP counts a packet of n IP bytes from a client to VIP v.
func (w *Worker) countVIP(v *vip, n int) {
	c := &w.c.VIPs[v.id]
	c.Packets++
	c.Bytes += uint64(n)
}

// countReply counts a NAT reply of n IP bytes from backend ref of VIP v
// (ref < 0: a later fragment, whose backend is not known: the VIP's
// alone).
func (w *Worker) countReply(v *vip, ref int32, n int) {
	c := &w.c.VIPs[v.id]
	c.OutPackets++
	c.OutBytes += uint64(n)
	if ref >= 0 {
		c := &w.c.Backends[ref]
		c.OutPackets++
		c.OutBytes += uint64(n)
	}
}

// count counts a packet of n IP bytes sent to backend ref of VIP v.
func (w *Worker) count(v *vip, ref uint32, n int) {
	w.countVIP(v, n)
	c := &w.c.Backends[ref]
	c.Packets++
	c.Bytes += uint64(n)
}
