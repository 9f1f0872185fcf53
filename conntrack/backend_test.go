package conntrack

import "testing"

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
	want := map[uint32]int{0: before[0] + before[2] + before[3], 1: before[1]}
	if len(after) != len(want) || after[0] != want[0] || after[1] != want[1] {
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
		if got[0] != 100 || got[1] != 100 || got[2] != 100 || len(got) != 3 {
			t.Errorf("step %d: counts %v, want 100 each of 0, 1, 2", c.n, got)
		}
	}
	if next := s.CountByBackend(map[uint32]int{}, 100, 5); next != 0 {
		t.Errorf("from past the end: next %d, want 0", next)
	}
}
