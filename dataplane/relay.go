package dataplane

import (
	"sync/atomic"

	"github.com/vipd/vipd/packet"
)

// An ICMP error about a VIP flow must reach the backend that owns the flow,
// and the flow's connection-table entry lives in the shard of the worker
// whose NIC queue receives the client's packets. The error itself is
// hashed by the NIC onto any queue (its addresses are the router's and the
// VIP, not the flow's). When the receiving worker does not hold the flow,
// the worker hands the error on: around the ring of workers, each looks in
// its own shard, the one that holds the flow sends it to the pinned
// backend, and if none does the last one asks Maglev, as a worker with the
// only shard would. No worker ever reads another's shard.
//
// The hand-off goes through one bounded inbox per worker: a lock-free
// multi-producer, single-consumer ring (Vyukov's bounded queue) of
// fixed-size cells, each holding a copy of the frame. Only ICMP errors that
// miss their shard take this path; the per-batch cost for everyone else is
// one atomic load of the worker's own inbox head. A worker serves its inbox
// at the start of each batch, and after each poll timeout when idle, so an
// error waits at most one poll timeout per worker it visits. An error that
// finds the next inbox full, or that is too big for a cell, is steered by
// Maglev where it is (counted: ICMPNotRelayed).

// Relay is the ICMP hand-off shared by the workers of one process.
type Relay struct {
	inboxes []*inbox
	joined  atomic.Int32
}

// relayCells is how many frames each worker's inbox holds.
const relayCells = 64

// relayFrameMax is the largest frame (Ethernet header included) a cell
// holds: an ICMPv6 error is at most 1280 bytes (RFC 4443 §2.4 (c)), an
// ICMPv4 error usually 576 (RFC 1812 §4.3.2.3), plus a VLAN-tagged
// Ethernet header.
const relayFrameMax = 1280 + packet.EthernetSize + packet.VLANTagSize

// NewRelay returns the relay for workers workers. Each worker joins it
// through WorkerOptions.Relay, in the order NewWorker is called; a relay
// of one worker never hands anything on.
func NewRelay(workers int) *Relay {
	r := &Relay{inboxes: make([]*inbox, workers)}
	for i := range r.inboxes {
		r.inboxes[i] = newInbox(relayCells)
	}
	return r
}

// join returns the next worker index, or -1 when the relay is full.
func (r *Relay) join() int {
	i := int(r.joined.Add(1)) - 1
	if i >= len(r.inboxes) {
		return -1
	}
	return i
}

// relayCell is one frame in an inbox: a copy made by the worker that hands
// it on, with what the next worker needs to continue.
type relayCell struct {
	seq    atomic.Uint64
	n      int   // frame length
	rx     uint8 // port the frame was received on
	origin int32 // the worker that received it: the ring ends before it
	buf    [Headroom + relayFrameMax]byte
}

// inbox is a bounded MPSC queue of relay cells. Cell i's seq is i while
// free for producer position i, pos+1 once the producer at pos filled it,
// and pos+len(cells) once the consumer emptied it.
type inbox struct {
	cells []relayCell
	mask  uint64
	_     [64]byte // keep the producers' cursor off the consumer's line
	enq   atomic.Uint64
	_     [64]byte
	deq   uint64 // the consumer's own
}

func newInbox(n int) *inbox {
	q := &inbox{cells: make([]relayCell, n), mask: uint64(n - 1)}
	for i := range q.cells {
		q.cells[i].seq.Store(uint64(i))
	}
	return q
}

// push copies frame into a free cell; false when the inbox is full.
func (q *inbox) push(frame []byte, rx uint8, origin int) bool {
	pos := q.enq.Load()
	c := &q.cells[pos&q.mask]
	for {
		switch d := int64(c.seq.Load() - pos); {
		case d < 0:
			return false // the consumer has not emptied this cell yet
		case d == 0 && q.enq.CompareAndSwap(pos, pos+1):
			// The cell is this producer's until its seq is published.
			c.n = copy(c.buf[Headroom:], frame)
			c.rx, c.origin = rx, int32(origin)
			c.seq.Store(pos + 1)
			return true
		}
		// Another producer took the cell: try the next position.
		pos = q.enq.Load()
		c = &q.cells[pos&q.mask]
	}
}

// front returns the oldest filled cell, or nil; only the consumer calls it.
func (q *inbox) front() *relayCell {
	c := &q.cells[q.deq&q.mask]
	if c.seq.Load() != q.deq+1 {
		return nil
	}
	return c
}

// pop frees the cell front returned.
func (q *inbox) pop() {
	q.cells[q.deq&q.mask].seq.Store(q.deq + q.mask + 1)
	q.deq++
}

// relayPending reports whether the worker's inbox holds frames.
func (w *Worker) relayPending() bool {
	return w.inbox != nil && w.inbox.front() != nil
}

// handOn passes the ICMP error in d, which this worker's shard does not
// know, to the next worker of the ring, and reports whether it did. It
// does not when the ring ends here (every other worker has looked), when
// there is no ring, or when the next inbox is full or the frame too big.
func (w *Worker) handOn(d *Desc) bool {
	if w.relay == nil {
		return false
	}
	n := len(w.relay.inboxes)
	next := (w.id + 1) % n
	if next == w.origin {
		return false
	}
	if d.Len > relayFrameMax || !w.relay.inboxes[next].push(d.Buf[d.Off:d.Off+d.Len], d.RxPort, w.origin) {
		w.c.ICMPNotRelayed++
		return false
	}
	w.c.ICMPRelayed++
	d.Verdict = VerdictRelay
	d.Reason = DropNone
	w.c.Verdicts[VerdictRelay]++
	return true
}

// serveRelays processes the frames in the worker's inbox, within a batch
// (after Begin): each goes through the pipeline as if received here, and
// what it sends leaves through the batch's emitter.
func (w *Worker) serveRelays() {
	for k := 0; k < relayCells; k++ {
		c := w.inbox.front()
		if c == nil {
			return
		}
		w.c.ICMPRelayedIn++
		d := Desc{Buf: w.scratch[:], Off: Headroom, Len: c.n, RxPort: c.rx}
		copy(w.scratch[Headroom:], c.buf[Headroom:Headroom+c.n])
		origin := int(c.origin)
		w.inbox.pop()
		w.origin = origin
		w.process(&d)
		w.origin = w.id
		if d.Verdict != VerdictTX && d.Verdict != VerdictReply {
			continue
		}
		if w.emit == nil {
			w.c.Drops[DropNoTxFrame]++
			continue
		}
		buf, off, ok := w.emit.Alloc(d.Port)
		if !ok {
			w.c.Drops[DropNoTxFrame]++
			continue
		}
		n := copy(buf[off:], d.Buf[d.Off:d.Off+d.Len])
		w.emit.Emit(buf, off, n, d.Port)
	}
}
