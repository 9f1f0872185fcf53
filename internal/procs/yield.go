package procs

import (
	"runtime"
	"time"
)

// YieldEvery is how often a busy worker passes through the scheduler
// (Yielder): half the runtime's 10 ms preemption slice, so that the
// monitor never finds the worker's slice expired however its samples fall.
const YieldEvery = 5 * time.Millisecond

// Yielder makes a busy worker goroutine yield its P every YieldEvery.
//
// Why: the runtime's monitor thread (sysmon) preempts a goroutine that
// has run for 10 ms without passing through the scheduler. A worker locked
// to its thread never does by itself, so every 10 ms the monitor asks it
// to stop, or, when the worker is in poll or sendto at that moment, takes
// its P away. Either way the monitor counts the round as work done and
// drops back to waking every 20 µs, backing off again only over the next
// few milliseconds: thousands of wake-ups a second, each a context switch
// on whatever CPU the monitor lands on — with one CPU for the box, the
// worker's own. A yield every 5 ms keeps the worker's slice fresh, and the
// monitor sleeps its full 10 ms. It costs the worker a hand-off of its P
// and back (a locked goroutine yields by parking its thread), a few
// microseconds 200 times a second. Measured on the bench's box-limited
// rig: docs/performance-log.md, "The runtime's monitor, measured".
//
// The zero value is ready; one per worker, owner only.
type Yielder struct {
	last int64
	// yield is runtime.Gosched, a field so that tests count the yields.
	yield func()
}

// Busy is called once per batch with the worker's clock in nanoseconds
// (any monotonic origin): it yields when YieldEvery has passed since the
// last yield, or since the first call.
func (y *Yielder) Busy(now int64) {
	if y.last == 0 {
		y.last = now
		return
	}
	if now-y.last < int64(YieldEvery) {
		return
	}
	y.last = now
	if y.yield != nil {
		y.yield()
		return
	}
	runtime.Gosched()
}
