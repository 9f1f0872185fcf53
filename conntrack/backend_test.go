package conntrack

import (
	"maps"
	"testing"
)

// Backend states as the control plane's snapshot would hold them.
type health uint8

const (
	up health = iota
	draining
	down
	removed
)

// pool is a stand-in for the snapshot plus Maglev: new flows go to backends
// that are up, chosen by hash.
type pool map[uint32]health

func (p pool) pick(h uint64) uint32 {
	var ups []uint32
	for b := range uint32(8) {
		if st, ok := p[b]; ok && st == up {
			ups = append(ups, b)
		}
	}
	return ups[h%uint64(len(ups))]
}

// process is the pipeline's per-packet conntrack step, as DESIGN.md lays it
// out: hit → keep the pin unless its backend is gone or down; miss → pick and
// insert. It returns the backend the packet goes to.
func process(s *Shard, p pool, k Key, tcpFlags uint8) uint32 {
	h := hashKey(&k)
	e, ok := s.Lookup(&k, h)
	if !ok {
		b := p.pick(h)
		s.Insert(&k, h, b, tcpFlags)
		return b
	}
	if st, ok := p[e.Backend()]; !ok || st == down || st == removed {
		s.SetBackend(e, p.pick(h))
	}
	s.Touch(e, tcpFlags)
	return e.Backend()
}

func TestBackendRepickAndDrain(t *testing.T) {
	s := newShard(t, 4096)
	p := pool{0: up, 1: up, 2: up, 3: up}
	const flows = 1000
	pinned := make([]uint32, flows)
	for n := range flows {
		pinned[n] = process(s, p, testKey(n), tcpSYN)
		process(s, p, testKey(n), tcpACK)
	}
	before := map[uint32]int{}
	countAll(s, before, 3)
	for b := range uint32(4) {
		if before[b] == 0 {
			t.Fatalf("backend %d got no flows: %v", b, before)
		}
	}

	// Backend 1 drains, backend 2 goes down, backend 3 is removed.
	p[1], p[2] = draining, down
	delete(p, 3)
	for n := range flows {
		got := process(s, p, testKey(n), tcpACK)
		switch old := pinned[n]; old {
		case 0, 1:
			if got != old {
				t.Fatalf("flow %d on healthy/draining backend %d moved to %d", n, old, got)
			}
		case 2, 3:
			if got != 0 {
				t.Fatalf("flow %d on gone backend %d went to %d, want the only up backend 0", n, old, got)
			}
		}
	}
	if got, want := s.Stats().Repicks, uint64(before[2]+before[3]); got != want {
		t.Errorf("Repicks = %d, want %d (flows of backends 2 and 3)", got, want)
	}
	after := map[uint32]int{}
	countAll(s, after, 1000)
	// (The flows are all SYNs: every one also counts as inactive.)
	want := map[uint32]int{0: before[0] + before[2] + before[3], 1: before[1]}
	want[0|InactiveBit], want[1|InactiveBit] = want[0], want[1]
	if !maps.Equal(after, want) {
		t.Errorf("CountByBackend after changes = %v, want %v", after, want)
	}

	// New flows avoid the draining backend.
	for n := flows; n < 2*flows; n++ {
		if b := process(s, p, testKey(n), tcpSYN); b != 0 {
			t.Fatalf("new flow %d went to backend %d, want 0", n, b)
		}
	}
	checkInvariants(t, s)
}

func TestForEach(t *testing.T) {
	s := newShard(t, 256)
	for n := range 100 {
		e := insert(t, s, testKey(n), uint32(n), tcpSYN, Inserted)
		if n%2 == 0 {
			s.Touch(e, tcpACK)
			prove(e)
		}
	}
	// Odd flows are SynSent and time out after 5 ticks; ForEach skips them
	// even before the expiry scan reclaims them.
	at(s, 50)
	got := map[int]State{}
	s.ForEach(func(e Entry) bool {
		k := e.Key()
		got[testKeyIndex(k)] = e.State()
		if int(e.Backend()) != testKeyIndex(k) {
			t.Errorf("flow %d has backend %d", testKeyIndex(k), e.Backend())
		}
		return true
	})
	if len(got) != 50 {
		t.Fatalf("ForEach visited %d live flows, want 50", len(got))
	}
	for n, st := range got {
		if n%2 != 0 || st != StateEstablished {
			t.Fatalf("visited flow %d in state %v", n, st)
		}
	}

	// Deleting during the walk is allowed; stopping early works.
	visited := 0
	s.ForEach(func(e Entry) bool {
		s.Delete(e)
		visited++
		return visited < 10
	})
	if visited != 10 || s.Stats().Deletes != 10 {
		t.Fatalf("visited %d, deleted %d, want 10 each", visited, s.Stats().Deletes)
	}
	checkInvariants(t, s)
}

// countAll runs CountByBackend to completion in steps of n buckets and
// returns how many steps it took.
func countAll(s *Shard, dst map[uint32]int, n int) int {
	steps := 1
	for next := s.CountByBackend(dst, 0, n); next != 0; next = s.CountByBackend(dst, next, n) {
		steps++
	}
	return steps
}

func TestCountByBackendSteps(t *testing.T) {
	s := newShard(t, 800) // 100 buckets
	for n := range 300 {
		insert(t, s, testKey(n), uint32(n%3), tcpSYN, Inserted)
	}
	for _, c := range []struct{ n, steps int }{{1, 100}, {7, 15}, {100, 1}, {1000, 1}, {0, 100}} {
		got := map[uint32]int{}
		if steps := countAll(s, got, c.n); steps != c.steps {
			t.Errorf("step %d: %d calls, want %d", c.n, steps, c.steps)
		}
		// Only SYNs: every flow half-open, so inactive.
		if got[0] != 100 || got[1] != 100 || got[2] != 100 || got[InactiveBit|1] != 100 || len(got) != 6 {
			t.Errorf("step %d: counts %v, want 100 each of 0, 1, 2, all inactive", c.n, got)
		}
	}
	if next := s.CountByBackend(map[uint32]int{}, 100, 5); next != 0 {
		t.Errorf("from past the end: next %d, want 0", next)
	}
}

// TestRenew: a tuple given to a new connection is pinned to the new
// backend, in the state its first packet gives a new flow, unproven
// (evictable) again, with its age counted from the renewal and its flags
// cleared; the slot and the shard's structure stay as they were.
func TestRenew(t *testing.T) {
	for _, tc := range []struct {
		name  string
		key   Key
		flags uint8
		want  State
		level int
	}{
		{"tcp SYN", testKey(1), tcpSYN, StateSynSent, 0},
		{"tcp mid-stream", testKey(2), tcpACK, StateUnconfirmed, 1},
		{"udp", udpKey(3), 0, StateUDPNew, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newShard(t, 4096)
			s.Advance(100)
			e, r := establish(t, s, tc.key, 1)
			if !r.Tracked() {
				t.Fatal("not tracked")
			}
			e.SetFlags(0x81)
			s.Advance(115) // within every timeout of testTimeouts
			e, ok := lookup(s, tc.key)
			if !ok {
				t.Fatal("the flow expired")
			}
			epoch, repicks := s.Epoch(), s.Stats().Repicks
			s.Renew(e, 2, tc.flags, 0)
			if e.Backend() != 2 || e.State() != tc.want || e.Level() != tc.level || !e.Evictable() || e.Flags() != 0 || e.LastSeen() != 115 {
				t.Errorf("renewed: backend %d state %v level %d evictable %v flags %#x seen %d; want 2 %v %d true 0 115",
					e.Backend(), e.State(), e.Level(), e.Evictable(), e.Flags(), e.LastSeen(), tc.want, tc.level)
			}
			if s.Epoch() != epoch || s.Stats().Repicks != repicks+1 {
				t.Errorf("epoch %d→%d, repicks %d→%d: want the same epoch, one repick", epoch, s.Epoch(), repicks, s.Stats().Repicks)
			}
			s.Advance(118)
			fl, _ := s.List(make([]Flow, 0, 64), 0, len(s.buckets), nil)
			if len(fl) != 1 || fl[0].Age != 3 || fl[0].Backend != 2 {
				t.Errorf("listed %+v, want the flow on backend 2, aged 3 ticks (since the renewal)", fl)
			}
			checkInvariants(t, s)
		})
	}
}

// TestCountInactive: CountByBackend tells established (and proven
// datagram) flows from the others, as ipvsadm's ActiveConn and InActConn.
func TestCountInactive(t *testing.T) {
	s := newShard(t, 800)
	for n := range 30 {
		insert(t, s, testKey(n), 7, tcpSYN, Inserted)
	}
	// Ten of them proven: packets past the SYN in ProofTicks ticks.
	for range ProofTicks {
		s.Advance(s.Now() + 1)
		for n := range 10 {
			e, ok := lookup(s, testKey(n))
			if !ok {
				t.Fatalf("lost flow %d", n)
			}
			s.Touch(e, tcpACK)
		}
	}
	for n := range 10 {
		if e, _ := lookup(s, testKey(n)); e.State() != StateEstablished {
			t.Fatalf("flow %d: %v, want established", n, e.State())
		}
	}
	got := map[uint32]int{}
	countAll(s, got, 1000)
	if got[7] != 30 || got[7|InactiveBit] != 20 {
		t.Errorf("counts %v, want 30 flows of which 20 inactive", got)
	}
}
