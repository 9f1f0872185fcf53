package dataplane

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/vipd/vipd/conntrack"
	"github.com/vipd/vipd/internal/procs"
)

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
