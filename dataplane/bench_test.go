package dataplane

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/vipd/vipd/conntrack"
	"github.com/vipd/vipd/packet"
)

// BenchmarkPipeline measures one worker on one core: ns per packet and
// packets per second, for NAT and DSR, conntrack hit (flows already pinned,
// visited in turn), miss (a new flow every packet, picked up mid-stream)
// and syn (a new connection's SYN every packet: a miss that starts a
// handshake), with 1 and 100k live flows (1M too without -short), and 64-
// and 1500-byte frames.
//
// Frames come in batches of 64, each in its own buffer, and are processed
// in place by ProcessBatch, as a worker's Run does with what a driver
// hands over; to reuse a frame, each batch first restores the frames' 64
// header bytes from a per-flow copy (the cost of a cache miss on a fresh
// frame, which a real NIC would also cause). BenchmarkHeaderRestore
// measures that overhead alone. Flows are visited in turn.
func BenchmarkPipeline(b *testing.B) {
	flowCounts := []int{1, 100_000}
	if !testing.Short() {
		flowCounts = append(flowCounts, 1_000_000)
	}
	for _, mode := range []struct {
		name string
		vip  netip.Addr
	}{{"nat", vipNAT4}, {"dsr", vipDSR4}} {
		for _, path := range []string{"hit", "miss", "syn"} {
			for _, flows := range flowCounts {
				if path != "hit" && flows != 1 {
					continue // a miss has no live-flow count: every packet is new
				}
				for _, size := range []int{64, 1500} {
					if path == "syn" && size != 64 {
						continue // a SYN carries no payload
					}
					name := fmt.Sprintf("%s/%s/flows=%d/%dB", mode.name, path, flows, size)
					flags := "A"
					if path == "syn" {
						flags = "S"
					}
					b.Run(name, func(b *testing.B) {
						benchPipelineFlags(b, testSpec(), mode.vip, path != "hit", flows, size, -1, flags)
					})
				}
			}
		}
	}
}

const hdrLen = 14 + 20 + 20 // Ethernet, IPv4, TCP: all the pipeline touches

// flowHeaders returns n distinct frame headers for flows to vip: client
// addresses 198.18.0.1 and up, source ports 1024-61023.
func flowHeaders(b testing.TB, vip netip.Addr, n, size int) ([]byte, []byte) {
	return flowHeadersFlags(b, vip, n, size, "A")
}

// flowHeadersFlags is flowHeaders for packets with TCP flags flags.
func flowHeadersFlags(b testing.TB, vip netip.Addr, n, size int, flags string) ([]byte, []byte) {
	tmpl := build(b, pk{src: client4, dst: vip, sport: 1024, dport: 80, flags: flags, payload: make([]byte, size-hdrLen)})
	hdrs := make([]byte, n*64)
	for i := 0; i < n; i++ {
		h := hdrs[i*64 : i*64+64]
		copy(h, tmpl[:64])
		ip := packet.IPv4(h[14:34])
		binary.BigEndian.PutUint32(h[14+12:], binary.BigEndian.Uint32(client4.AsSlice())+uint32(i/60000))
		binary.BigEndian.PutUint16(h[34:], uint16(1024+i%60000))
		ip.SetChecksum(0)
		ip.SetChecksum(ip.ComputeChecksum())
	}
	return tmpl, hdrs
}

// BenchmarkPrefetch compares ProcessBatch's prefetch passes in one run:
// none, bucket metadata, metadata then records, then records in alternate
// buckets, each forced, and the default (auto: three passes from
// prefetchMinFlows flows on, none below, one after a batch of mostly new
// flows); NAT hits at 1M flows, where every lookup misses the CPU caches,
// and at 1 flow, where the passes are pure overhead; and new flows (every
// packet a miss, the table full, as the miss rows of BenchmarkPipeline).
func BenchmarkPrefetch(b *testing.B) {
	for passes := -1; passes <= 3; passes++ {
		name := fmt.Sprintf("new-flows/passes=%d", passes)
		if passes < 0 {
			name = "new-flows/passes=auto"
		}
		b.Run(name, func(b *testing.B) {
			benchPipelineOf(b, vipNAT4, true, 1, 64, passes)
		})
	}
	flowCounts := []int{1, 1_000_000}
	if testing.Short() {
		flowCounts = []int{1, 100_000}
	}
	for _, flows := range flowCounts {
		for passes := -1; passes <= 3; passes++ {
			name := fmt.Sprintf("flows=%d/passes=%d", flows, passes)
			if passes < 0 {
				name = fmt.Sprintf("flows=%d/passes=auto", flows)
			}
			b.Run(name, func(b *testing.B) {
				benchPipelineOf(b, vipNAT4, false, flows, 64, passes)
			})
		}
	}
}

func benchPipelineOf(b *testing.B, vip netip.Addr, miss bool, flows, size, passes int) {
	benchPipelineSpec(b, testSpec(), vip, miss, flows, size, passes)
}

// BenchmarkPreviousOwner compares, in one run, a GUE DSR VIP without and
// with a previous table (a fourth backend added: about a quarter of the
// flows get a hint): misses of mid-stream packets, which look the previous
// table up, and hits at 100k flows, where hinted flows look it up again.
func BenchmarkPreviousOwner(b *testing.B) {
	for _, prev := range []bool{false, true} {
		for _, miss := range []bool{true, false} {
			flows := 100_000
			if miss {
				flows = 1
			}
			name := fmt.Sprintf("previous=%v/miss=%v", prev, miss)
			b.Run(name, func(b *testing.B) {
				spec, _ := previousSpec(false)
				if !prev {
					for i := range spec.VIPs {
						spec.VIPs[i].Previous = nil
					}
				}
				benchPipelineSpec(b, spec, vipDSR4, miss, flows, 64, -1)
			})
		}
	}
}

// benchPipelineSpec is benchPipelineOf over spec (BenchmarkSchedulers,
// BenchmarkPreviousOwner).
func benchPipelineSpec(b *testing.B, spec *Spec, vip netip.Addr, miss bool, flows, size, passes int) {
	benchPipelineFlags(b, spec, vip, miss, flows, size, passes, "A")
}

// benchPipelineFlags is benchPipelineSpec for packets with TCP flags flags
// ("S": every miss a new connection's SYN, which starts a handshake).
func benchPipelineFlags(b *testing.B, spec *Spec, vip netip.Addr, miss bool, flows, size, passes int, flags string) {
	// Room for the 20-byte IPIP header behind 1500-byte frames, as a DSR
	// deployment needs on its tunnel side.
	spec.MTU[PortEgress] = 1600
	snap, err := NewSnapshot(spec)
	if err != nil {
		b.Fatal(err)
	}
	capacity := flows + flows/4 + 1024
	if miss {
		capacity = 1 << 16
		flows = 1 << 20 // distinct flows cycled through a table 16× smaller
	}
	ct, err := conntrack.New(conntrack.Config{Capacity: capacity, Shards: 1})
	if err != nil {
		b.Fatal(err)
	}
	w := NewWorker(ct.Shard(0), WorkerOptions{})
	if passes >= 0 {
		// BenchmarkPrefetch: the passes asked for, whatever the size and
		// the share of new flows.
		w.prefetch, w.prefetchMin, w.newFlowPasses = passes, 0, passes
	}
	tmpl, hdrs := flowHeadersFlags(b, vip, flows, size, flags)
	// A batch as a driver hands it over: batchSize frames in their own
	// buffers, processed in place by ProcessBatch.
	const batchSize = 64
	descs := make([]Desc, batchSize)
	bufs := make([][]byte, batchSize)
	for i := range bufs {
		bufs[i] = make([]byte, Headroom+len(tmpl))
		copy(bufs[i][Headroom:], tmpl)
	}
	now := int64(time.Second)
	next := 0 // the flow of the next frame
	fill := func(n int) []Desc {
		for i := 0; i < n; i++ {
			copy(bufs[i][Headroom:], hdrs[next*64:next*64+64])
			descs[i] = Desc{Buf: bufs[i], Off: Headroom, Len: len(tmpl)}
			if next++; next == flows {
				next = 0
			}
		}
		return descs[:n]
	}
	if !miss {
		for pinned := 0; pinned < flows; pinned += batchSize { // pin every flow
			w.Begin(snap, now, nil)
			w.ProcessBatch(fill(min(batchSize, flows-pinned)))
			w.End(min(batchSize, flows-pinned))
		}
		if d := descs[0]; d.Verdict != VerdictTX {
			b.Fatalf("setup: %v %v", d.Verdict, d.Reason)
		}
		next = 0
	}
	b.ReportAllocs()
	b.SetBytes(int64(size))
	b.ResetTimer()
	start := time.Now()
	var last []Desc
	for done := 0; done < b.N; done += batchSize {
		n := min(batchSize, b.N-done)
		w.Begin(snap, now, nil)
		last = fill(n)
		w.ProcessBatch(last)
		w.End(n)
	}
	el := time.Since(start)
	b.StopTimer()
	if d := last[len(last)-1]; d.Verdict != VerdictTX {
		b.Fatalf("last packet: %v %v", d.Verdict, d.Reason)
	}
	b.ReportMetric(float64(el.Nanoseconds())/float64(b.N), "ns/pkt")
	b.ReportMetric(float64(b.N)/el.Seconds(), "pkt/s")
}

// BenchmarkHeaderRestore is the harness cost included in BenchmarkPipeline.
func BenchmarkHeaderRestore(b *testing.B) {
	for _, flows := range []int{1, 100_000} {
		b.Run(fmt.Sprintf("flows=%d", flows), func(b *testing.B) {
			tmpl, hdrs := flowHeaders(b, vipNAT4, flows, 64)
			buf := make([]byte, Headroom+len(tmpl))
			d := &Desc{}
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				j := i % flows
				copy(buf[Headroom:], hdrs[j*64:j*64+64])
				*d = Desc{Buf: buf, Off: Headroom, Len: len(tmpl)}
			}
		})
	}
}

// BenchmarkWorkers runs 1 and 2 workers at once, each on its own
// goroutine with its own shard and frames over one shared snapshot, NAT
// hits over 100k flows per worker: ns/pkt/worker is each worker's wall
// time per packet. Nothing is written to a shared cache line per packet,
// so with a free core per worker the two figures should match; on a
// machine with other load the second worker's core is not free.
func BenchmarkWorkers(b *testing.B) {
	for _, n := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			if n > runtime.GOMAXPROCS(0) {
				b.Skipf("GOMAXPROCS %d < %d workers", runtime.GOMAXPROCS(0), n)
			}
			spec := testSpec()
			snap, err := NewSnapshot(spec)
			if err != nil {
				b.Fatal(err)
			}
			const flows, batchSize = 100_000, 64
			type lane struct {
				w     *Worker
				hdrs  []byte
				descs []Desc
				bufs  [][]byte
				tmpl  []byte
			}
			lanes := make([]*lane, n)
			ct, err := conntrack.New(conntrack.Config{Capacity: n * (flows + flows/4 + 1024), Shards: n})
			if err != nil {
				b.Fatal(err)
			}
			for i := range lanes {
				tmpl, hdrs := flowHeaders(b, vipNAT4, flows, 64)
				l := &lane{w: NewWorker(ct.Shard(i), WorkerOptions{}), hdrs: hdrs, descs: make([]Desc, batchSize), tmpl: tmpl}
				for range batchSize {
					buf := make([]byte, Headroom+len(tmpl))
					copy(buf[Headroom:], tmpl)
					l.bufs = append(l.bufs, buf)
				}
				lanes[i] = l
			}
			run := func(l *lane, packets int) {
				next := 0
				for done := 0; done < packets; done += batchSize {
					k := min(batchSize, packets-done)
					for j := 0; j < k; j++ {
						copy(l.bufs[j][Headroom:], l.hdrs[next*64:next*64+64])
						l.descs[j] = Desc{Buf: l.bufs[j], Off: Headroom, Len: len(l.tmpl)}
						if next++; next == flows {
							next = 0
						}
					}
					l.w.Begin(snap, int64(time.Second), nil)
					l.w.ProcessBatch(l.descs[:k])
					l.w.End(k)
				}
			}
			for _, l := range lanes {
				run(l, flows) // pin every flow
			}
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for _, l := range lanes {
				wg.Add(1)
				go func() {
					defer wg.Done()
					run(l, b.N)
				}()
			}
			wg.Wait()
			el := time.Since(start)
			b.StopTimer()
			for _, l := range lanes {
				if d := l.descs[0]; d.Verdict != VerdictTX {
					b.Fatalf("%v %v", d.Verdict, d.Reason)
				}
			}
			b.ReportMetric(float64(el.Nanoseconds())/float64(b.N), "ns/pkt/worker")
			b.ReportMetric(float64(n*b.N)/el.Seconds(), "pkt/s")
		})
	}
}

// BenchmarkHit is one flow's conntrack hit for each family and mode, a
// batch of 64 copies of one 64-byte frame: what the IPv4 and IPv6 paths
// cost side by side (BenchmarkPipeline is IPv4 only). nat4-onlink is nat4
// from a client on a connected subnet, whose MAC every packet confirms
// (Spec.ClientOnLink): the rig's clients, and any that share the box's
// segment.
func BenchmarkHit(b *testing.B) {
	for _, tc := range []struct {
		name     string
		src, dst netip.Addr
		onLink   bool
	}{{"nat4", client4, vipNAT4, false}, {"nat4-onlink", client4, vipNAT4, true}, {"nat6", client6, vipNAT6, false}, {"dsr4", client4, vipDSR4, false}, {"dsr6", client6, vipDSR6, false}} {
		b.Run(tc.name, func(b *testing.B) {
			spec := testSpec()
			if tc.onLink {
				spec.ClientOnLink = []netip.Prefix{netip.PrefixFrom(tc.src, 24).Masked()}
			}
			h := newHarness(b, spec)
			benchHits(b, h, build(b, pk{src: tc.src, dst: tc.dst, sport: 1000, dport: 80, flags: "A"}))
		})
	}
}

// benchHits runs batches of 64 frames, frames[i%len(frames)] each, through
// h's worker (the first batch, untimed, makes the flows) and reports ns
// per packet and packets per second.
func benchHits(b *testing.B, h *harness, frames ...[]byte) {
	b.Helper()
	benchHitsOn(b, h, PortIngress, frames...)
}

// BenchmarkReply is a NAT backend's reply, translated back to the VIP, a
// batch of 64 copies of one 64-byte frame received on the egress port:
// the other half of a NAT connection's packets.
func BenchmarkReply(b *testing.B) {
	for _, tc := range []struct {
		name     string
		src, dst netip.Addr
		flags    string
	}{{"nat4", netip.MustParseAddr("198.18.1.11"), client4, "A"}, {"nat6", netip.MustParseAddr("2001:2:1::11"), client6, "A"}, {"nat4-synack", netip.MustParseAddr("198.18.1.11"), client4, "SA"}} {
		b.Run(tc.name, func(b *testing.B) {
			h := newHarness(b, testSpec())
			benchHitsOn(b, h, PortEgress, build(b, pk{src: tc.src, dst: tc.dst, sport: 8080, dport: 1000, flags: tc.flags, srcMAC: macOf(1)}))
		})
	}
}

// benchHitsOn is benchHits for frames received on port rx.
func benchHitsOn(b *testing.B, h *harness, rx uint8, frames ...[]byte) {
	b.Helper()
	const batchSize = 64
	descs := make([]Desc, batchSize)
	bufs := make([][]byte, batchSize)
	for i := range bufs {
		bufs[i] = make([]byte, Headroom+len(frames[i%len(frames)]))
	}
	fill := func() {
		for i := range descs {
			f := frames[i%len(frames)]
			copy(bufs[i][Headroom:], f)
			descs[i] = Desc{Buf: bufs[i], Off: Headroom, Len: len(f), RxPort: rx}
		}
	}
	fill()
	h.w.Begin(h.snap, h.now, nil)
	h.w.ProcessBatch(descs)
	if descs[0].Verdict != VerdictTX {
		b.Fatalf("setup: %v %v", descs[0].Verdict, descs[0].Reason)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	n := 0
	for n < b.N {
		fill()
		h.w.Begin(h.snap, h.now, nil)
		h.w.ProcessBatch(descs)
		h.w.End(batchSize)
		n += batchSize
	}
	el := time.Since(start)
	b.ReportMetric(float64(el.Nanoseconds())/float64(n), "ns/pkt")
	b.ReportMetric(float64(n)/el.Seconds(), "pkt/s")
}
