package dataplane

import (
	"bytes"
	"fmt"
	"net/netip"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"weak"

	"github.com/google/gopacket/layers"

	"github.com/vipd/vipd/conntrack"
	"github.com/vipd/vipd/dsr"
	"github.com/vipd/vipd/testing/framegen"
)

// TestBatchAgreesWithProcess runs the same frames through two identical
// workers, one frame at a time (Process) and in batches (ProcessBatch),
// and requires the same verdict, reason, port and bytes for every frame,
// the same emitted frames and the same counters. The frames are the policy
// corpus plus flows whose packets share a batch (a SYN and the packets
// after it), the case where the first pass runs ahead of the second.
func TestBatchAgreesWithProcess(t *testing.T) {
	// fuzzSpec's on-link clients send NAT packets down forward4; testSpec
	// has none, so forwardClean translates them itself.
	t.Run("spec=fuzz", func(t *testing.T) { testBatchAgrees(t, fuzzSpec()) })
	t.Run("spec=plain", func(t *testing.T) { testBatchAgrees(t, testSpec()) })
}

func testBatchAgrees(t *testing.T, spec *Spec) {
	st := spec.Steering()
	addrs := append(append(append([]netip.Addr{}, st.VIPs...), st.NextHops...), st.Local...)
	addrs = append(addrs, client4, client6, router4, router6)
	n := 6000
	if testing.Short() {
		n = 2000
	}
	corpus, err := framegen.Generate(framegen.Params{Addrs: addrs, Ports: []uint16{0, 80, 443, 7000, 8080}, N: n, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	// 40 flows of 5 packets each, interleaved so that every batch holds
	// several packets of the same flow, first ones included.
	var flows [][]byte
	for round := 0; round < 5; round++ {
		for fl := 0; fl < 40; fl++ {
			flags := "A"
			if round == 0 {
				flags = "S"
			}
			src, dst := client4, vipNAT4
			if fl%2 == 1 {
				src, dst = client6, vipNAT6
			}
			if fl%4 >= 2 {
				dst = map[bool]netip.Addr{false: vipDSR4, true: vipDSR6}[fl%2 == 1]
			}
			flows = append(flows, build(t, pk{src: src, dst: dst, sport: uint16(2000 + fl), dport: 80, flags: flags, proto: layers.IPProtocolTCP}))
		}
	}
	frames := append(flows, corpus...)

	snap, err := NewSnapshot(spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{1, 7, 64} {
		t.Run(fmt.Sprintf("batch=%d", size), func(t *testing.T) {
			one, many := newHarnessOf(t, snap, 1<<14), newHarnessOf(t, snap, 1<<14)
			// general takes no shortcut (classifyCommon, forwardClean):
			// the shortcut must give exactly what the general path gives.
			general := newHarnessOf(t, snap, 1<<14)
			general.w.noCommon = true
			for start := 0; start < len(frames); start += size {
				chunk := frames[start:min(start+size, len(frames))]
				one.emit.frames = one.emit.frames[:0]
				one.w.Begin(snap, one.now, one.emit)
				singles := make([]*Desc, len(chunk))
				for i, f := range chunk {
					singles[i] = newDesc(f, PortIngress)
					one.w.Process(singles[i])
				}
				one.w.End(len(chunk))
				batch := many.run(chunk...)
				slow := general.run(chunk...)
				for i := range chunk {
					a, b, c := singles[i], batch[i], slow[i]
					if a.Verdict != b.Verdict || a.Reason != b.Reason || a.Port != b.Port || !bytes.Equal(a.frame(), b.frame()) {
						t.Fatalf("frame %d: alone %v/%v port %d, in a batch %v/%v port %d (bytes equal: %v)\n%x",
							start+i, a.Verdict, a.Reason, a.Port, b.Verdict, b.Reason, b.Port, bytes.Equal(a.frame(), b.frame()), chunk[i])
					}
					if c.Verdict != b.Verdict || c.Reason != b.Reason || c.Port != b.Port || !bytes.Equal(c.frame(), b.frame()) {
						t.Fatalf("frame %d: general path %v/%v port %d, with shortcuts %v/%v port %d (bytes equal: %v)\n%x",
							start+i, c.Verdict, c.Reason, c.Port, b.Verdict, b.Reason, b.Port, bytes.Equal(c.frame(), b.frame()), chunk[i])
					}
				}
				if !reflect.DeepEqual(one.emit.frames, many.emit.frames) || !reflect.DeepEqual(general.emit.frames, many.emit.frames) {
					t.Fatalf("batch at %d: emitted frames differ", start)
				}
				one.now += 1e6
				many.now += 1e6
				general.now += 1e6
			}
			if a, b := one.w.Counters(), many.w.Counters(); !reflect.DeepEqual(a, b) {
				t.Errorf("counters differ:\nalone    %+v\nbatched  %+v", a, b)
			}
			if a, b := general.w.Counters(), many.w.Counters(); !reflect.DeepEqual(a, b) {
				t.Errorf("counters differ:\ngeneral   %+v\nshortcuts %+v", a, b)
			}
			if one.w.Counters().FlowHits == 0 {
				t.Error("no conntrack hit: the flows did not exercise lookups")
			}
		})
	}
}

// TestHeadroomPrefetch: classify's headroom prefetch never reads outside a
// frame's buffer when the headroom is short, and changes no verdict.
func TestHeadroomPrefetch(t *testing.T) {
	snap, err := NewSnapshot(testSpec())
	if err != nil {
		t.Fatal(err)
	}
	frames := [][]byte{
		build(t, pk{src: client4, dst: vipDSR4, sport: 3000, dport: 80, flags: "S"}),
		build(t, pk{src: client4, dst: vipNAT4, sport: 3001, dport: 80, flags: "S"}),
		build(t, pk{src: client6, dst: vipDSR6, sport: 3002, dport: 80, flags: "S"}),
	}
	for _, off := range []int{0, dsr.Overhead4 - 1, Headroom} {
		t.Run(fmt.Sprintf("headroom=%d", off), func(t *testing.T) {
			one, many := newHarnessOf(t, snap, 1<<10), newHarnessOf(t, snap, 1<<10)
			descs := make([]Desc, len(frames))
			one.w.Begin(snap, one.now, one.emit)
			many.w.Begin(snap, many.now, many.emit)
			for i, f := range frames {
				buf := make([]byte, off+len(f)+16)
				copy(buf[off:], f)
				descs[i] = Desc{Buf: buf, Off: off, Len: len(f), RxPort: PortIngress}
				d := descs[i]
				d.Buf = slices.Clone(buf)
				one.w.Process(&d)
				if d.Verdict != VerdictTX && off >= dsr.Overhead6 {
					t.Errorf("frame %d: %v %v with room for any encapsulation", i, d.Verdict, d.Reason)
				}
				defer func(i int, want Desc) {
					if got := descs[i]; got.Verdict != want.Verdict || got.Reason != want.Reason || !bytes.Equal(got.Buf[got.Off:got.Off+got.Len], want.Buf[want.Off:want.Off+want.Len]) {
						t.Errorf("frame %d: batch gave %v %v, one at a time %v %v", i, got.Verdict, got.Reason, want.Verdict, want.Reason)
					}
				}(i, d)
			}
			many.w.ProcessBatch(descs)
		})
	}
}

// TestDescSet: Set gives exactly what the literal a driver used to write
// gives, whatever the Desc held before (a verdict from the last batch).
func TestDescSet(t *testing.T) {
	buf := make([]byte, 64)
	d := Desc{Buf: make([]byte, 8), Off: 3, Len: 5, RxPort: PortEgress, Verdict: VerdictTX, Port: PortEgress, Reason: DropNoBackend}
	d.Set(buf, 10, 20, PortIngress)
	want := Desc{Buf: buf, Off: 10, Len: 20, RxPort: PortIngress}
	if d.Off != want.Off || d.Len != want.Len || d.RxPort != want.RxPort || &d.Buf[0] != &buf[0] || len(d.Buf) != len(buf) ||
		d.Verdict != want.Verdict || d.Port != want.Port || d.Reason != want.Reason {
		t.Errorf("Set gave %+v, want %+v", d, want)
	}
}

// TestOldSnapshotReleased: what classify keeps per frame (the VIP of a
// clean frame) does not keep a replaced snapshot alive, even in slots of
// w.pkts that no later batch reaches.
func TestOldSnapshotReleased(t *testing.T) {
	ct, err := conntrack.New(conntrack.Config{Capacity: 1 << 10, Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	w := NewWorker(ct.Shard(0), WorkerOptions{})
	batch := func(snap *Snapshot, n int) {
		descs := make([]Desc, n)
		for i := range descs {
			f := build(t, pk{src: client4, dst: vipNAT4, sport: uint16(4000 + i), dport: 80, flags: "S"})
			buf := make([]byte, Headroom+len(f))
			copy(buf[Headroom:], f)
			descs[i].Set(buf, Headroom, len(f), PortIngress)
		}
		w.Begin(snap, 1e9, &sliceEmitter{})
		w.ProcessBatch(descs)
		w.End(n)
		if descs[n-1].Verdict != VerdictTX {
			t.Fatalf("%v %v, want a NAT translation", descs[n-1].Verdict, descs[n-1].Reason)
		}
	}
	old, err := NewSnapshot(testSpec())
	if err != nil {
		t.Fatal(err)
	}
	batch(old, 4)
	gone := weak.Make(&old.vips[0]) // what a frame's pkt points into
	old = nil
	next, err := NewSnapshot(testSpec())
	if err != nil {
		t.Fatal(err)
	}
	batch(next, 1) // slots 1-3 are not written again
	runtime.GC()
	runtime.GC()
	if gone.Value() != nil {
		t.Error("the replaced snapshot's VIPs are still reachable from the worker")
	}
	runtime.KeepAlive(w) // the worker is what must not pin it
	runtime.KeepAlive(next)
}

// TestNewFlowsPasses: after a batch whose tracked packets were over 8 in 9
// new flows, the next batch makes only the bucket pass (no record pass
// marks a packet isAlt); any other batch brings the passes back.
// Verdicts do not depend on the passes (TestBatchAgreesWithProcess).
func TestNewFlowsPasses(t *testing.T) {
	h := newHarness(t, testSpec())
	h.w.prefetchMin = 0 // the passes at any table size
	batch := func(sport0, n int) []Desc {
		descs := make([]Desc, n)
		for i := range descs {
			f := build(t, pk{src: client4, dst: vipNAT4, sport: uint16(sport0 + i), dport: 80, flags: "S"})
			descs[i] = Desc{Buf: f, Len: len(f), RxPort: PortIngress}
		}
		return descs
	}
	// alts counts the first n packets of the last batch, the new flows, a
	// record pass sent on to their alternate bucket: all of them, when the
	// passes run. (A known flow may live in its alternate bucket too.)
	alts := func(n int) int {
		k := 0
		for _, p := range h.w.pkts[:n] {
			if p.is&isAlt != 0 {
				k++
			}
		}
		return k
	}
	next := 5000 // the source port of the next new flow; known ones from 5000 on
	for _, step := range []struct {
		name         string
		new, known   int
		wantAlts     int
		wantNewFlows bool
	}{
		{"first batch, new flows", 64, 0, 64, true},
		{"new flows after new flows", 64, 0, 0, true},
		{"known flows after new flows", 0, 64, 0, false},
		{"60 new, 4 known", 60, 4, 60, true},
		{"50 new, 14 known", 50, 14, 0, false},
		{"40 new, 24 known", 40, 24, 40, false},
	} {
		descs := append(batch(next, step.new), batch(5000, step.known)...)
		next += step.new
		h.w.Begin(h.snap, h.now, h.emit)
		h.w.ProcessBatch(descs)
		h.w.End(len(descs))
		for i, d := range descs {
			if d.Verdict != VerdictTX {
				t.Fatalf("%s: frame %d: %v %v", step.name, i, d.Verdict, d.Reason)
			}
		}
		if got := alts(step.new); got != step.wantAlts {
			t.Errorf("%s: %d packets sent on to the alternate bucket, want %d", step.name, got, step.wantAlts)
		}
		if h.w.newFlows != step.wantNewFlows {
			t.Errorf("%s: newFlows %v, want %v", step.name, h.w.newFlows, step.wantNewFlows)
		}
	}
}
