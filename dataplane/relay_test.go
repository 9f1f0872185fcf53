package dataplane

import (
	"net/netip"
	"sync"
	"testing"

	"github.com/vipd/vipd/conntrack"
)

// ring is n workers sharing one relay and one snapshot, each with its own
// shard, as the daemon builds them.
type ring struct {
	t    *testing.T
	ws   []*Worker
	snap *Snapshot
	now  int64
	emit []*sliceEmitter
}

func newRing(t *testing.T, spec *Spec, n int) *ring {
	t.Helper()
	snap, err := NewSnapshot(spec)
	if err != nil {
		t.Fatal(err)
	}
	ct, err := conntrack.New(conntrack.Config{Capacity: 1 << 12, Shards: n})
	if err != nil {
		t.Fatal(err)
	}
	r := &ring{t: t, snap: snap, now: 1e9}
	rel := NewRelay(n)
	for i := 0; i < n; i++ {
		r.ws = append(r.ws, NewWorker(ct.Shard(i), WorkerOptions{Relay: rel}))
		r.emit = append(r.emit, &sliceEmitter{})
	}
	return r
}

// rx runs frame through worker i, as one batch that also serves its inbox
// first (as Worker.Run does), and returns the desc and what the worker
// emitted.
func (r *ring) rx(i int, frame []byte) (*Desc, []emitted) {
	w, e := r.ws[i], r.emit[i]
	e.frames = e.frames[:0]
	w.Begin(r.snap, r.now, e)
	if w.relayPending() {
		w.serveRelays()
	}
	var d *Desc
	if frame != nil {
		d = newDesc(frame, PortIngress)
		w.Process(d)
	}
	w.End(1)
	return d, append([]emitted(nil), e.frames...)
}

// serve lets worker i serve its inbox, as an idle worker does after its
// poll timeout.
func (r *ring) serve(i int) []emitted {
	_, out := r.rx(i, nil)
	return out
}

// drainedSpec is testSpec with the backend ref of VIP id draining: it keeps
// its flows and Maglev no longer picks it.
func drainedSpec(id uint16, ref uint32) *Spec {
	spec := testSpec()
	for i := range spec.VIPs {
		if spec.VIPs[i].ID != id {
			continue
		}
		for j := range spec.VIPs[i].Backends {
			if spec.VIPs[i].Backends[j].Ref == ref {
				spec.VIPs[i].Backends[j].State = BackendDraining
			}
		}
	}
	return spec
}

// TestICMPRelay: after a backend change, an ICMP error about a flow pinned
// on one worker reaches the flow's backend whichever worker receives it.
func TestICMPRelay(t *testing.T) {
	tests := []struct {
		name   string
		vip    netip.Addr
		id     uint16
		client netip.Addr
		router netip.Addr
		mode   Mode
	}{
		{"nat4", vipNAT4, idNAT4, client4, router4, ModeNAT},
		{"dsr4", vipDSR4, idDSR4, client4, router4, ModeDSR},
		{"nat6", vipNAT6, idNAT6, client6, router6, ModeNAT},
		{"dsr6", vipDSR6, idDSR6, client6, router6, ModeDSR},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const holder, receiver = 1, 3 // of four workers: the error goes 3 → 0 → 1
			r := newRing(t, testSpec(), 4)
			syn := build(t, pk{src: tt.client, dst: tt.vip, sport: 40001, dport: 80, flags: "S"})
			d, _ := r.rx(holder, syn)
			if d.Verdict != VerdictTX {
				t.Fatalf("SYN: %v %v", d.Verdict, d.Reason)
			}
			pinned := outerDst(t, decode(t, d.frame()), tt.mode)
			// The flow's backend drains: established flows stay, Maglev
			// picks another for this flow's hash.
			spec := drainedSpec(tt.id, refOf(t, testSpec(), tt.id, pinned))
			if err := func() error { s, err := NewSnapshot(spec); r.snap = s; return err }(); err != nil {
				t.Fatal(err)
			}
			if ref, ok := r.snap.Where(tt.vip, 6, 80, netip.AddrPortFrom(tt.client, 40001)); !ok || backendAddr(t, spec, ref) == pinned {
				t.Fatalf("Maglev still picks the pinned backend: the test shows nothing")
			}

			in := icmpError(t, tt.router, tt.vip, quotedTCP(t, tt.vip, tt.client, 80, 40001))
			d, out := r.rx(receiver, in)
			if d.Verdict != VerdictRelay || len(out) != 0 {
				t.Fatalf("receiver: verdict %v (%v), %d frames out; want relay", d.Verdict, d.Reason, len(out))
			}
			if out := r.serve(0); len(out) != 0 {
				t.Fatalf("worker 0, which does not hold the flow, sent %d frames", len(out))
			}
			out = r.serve(holder)
			if len(out) != 1 {
				t.Fatalf("holder sent %d frames, want 1", len(out))
			}
			if got := outerDst(t, decode(t, out[0].data), tt.mode); got != pinned {
				t.Errorf("error steered to %v, the flow is pinned to %v", got, pinned)
			}
			if out[0].port != PortEgress {
				t.Errorf("sent on port %d", out[0].port)
			}
			sum := Sum(r.ws[0].Counters(), r.ws[1].Counters(), r.ws[2].Counters(), r.ws[3].Counters())
			if sum.ICMPRelayed != 2 || sum.ICMPRelayedIn != 2 || sum.ICMPSteered != 1 || sum.RxFrames != 2 {
				t.Errorf("relayed %d, relayed in %d, steered %d, rx %d; want 2, 2, 1, 2",
					sum.ICMPRelayed, sum.ICMPRelayedIn, sum.ICMPSteered, sum.RxFrames)
			}
			if n := r.serve(2); len(n) != 0 {
				t.Errorf("the error went on past its holder")
			}
		})
	}
}

// TestICMPRelayNobodyHolds: an error about a flow no worker holds goes
// once around the ring and is steered by Maglev by the last worker before
// the one that received it, and never again.
func TestICMPRelayNobodyHolds(t *testing.T) {
	r := newRing(t, testSpec(), 3)
	ref, ok := r.snap.Where(vipNAT4, 6, 80, netip.AddrPortFrom(client4, 40009))
	if !ok {
		t.Fatal("no backend")
	}
	in := icmpError(t, router4, vipNAT4, quotedTCP(t, vipNAT4, client4, 80, 40009))
	if d, _ := r.rx(1, in); d.Verdict != VerdictRelay {
		t.Fatalf("verdict %v", d.Verdict)
	}
	if out := r.serve(2); len(out) != 0 {
		t.Fatalf("worker 2 sent %d frames", len(out))
	}
	out := r.serve(0)
	if len(out) != 1 {
		t.Fatalf("last worker sent %d frames, want 1", len(out))
	}
	if got := outerDst(t, decode(t, out[0].data), ModeNAT); got != backendAddr(t, testSpec(), ref) {
		t.Errorf("steered to %v, Maglev says %v", got, backendAddr(t, testSpec(), ref))
	}
	for i := range r.ws {
		if r.ws[i].relayPending() {
			t.Errorf("worker %d still has relayed frames", i)
		}
	}
}

// TestICMPRelayFull: with the next inbox full, the error is steered where
// it is, by Maglev, and counted.
func TestICMPRelayFull(t *testing.T) {
	r := newRing(t, testSpec(), 2)
	in := icmpError(t, router4, vipNAT4, quotedTCP(t, vipNAT4, client4, 80, 40010))
	for i := 0; i < relayCells; i++ {
		if d, _ := r.rx(0, in); d.Verdict != VerdictRelay {
			t.Fatalf("frame %d: verdict %v", i, d.Verdict)
		}
	}
	d, _ := r.rx(0, in)
	if d.Verdict != VerdictTX {
		t.Fatalf("inbox full: verdict %v %v, want tx by Maglev", d.Verdict, d.Reason)
	}
	if c := r.ws[0].Counters(); c.ICMPNotRelayed != 1 || c.ICMPRelayed != relayCells {
		t.Errorf("not relayed %d, relayed %d", c.ICMPNotRelayed, c.ICMPRelayed)
	}
	if out := r.serve(1); len(out) != relayCells {
		t.Errorf("worker 1 sent %d of %d", len(out), relayCells)
	}
}

// TestInboxConcurrent: producers on several goroutines and one consumer
// lose and duplicate nothing (run with -race).
func TestInboxConcurrent(t *testing.T) {
	q := newInbox(8)
	const producers, each = 4, 2000
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				frame := []byte{byte(p), byte(i >> 8), byte(i)}
				for !q.push(frame, 0, p) {
				}
			}
		}()
	}
	next := make([]int, producers)
	for got := 0; got < producers*each; {
		c := q.front()
		if c == nil {
			continue
		}
		b := c.buf[Headroom : Headroom+c.n]
		p, i := int(b[0]), int(b[1])<<8|int(b[2])
		if int(c.origin) != p || i != next[p] {
			t.Fatalf("producer %d: got frame %d, want %d", p, i, next[p])
		}
		next[p]++
		q.pop()
		got++
	}
	wg.Wait()
}
