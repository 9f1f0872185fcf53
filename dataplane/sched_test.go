package dataplane

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
)

// schedSpec is testSpec with the NAT IPv4 VIP given scheduler s over n
// backends of weights 1, 2, 3, 1, 2, 3, ...
func schedSpec(s Scheduler, n int) *Spec {
	spec := testSpec()
	v := &spec.VIPs[0]
	v.Scheduler = s
	v.Backends = nil
	for i := 0; i < n; i++ {
		ref := uint32(100 + i)
		v.Backends = append(v.Backends, BackendSpec{
			Ref: ref, Addr: netip.AddrFrom4([4]byte{198, 18, 2, byte(1 + i)}), Port: 8080,
			Weight: uint32(1 + i%3), State: BackendUp, MAC: macOf(ref),
		})
	}
	return spec
}

func mustSnapshot(t testing.TB, spec *Spec) *Snapshot {
	t.Helper()
	s, err := NewSnapshot(spec)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestParseScheduler(t *testing.T) {
	for _, name := range SchedulerNames() {
		s, ok := ParseScheduler(name)
		if !ok || s.String() != name {
			t.Errorf("%q: %v %v", name, s, ok)
		}
	}
	if _, ok := ParseScheduler("rr"); ok {
		t.Error("rr parsed")
	}
	for s, want := range map[Scheduler]bool{SchedMaglev: true, SchedMaglevBounded: true, SchedWRR: false, SchedLC: false, SchedP2C: false} {
		if s.Consistent() != want {
			t.Errorf("%v.Consistent() = %v", s, !want)
		}
	}
}

// TestSchedulerShares: with no flow ending, every scheduler gives each
// backend about its weighted share of new flows (wrr and lc exactly).
func TestSchedulerShares(t *testing.T) {
	const n, flows = 6, 12000
	for s := Scheduler(0); s < numSchedulers; s++ {
		t.Run(s.String(), func(t *testing.T) {
			c := NewChooser(mustSnapshot(t, schedSpec(s, n)))
			got := map[uint32]int{}
			rng := rand.New(rand.NewPCG(1, 2))
			for i := 0; i < flows; i++ {
				ref, ok := c.Choose(idNAT4, rng.Uint64())
				if !ok {
					t.Fatal("no choice")
				}
				got[ref]++
			}
			tol := 0.10 // Maglev's own imbalance and the hash's variance
			if s == SchedWRR || s == SchedLC {
				tol = 0.001
			}
			for i := 0; i < n; i++ {
				want := float64(flows) * float64(1+i%3) / 12
				if d := math.Abs(float64(got[uint32(100+i)])-want) / want; d > tol {
					t.Errorf("backend %d (weight %d): %d flows, want %.0f ±%.1f%%", i, 1+i%3, got[uint32(100+i)], want, 100*tol)
				}
			}
		})
	}
}

// TestBoundedCapsConcentration: flows that all hash to one backend's slots
// (clients concentrated on it) spill to others once it reaches its bound,
// and it never exceeds ceil(c × (m+1) × w ÷ W).
func TestBoundedCapsConcentration(t *testing.T) {
	const n = 4
	spec := schedSpec(SchedMaglevBounded, n)
	for i := range spec.VIPs[0].Backends {
		spec.VIPs[0].Backends[i].Weight = 1
	}
	snap := mustSnapshot(t, spec)
	v := &snap.vips[snap.byID[idNAT4]]
	c := NewChooser(snap)
	// Half the flows go for backend 0 by Maglev, the rest anywhere.
	rng := rand.New(rand.NewPCG(3, 4))
	counts := map[uint32]uint64{}
	total := uint64(0)
	for total < 4000 {
		h := rng.Uint64()
		if total%2 == 0 && v.table.Lookup(h) != 0 {
			continue
		}
		ref, _ := c.Choose(idNAT4, h)
		counts[ref]++
		total++
		if bound := math.Ceil(1.25 * float64(total) / n); float64(counts[ref]) > bound {
			t.Fatalf("after %d flows backend %d holds %d > bound %.0f", total, ref, counts[ref], bound)
		}
	}
	if counts[100] < 1200 {
		t.Errorf("backend 0 got %d of 4000 flows: the bound (1250) should be nearly reached", counts[100])
	}
	// Loads as the control plane publishes them count too: a backend
	// over its bound takes no new flow, the others' choices are Maglev's.
	over := snap.SumLoad(map[uint32]int{100: 1000, 101: 10, 102: 10, 103: 10})
	c.Publish(over)
	for i := 0; i < 1000; i++ {
		h := rng.Uint64()
		ref, _ := c.Choose(idNAT4, h)
		if ref == 100 {
			t.Fatalf("flow %d went to the overloaded backend", i)
		}
	}
}

// TestBoundedAgrees: two boxes with the same configuration and the same
// loads choose alike, and under light load bounded Maglev is Maglev.
func TestBoundedAgrees(t *testing.T) {
	spec := schedSpec(SchedMaglevBounded, 5)
	a, b := NewChooser(mustSnapshot(t, spec)), NewChooser(mustSnapshot(t, spec))
	plain := mustSnapshot(t, schedSpec(SchedMaglev, 5))
	load := map[uint32]int{100: 50, 101: 500, 102: 40, 103: 50, 104: 900}
	a.Publish(a.snap.SumLoad(load))
	b.Publish(b.snap.SumLoad(load))
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 2000; i++ {
		h := rng.Uint64()
		ra, _ := a.Choose(idNAT4, h)
		rb, _ := b.Choose(idNAT4, h)
		if ra != rb {
			t.Fatalf("flow %d: %d and %d", i, ra, rb)
		}
	}
	// Even loads: never over the bound, so Maglev's choice.
	c := NewChooser(mustSnapshot(t, spec))
	c.Publish(c.snap.SumLoad(map[uint32]int{100: 1000, 101: 2000, 102: 3000, 103: 1000, 104: 2000}))
	pv := &plain.vips[plain.byID[idNAT4]]
	for i := 0; i < 200; i++ {
		h := rng.Uint64()
		ref, _ := c.Choose(idNAT4, h)
		if want := pv.refs[pv.table.Lookup(h)]; ref != want {
			t.Fatalf("flow %d: %d, Maglev says %d", i, ref, want)
		}
	}
}

// TestLeastConnectionsFollowsLoad: lc and p2c send new flows away from a
// backend the published load shows busy.
func TestLeastConnectionsFollowsLoad(t *testing.T) {
	for _, s := range []Scheduler{SchedLC, SchedP2C} {
		t.Run(s.String(), func(t *testing.T) {
			spec := schedSpec(s, 4)
			for i := range spec.VIPs[0].Backends {
				spec.VIPs[0].Backends[i].Weight = 1
			}
			c := NewChooser(mustSnapshot(t, spec))
			c.Publish(c.snap.SumLoad(map[uint32]int{100: 300}))
			rng := rand.New(rand.NewPCG(7, 8))
			got := map[uint32]int{}
			for i := 0; i < 300; i++ {
				ref, _ := c.Choose(idNAT4, rng.Uint64())
				got[ref]++
			}
			if got[100] != 0 {
				t.Errorf("the busy backend got %d of 300 new flows: %v", got[100], got)
			}
		})
	}
}

// TestSchedulerOnReload: a reload that changes only the scheduler or the
// bound rebuilds the VIP (NewSnapshotFrom's steady path).
func TestSchedulerOnReload(t *testing.T) {
	spec := schedSpec(SchedMaglev, 3)
	s1 := mustSnapshot(t, spec)
	spec2 := *spec
	spec2.VIPs = append([]VIPSpec(nil), spec.VIPs...)
	spec2.VIPs[0].Scheduler, spec2.VIPs[0].LoadBound = SchedMaglevBounded, 1.5
	s2, err := NewSnapshotFrom(s1, &spec2)
	if err != nil {
		t.Fatal(err)
	}
	v := &s2.vips[s2.byID[idNAT4]]
	if v.sched != SchedMaglevBounded || v.bound != 1.5 || len(v.weights) != 3 || v.totalWeight != 6 {
		t.Errorf("after reload: %v bound %v weights %v (%d)", v.sched, v.bound, v.weights, v.totalWeight)
	}
}

// TestSchedulerZeroAllocs: a new flow costs no allocation whatever the
// scheduler, with a published load; a hit neither.
func TestSchedulerZeroAllocs(t *testing.T) {
	for s := Scheduler(0); s < numSchedulers; s++ {
		t.Run(s.String(), func(t *testing.T) {
			snap := mustSnapshot(t, schedSpec(s, 8))
			h := newHarnessOf(t, snap, 1<<14)
			board := &LoadBoard{}
			board.Store(snap.SumLoad(map[uint32]int{100: 5, 101: 7}))
			h.w.sch.board = board
			frame := build(t, pk{src: client4, dst: vipNAT4, sport: 1, dport: 80, flags: "S"})
			buf := make([]byte, Headroom+len(frame))
			d := &Desc{}
			port := uint16(1)
			miss := func() {
				copy(buf[Headroom:], frame)
				port++
				buf[Headroom+14+20] = byte(port >> 8)
				buf[Headroom+14+20+1] = byte(port)
				*d = Desc{Buf: buf, Off: Headroom, Len: len(frame), RxPort: PortIngress}
				h.w.Begin(h.snap, h.now, nil)
				h.w.Process(d)
				h.w.End(1)
			}
			miss()
			if d.Verdict != VerdictTX {
				t.Fatalf("setup: %v %v", d.Verdict, d.Reason)
			}
			if n := testing.AllocsPerRun(500, miss); n != 0 {
				t.Errorf("miss: %v allocations per packet", n)
			}
			hit := func() {
				copy(buf[Headroom:], frame)
				*d = Desc{Buf: buf, Off: Headroom, Len: len(frame), RxPort: PortIngress}
				h.w.Begin(h.snap, h.now, nil)
				h.w.Process(d)
				h.w.End(1)
			}
			if n := testing.AllocsPerRun(500, hit); n != 0 {
				t.Errorf("hit: %v allocations per packet", n)
			}
			if got := h.w.Counters().FlowMisses; got < 500 {
				t.Errorf("%d misses", got)
			}
		})
	}
}

// BenchmarkSchedulers is BenchmarkPipeline's NAT miss (a new flow every
// packet) for each scheduler over 3 and 32 backends: the scheduler's part
// of the cost of a new flow.
func BenchmarkSchedulers(b *testing.B) {
	for _, n := range []int{3, 32} {
		for s := Scheduler(0); s < numSchedulers; s++ {
			b.Run(fmt.Sprintf("%s/backends=%d", s, n), func(b *testing.B) {
				benchPipelineSpec(b, schedSpec(s, n), vipNAT4, true, 1, 64, -1)
			})
		}
	}
}

// TestWRRAcrossSnapshots: a publish that leaves a round-robin VIP's
// members as they were (here another VIP's backend weight changes before
// every new flow, as health events and slow-start steps elsewhere do)
// does not restart its round; each restart made the heaviest member,
// ties to the first, the next pick, so every flow went to one backend.
// A VIP whose members change starts a round anew, over the new members.
func TestWRRAcrossSnapshots(t *testing.T) {
	spec := schedSpec(SchedWRR, 3)
	for i := range spec.VIPs[0].Backends {
		spec.VIPs[0].Backends[i].Weight = 1
	}
	s := mustSnapshot(t, spec)
	c := NewChooser(s)
	// next publishes spec with edit applied, as the daemon publishes.
	next := func(edit func(*Spec)) {
		n := *spec
		n.VIPs = append([]VIPSpec(nil), spec.VIPs...)
		for i := range n.VIPs {
			n.VIPs[i].Backends = append([]BackendSpec(nil), spec.VIPs[i].Backends...)
		}
		edit(&n)
		var err error
		if s, err = NewSnapshotFrom(s, &n); err != nil {
			t.Fatal(err)
		}
		spec = &n
		c.SetSnapshot(s)
	}
	got := map[uint32]int{}
	for k := 0; k < 300; k++ {
		next(func(n *Spec) { n.VIPs[1].Backends[0].Weight = uint32(1 + k%2) })
		ref, ok := c.Choose(idNAT4, uint64(k))
		if !ok {
			t.Fatal("no choice")
		}
		got[ref]++
	}
	for ref := uint32(100); ref < 103; ref++ {
		if got[ref] != 100 {
			t.Errorf("equal weights, a publish elsewhere before every flow: backend %d got %d of 300 new flows, want 100 (%v)", ref, got[ref], got)
		}
	}
	// A fourth member: the round starts over the four.
	next(func(n *Spec) {
		n.VIPs[0].Backends = append(n.VIPs[0].Backends, BackendSpec{
			Ref: 103, Addr: netip.AddrFrom4([4]byte{198, 18, 2, 4}), Port: 8080, Weight: 1, State: BackendUp, MAC: macOf(103)})
	})
	clear(got)
	for k := 0; k < 400; k++ {
		ref, _ := c.Choose(idNAT4, uint64(k))
		got[ref]++
	}
	for ref := uint32(100); ref < 104; ref++ {
		if got[ref] != 100 {
			t.Errorf("after a fourth member joined: backend %d got %d of 400, want 100 (%v)", ref, got[ref], got)
		}
	}
}

// TestUntrackedNotCounted: a new flow the connection table has no room
// for is placed by Maglev packet by packet, and is no pinned flow for the
// load-aware schedulers; each of its packets used to count one more
// (least connections then steered away from backends it took for busy).
func TestUntrackedNotCounted(t *testing.T) {
	h := newHarnessOf(t, mustSnapshot(t, schedSpec(SchedLC, 3)), 16) // 2 buckets of 8 slots
	pinned := func() (n uint32) {
		for _, c := range h.w.sch.pinned {
			n += c
		}
		return n
	}
	// Fill the table with flows that prove themselves: data in three
	// distinct seconds after the SYN's, so that none can be evicted.
	for s := 0; s < 5; s++ {
		for port := uint16(1000); port < 1016; port++ {
			flags := "PA"
			if s == 0 {
				flags = "S"
			}
			h.run(build(t, pk{src: client4, dst: vipNAT4, sport: port, dport: 80, flags: flags, payload: payloadOf(10)}))
		}
		h.now += int64(time.Second)
	}
	base, untracked := pinned(), h.w.Counters().Untracked
	for i := 0; i < 20; i++ {
		h.run(build(t, pk{src: client4, dst: vipNAT4, sport: 2000, dport: 80, flags: "PA", payload: payloadOf(10)}))
	}
	if h.w.Counters().Untracked == untracked {
		t.Fatal("the table had room: the test needs it full")
	}
	if got := pinned(); got != base {
		t.Errorf("20 packets of an untracked flow added %d pinned flows", got-base)
	}
}
