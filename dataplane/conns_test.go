package dataplane

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vipd/vipd/conntrack"
)

// connsSetup pins flows NAT flows in a one-shard worker and returns it
// with a function that forwards one batch of 64 frames of them in turn,
// serving a pending listing first as Run does.
func connsSetup(tb testing.TB, flows int) (*Worker, func()) {
	snap, err := NewSnapshot(testSpec())
	if err != nil {
		tb.Fatal(err)
	}
	ct, err := conntrack.New(conntrack.Config{Capacity: flows + flows/4 + 1024, Shards: 1})
	if err != nil {
		tb.Fatal(err)
	}
	w := NewWorker(ct.Shard(0), WorkerOptions{})
	tmpl, hdrs := flowHeaders(tb, vipNAT4, flows, 64)
	const batchSize = 64
	descs := make([]Desc, batchSize)
	bufs := make([][]byte, batchSize)
	for i := range bufs {
		bufs[i] = make([]byte, Headroom+len(tmpl))
	}
	now, next := int64(time.Second), 0
	batch := func() {
		w.serveCount(1)
		for i := range descs {
			copy(bufs[i][Headroom:], tmpl)
			copy(bufs[i][Headroom:], hdrs[next*64:next*64+64])
			descs[i].Set(bufs[i], Headroom, len(tmpl), PortIngress)
			if next++; next == flows {
				next = 0
			}
		}
		w.Begin(snap, now, nil)
		w.ProcessBatch(descs)
		w.End(len(descs))
	}
	for pinned := 0; pinned < flows; pinned += batchSize {
		batch()
	}
	if d := descs[0]; d.Verdict != VerdictTX {
		tb.Fatalf("setup: %v %v", d.Verdict, d.Reason)
	}
	return w, batch
}

// BenchmarkConnsListingUnderLoad forwards NAT hits on a 1M-flow worker
// with and without full listings (vipd conns with no filter and no limit:
// every flow copied) running back to back, in one run: pkt/s for both,
// and the listing's duration and allocations.
func BenchmarkConnsListingUnderLoad(b *testing.B) {
	const flows = 1_000_000
	w, batch := connsSetup(b, flows)
	for _, listing := range []bool{false, true} {
		name := "listing=false"
		if listing {
			name = "listing=true"
		}
		b.Run(name, func(b *testing.B) {
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var lists, listNs, listed atomic.Int64
			if listing {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						ctx, cancel := context.WithCancel(context.Background())
						go func() { <-stop; cancel() }()
						t0 := time.Now()
						got, _, err := w.ListFlows(ctx, nil, 2*flows)
						cancel()
						if err != nil {
							return
						}
						lists.Add(1)
						listNs.Add(int64(time.Since(t0)))
						listed.Add(int64(len(got)))
					}
				}()
			}
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			pkts := 0
			for pkts < b.N {
				batch()
				pkts += 64
			}
			el := time.Since(start)
			b.StopTimer()
			close(stop)
			for w.listReq.Load() != nil { // let a withdrawn listing end
				w.serveCount(64)
			}
			wg.Wait()
			b.ReportMetric(float64(pkts)/el.Seconds(), "pkt/s")
			if n := lists.Load(); n > 0 {
				b.ReportMetric(float64(listNs.Load())/float64(n)/1e6, "ms/listing")
				b.ReportMetric(float64(listed.Load())/float64(n), "flows/listing")
			}
		})
	}
	b.Run("listing-alone", func(b *testing.B) {
		// The listing's own cost, served as an idle worker serves it.
		b.ReportAllocs()
		for range b.N {
			r := &flowList{most: 2 * flows, done: make(chan struct{})}
			w.listReq.Store(r)
			for w.listReq.Load() != nil {
				w.serveCount(64)
			}
			if r.n != flows {
				b.Fatalf("listed %d flows, want %d", r.n, flows)
			}
		}
	})
}

func TestListFlows(t *testing.T) {
	w, batch := connsSetup(t, 5000)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // the worker's loop
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				batch()
			}
		}
	}()
	defer func() { close(stop); <-done }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name string
		keep func(*conntrack.Flow) bool
		most int
		want int
	}{
		{"all", nil, 10000, 5000},
		{"limit", nil, 100, 100},
		{"filter", func(f *conntrack.Flow) bool { return f.Key.SrcPort < 1024+100 }, 10000, 100},
		{"filter none", func(*conntrack.Flow) bool { return false }, 10000, 0},
		{"zero limit", nil, 0, 0},
	} {
		got, _, err := w.ListFlows(ctx, tc.keep, tc.most)
		if err != nil || len(got) != tc.want {
			t.Errorf("%s: %d flows, %v; want %d", tc.name, len(got), err, tc.want)
		}
	}
	// A caller that gives up gets its error; the worker drops the request.
	gone, cancelGone := context.WithCancel(context.Background())
	cancelGone()
	if _, _, err := w.ListFlows(gone, nil, 10); err == nil {
		t.Error("ListFlows with a canceled context succeeded")
	}
}
