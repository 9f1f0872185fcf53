package dataplane

import (
	"context"

	"github.com/vipd/vipd/conntrack"
)

// flowList is a request for a copy of the worker's live flows, served by
// the worker between batches in bounded steps, like flowCount.
type flowList struct {
	keep   func(*conntrack.Flow) bool
	most   int
	chunks [][]conntrack.Flow // full chunks, then the one being filled
	n      int                // flows in chunks
	next   int
	now    conntrack.Tick // the shard's clock when the listing ended
	done   chan struct{}
}

// listStep is how many conntrack buckets (8 flows each) a worker scans
// between two batches: as many as a count step, since a step that copies
// nothing costs about what a count step does. listChunk bounds the flows
// it copies in a step: flows go into chunks of that many, never into one
// growing slice, whose doubling would copy the whole listing in one step.
const (
	listStep  = countStep
	listChunk = 512
)

// ListFlows returns up to most of the worker's live flows for which keep
// returns true (nil: all), and the shard's clock (conntrack ticks) at the
// end of the listing, to tell idle times by. It may be called from any
// goroutine while the worker runs (Run): the worker copies one step of
// listStep buckets and copies at most listChunk flows between batches
// (64 steps when idle), so forwarding never waits for more than a step,
// and at most most (+7) flows are copied. keep runs
// on the worker's goroutine and must only read what does not change under
// it.
//
// The listing is not a snapshot: a flow shows its state as of the step
// that copied it (a few milliseconds old on a loaded worker), and flows
// created, ended or moved during the listing may be missed or listed
// twice.
func (w *Worker) ListFlows(ctx context.Context, keep func(*conntrack.Flow) bool, most int) ([]conntrack.Flow, conntrack.Tick, error) {
	if most <= 0 {
		return nil, 0, nil
	}
	w.listMu.Lock()
	defer w.listMu.Unlock()
	r := &flowList{keep: keep, most: most, done: make(chan struct{})}
	w.listReq.Store(r)
	select {
	case <-r.done:
		out := make([]conntrack.Flow, 0, min(r.n, most))
		for _, c := range r.chunks {
			out = append(out, c[:min(len(c), most-len(out))]...)
		}
		return out, r.now, nil
	case <-ctx.Done():
		// As for CountFlows: a step already under way finishes on r.
		w.listReq.CompareAndSwap(r, nil)
		return nil, 0, ctx.Err()
	}
}

// serveList advances a pending listing by up to steps steps.
func (w *Worker) serveList(steps int) {
	r := w.listReq.Load()
	if r == nil {
		return
	}
	for i := 0; i < steps; i++ {
		last := len(r.chunks) - 1
		if last < 0 || cap(r.chunks[last])-len(r.chunks[last]) < 8 {
			r.chunks = append(r.chunks, make([]conntrack.Flow, 0, listChunk))
			last++
		}
		before := len(r.chunks[last])
		r.chunks[last], r.next = w.ct.List(r.chunks[last], r.next, listStep, r.keep)
		r.n += len(r.chunks[last]) - before
		if r.next == 0 || r.n >= r.most || w.listReq.Load() != r {
			r.now = w.ct.Now()
			w.listReq.CompareAndSwap(r, nil)
			close(r.done)
			return
		}
	}
}

// Hinted reports whether a listed flow's packets carry a previous-owner
// hint (a DSR VIP's previous table gives its hash to another backend).
func Hinted(f *conntrack.Flow) bool { return f.Flags&flagPrevious != 0 }
