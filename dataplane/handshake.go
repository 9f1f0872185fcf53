package dataplane

import (
	"encoding/binary"
	"math/bits"
	"sync/atomic"

	"github.com/vipd/vipd/conntrack"
)

// A TCP handshake's outcome and time, per backend.
//
// Outcome: FlowCounters.Handshakes counts the flows that began with a SYN,
// Answered those the backend answered. In NAT mode the answer is the
// backend's SYN-ACK passing through vipd on its way to the client, which
// comes a client's round trip before the client's next packet and is the
// backend's doing alone: a flood of SYNs from spoofed sources that never
// go on does not make a backend look deaf. Its retransmissions count again
// (nothing keeps per-flow state on the reply path, which may be another
// worker's), so Answered can exceed Handshakes a little; readers cap the
// share at 1. In DSR mode vipd never sees the backend's replies, and the
// answer is the client's first packet past its SYNs.
//
// Time: from the SYN that began the flow to its answer, measured on the
// workers' batch clocks (Worker.now: no clock read per packet), so to
// within a batch's length, some microseconds. The start is kept in a
// Stopwatch that the workers share, because a NAT SYN-ACK may come in on
// another NIC queue than its SYN. A handshake whose slot another one took
// before it was answered yields no time (its outcome still counts), and
// one answered later than the last bucket's bound falls in +Inf.

// HandshakeBuckets are the upper bounds, in nanoseconds, of the handshake
// time histogram's buckets (FlowCounters.HandshakeTime); one more bucket
// counts the slower ones. 3 s is the default window past which a handshake
// counts as unanswered ([vip.outlier] timeout).
var HandshakeBuckets = [...]int64{
	500e3, 1e6, 2e6, 5e6, 10e6, 20e6, 50e6, 100e6, 200e6, 500e6, 1e9, 3e9,
}

// numHandshakeBuckets is len(HandshakeBuckets) plus +Inf.
const numHandshakeBuckets = len(HandshakeBuckets) + 1

// Stopwatch holds the start times of handshakes in progress, for every
// worker: a direct-mapped table of slots, each the start of one handshake
// (its flow's tag and backend ref, and the batch time of its SYN). Workers
// write and claim slots with atomic operations, so no lock is shared; a
// handshake touches one slot twice (start, stop), never on the path of
// an established flow's packets.
type Stopwatch struct {
	slots []watchSlot
	mask  uint64
}

// watchSlot is one handshake's start: tagRef is the flow's 32-bit tag in
// the high half and its backend's ref in the low half (0: free), at the
// SYN's batch time. A writer stores at, then tagRef; a reader that loads
// tagRef, then at, and then claims the slot by swapping tagRef for 0 has
// the at of that tag and ref (another start of the same flow in between
// only moves the start to its own SYN).
type watchSlot struct {
	tagRef atomic.Uint64
	at     atomic.Int64
}

// NewStopwatch returns a Stopwatch of at least n slots (a power of two;
// 16 bytes each). Its slots should outnumber the handshakes in progress
// at once over every worker (new flows per second times the handshake
// time) several times over: a slot taken by another start loses a time.
func NewStopwatch(n int) *Stopwatch {
	size := 1 << bits.Len(uint(max(n, 2)-1))
	return &Stopwatch{slots: make([]watchSlot, size), mask: uint64(size - 1)}
}

// DefaultStopwatchSlots is the size of the Stopwatch a worker makes for
// itself when WorkerOptions.Stopwatch is nil, and the daemon's: 1 MiB,
// room for some 65,000 handshakes in progress.
const DefaultStopwatchSlots = 1 << 16

// watchKey is the stopwatch's hash of a flow: the client's address and
// port and the VIP's id, which both the client's SYN (its conntrack key)
// and the backend's SYN-ACK (its destination) carry. The destination
// port is left out: a NAT reply's source is the backend's port, and a
// client connecting from one port to two ports of one VIP at once is
// rare enough to cost no more than a lost time.
func watchKey(src *[16]byte, port, vip uint16) uint64 {
	a := binary.LittleEndian.Uint64(src[:8])
	b := binary.LittleEndian.Uint64(src[8:])
	h := (a^0x243f6a8885a308d3)*0x9e3779b97f4a7c15 ^ (b^0x13198a2e03707344)*0xc2b2ae3d27d4eb4f ^
		(uint64(port)<<16|uint64(vip))*0x165667b19e3779f9
	return h ^ h>>29
}

// start records that the handshake of the flow with key k began at now on
// backend ref.
func (s *Stopwatch) start(k uint64, ref uint32, now int64) {
	sl := &s.slots[k&s.mask]
	sl.at.Store(now)
	sl.tagRef.Store(k&^0xffffffff | uint64(ref))
}

// stop claims the start of the handshake of the flow with key k on backend
// ref: ok is false when its slot holds another (or none).
func (s *Stopwatch) stop(k uint64, ref uint32) (at int64, ok bool) {
	sl := &s.slots[k&s.mask]
	want := k&^0xffffffff | uint64(ref)
	if sl.tagRef.Load() != want {
		return 0, false
	}
	at = sl.at.Load()
	return at, sl.tagRef.CompareAndSwap(want, 0)
}

// handshakeStarted records the start of a tracked flow's handshake (its
// first SYN, or a reused tuple's) on backend ref.
func (w *Worker) handshakeStarted(k *conntrack.Key, ref uint32) {
	w.c.Backends[ref].Handshakes++
	w.c.VIPs[k.VIP].Handshakes++
	w.watch.start(watchKey(&k.Src, k.SrcPort, k.VIP), ref, w.now)
}

// handshakeAnswered counts the answer to the handshake of the flow with
// stopwatch key k on backend ref of VIP vid, and its time if its start is
// still in the stopwatch.
func (w *Worker) handshakeAnswered(k uint64, vid uint16, ref uint32) {
	w.c.VIPs[vid].Answered++
	c := &w.c.Backends[ref]
	c.Answered++
	at, ok := w.watch.stop(k, ref)
	if !ok {
		return
	}
	d := max(w.now-at, 0) // two workers' batch clocks: at may be a little later
	i := 0
	for i < len(HandshakeBuckets) && d > HandshakeBuckets[i] {
		i++
	}
	c.HandshakeTime[i]++
	c.HandshakeNanos += uint64(d)
}
