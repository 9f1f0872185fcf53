package daemon

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/vipd/vipd/dataplane"
)

// beatQueue stamps the time on its queue's Receive: a worker calls
// Receive once per loop iteration, busy or idle (an idle one returns after
// the poll timeout), so a stamp older than a few poll timeouts means the
// worker is stuck. A busy worker stamps every beatEvery-th Receive only:
// a stamp costs a clock read and a locked store, once per batch otherwise,
// and beatEvery batches take milliseconds at most, far below the poll
// timeouts that Stalled's ages are made of. The Receive after an idle one
// (no frame) stamps, so an idle worker stamps every time.
type beatQueue struct {
	dataplane.Queue
	at    *atomic.Int64 // dataplane.Nanotime of the last stamp
	since int           // Receives since the last stamp
	idle  bool          // the last Receive returned no frame
}

// beatEvery is how many Receives of a busy worker one stamp covers.
const beatEvery = 64

func (q *beatQueue) Receive(descs []dataplane.Desc, timeout time.Duration) (int, error) {
	if q.since++; q.idle || q.since >= beatEvery {
		q.at.Store(dataplane.Nanotime())
		q.since = 0
	}
	n, err := q.Queue.Receive(descs, timeout)
	q.idle = n == 0
	return n, err
}

// newBeats returns one stamp per worker, each set to now.
func newBeats(n int) []atomic.Int64 {
	beats := make([]atomic.Int64, n)
	now := dataplane.Nanotime()
	for i := range beats {
		beats[i].Store(now)
	}
	return beats
}

// Stalled returns the workers (by queue index) that have not started a
// loop iteration for longer than maxAge; none before the workers run.
func (d *Daemon) Stalled(maxAge time.Duration) []int {
	d.mu.Lock()
	beats := d.beats
	d.mu.Unlock()
	var stalled []int
	now := dataplane.Nanotime()
	for i := range beats {
		if now-beats[i].Load() > int64(maxAge) {
			stalled = append(stalled, i)
		}
	}
	return stalled
}

// stallTimeout is how long a worker may go without starting a loop
// iteration before watchStalls takes it for stalled. An idle worker
// starts one every poll timeout (100 ms by default) and a busy one stamps
// every beatEvery batches, milliseconds apart; two seconds leave room for
// a loaded machine's scheduling and a garbage collection, and are still
// far shorter than the hold time a router waits before it notices a dead
// box on its own.
const stallTimeout = 2 * time.Second

// stallCheckEvery is how often watchStalls looks for a stall of more
// than after: a stall is noticed within after plus a quarter of it.
func stallCheckEvery(after time.Duration) time.Duration { return max(after/4, time.Millisecond) }

// watchStalls withdraws every route and fails readiness while a worker
// makes no progress, and undoes both when every worker does again. A
// stalled worker's queue is not served: the frames that the NIC steers
// to it wait, or are dropped, while routers and load balancers in front
// still send clients here. Ending the BGP sessions would be wrong (the
// box comes back without a restart when the worker does), so the routes
// are withdrawn and the sessions stay.
func (d *Daemon) watchStalls() {
	s := d.Stalled(d.stallAfter)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.phase != phaseRunning || slices.Equal(s, d.box.stalled) {
		return
	}
	switch {
	case len(s) > 0:
		d.log.Error("workers make no progress: withdrawing every route and failing readiness", "workers", s, "for_more_than", d.stallAfter)
	default:
		d.log.Warn("every worker makes progress again: announcing and ready again", "were_stalled", d.box.stalled)
	}
	if len(s) > 0 {
		d.stallEvents.Add(1)
	}
	d.box.stalled = s
	d.updateRoutesLocked()
}

// Notifier is the service manager's end of readiness and the watchdog
// (sdnotify.Notifier).
type Notifier interface {
	Send(state string) error
}

// Notify tells n READY=1 once the workers run (the XDP program is attached
// by then: the platform attaches it when it opens the queues) and the
// first round of health checks is over (FirstRoundDone), then, while
// watchdog is not 0, WATCHDOG=1 every watchdog/2 as long as no worker
// stalled for longer than that. A stalled worker stops the feed, so that
// systemd restarts a box that no longer forwards. Notify returns when ctx
// is done or Run gave up before the workers ran.
func (d *Daemon) Notify(ctx context.Context, n Notifier, watchdog time.Duration) {
	every := watchdog / 2
	var tick <-chan time.Time
	if every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
		// Until the workers run, the start itself is fed: it may wait for
		// the host (firstHostWait) longer than a short WatchdogSec.
		n.Send("WATCHDOG=1")
	}
	running := d.Running()
	for {
		select {
		case <-ctx.Done():
			return
		case <-running:
			running = nil
			if !d.serving() {
				return // Run failed or stops: never ready
			}
			// Ready after the first round of health checks (bounded):
			// no backend takes flows before its first verdict. The
			// watchdog is fed meanwhile.
			d.waitFirstRoundFed(ctx, n, every)
			if ctx.Err() != nil || !d.serving() {
				return
			}
			if err := n.Send("READY=1\nSTATUS=forwarding"); err != nil {
				d.log.Warn("systemd notification failed", "err", err)
			}
		case <-tick:
			if s := d.Stalled(every); len(s) > 0 {
				d.log.Error("workers make no progress: not feeding the systemd watchdog", "workers", s, "for_more_than", every)
				continue
			}
			n.Send("WATCHDOG=1")
		}
	}
}
