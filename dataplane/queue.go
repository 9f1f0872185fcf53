package dataplane

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/vipd/vipd/conntrack"
	"github.com/vipd/vipd/internal/procs"
)

// Queue is one NIC queue as a driver presents it to a worker. A queue is
// used by exactly one goroutine. The batch contract:
//
//   - Receive fills descs[:n] with received frames (Buf with at least
//     Headroom free before Off, RxPort set) and returns n. It waits at most
//     timeout for the first frame; n == 0 means none arrived.
//   - The worker then runs the pipeline on every desc, using the queue as
//     the batch's Emitter for extra frames.
//   - Transmit takes back the batch — exactly descs[:n] of the preceding
//     Receive, in the same order, before the next Receive (drivers keep
//     per-position bookkeeping): frames with verdict TX or Reply are sent
//     on their Port, frames for the kernel are handed to it where the
//     driver can (else counted by the driver and dropped), the rest are
//     recycled; then the emitted frames are sent. After Transmit the descs'
//     buffers belong to the driver again.
//
// After Close, every call returns an error wrapping net.ErrClosed.
type Queue interface {
	Emitter
	Receive(descs []Desc, timeout time.Duration) (int, error)
	Transmit(descs []Desc) error
	Close() error
}

// FrameSizeFor returns the frame size a driver opens with for interfaces
// of these MTUs, given its MaxFrame and FrameOverhead (what a frame adds
// to its packet there): 2048 when a frame of each fits (MTU 1774 and
// below with AF_XDP, 1836 with AF_PACKET), else 4096, the largest (an
// AF_XDP frame may not span pages). Smaller frames spread a ring's frames
// over half as many pages: docs/performance-log.md, "Frame size, measured".
func FrameSizeFor(maxFrame func(frameSize int) int, overhead int, mtus ...int) int {
	for _, m := range mtus {
		if m+overhead > maxFrame(2048) {
			return 4096
		}
	}
	return 2048
}

// Snapshots is where workers find the current snapshot.
type Snapshots = atomic.Pointer[Snapshot]

// epoch is the origin of the monotonic clock workers give Begin.
var epoch = time.Now()

// Nanotime returns monotonic nanoseconds since process start, the clock of
// Worker.Begin.
func Nanotime() int64 { return int64(time.Since(epoch)) }

// Run is a worker's loop: receive a batch, run the pipeline on it, hand it
// back, until ctx is done or the queue fails. The snapshot is read once per
// batch. pollTimeout bounds how long an idle worker waits, so that it
// notices ctx and publishes counters.
func (w *Worker) Run(ctx context.Context, q Queue, snaps *Snapshots, batch int, pollTimeout time.Duration) error {
	descs := make([]Desc, batch)
	w.pkts = make([]pkt, batch)
	var y procs.Yielder
	for ctx.Err() == nil {
		n, err := q.Receive(descs, pollTimeout)
		if err != nil {
			return err
		}
		relayed := w.relayPending()
		if n == 0 && !relayed {
			// Idle: a flow count advances 64 steps at a time; busy, one
			// step (countStep buckets) per batch, so that the count never
			// holds up forwarding for long.
			w.serveCount(64)
			// Idle: keep expiry going and what others read fresh,
			// per-backend counters included (a snapshot may have
			// reused a backend reference: resize restarts its counters).
			if s := snaps.Load(); s != nil {
				w.adopt(s)
			}
			w.now = Nanotime()
			w.ct.AdvanceIdle(conntrack.Tick(w.now / int64(time.Second)))
			w.Publish()
			continue
		}
		w.serveCount(1)
		w.Begin(snaps.Load(), Nanotime(), q)
		if relayed {
			// ICMP errors other workers handed on, before this batch's
			// frames; what they send leaves through this Transmit.
			w.serveRelays()
		}
		w.ProcessBatch(descs[:n])
		if n > 0 {
			w.End(n)
		}
		if err := q.Transmit(descs[:n]); err != nil {
			return err
		}
		if w.fastPending {
			// After the batch left: the flows' entries cost a system
			// call, which the batch's frames need not wait for.
			w.flushFast()
		}
		y.Busy(w.now) // keeps the runtime's monitor asleep: procs.Yielder
	}
	w.Publish()
	if errors.Is(ctx.Err(), context.Canceled) {
		return nil
	}
	return ctx.Err()
}
