package conntrack

import "testing"

// TestZeroAllocs pins the hot-path promise of DESIGN.md: no allocation per
// packet, whatever path Insert takes.
func TestZeroAllocs(t *testing.T) {
	s := newShard(t, 16) // one bucket pair: easy to make full
	hit := testKey(1)
	establish(t, s, hit, 1)
	miss := testKey(2)
	hHit, hMiss := hashKey(&hit), hashKey(&miss)

	for _, c := range []struct {
		name string
		fn   func()
	}{
		{"Lookup hit", func() { s.Lookup(&hit, hHit) }},
		{"Lookup miss", func() { s.Lookup(&miss, hMiss) }},
		{"Insert+Delete", func() {
			e, _ := s.Insert(&miss, hMiss, 2, tcpSYN)
			s.Delete(e)
		}},
		{"Insert existing", func() { s.Insert(&hit, hHit, 2, tcpSYN) }},
		{"Touch", func() {
			e, _ := s.Lookup(&hit, hHit)
			s.Touch(e, tcpACK)
		}},
		{"SetBackend", func() {
			e, _ := s.Lookup(&hit, hHit)
			s.SetBackend(e, 3)
		}},
		{"Prefetch", func() { s.Prefetch(s.Locate(hMiss)) }},
		{"PrefetchRecord", func() { s.PrefetchRecord(s.Locate(hHit)) }},
		{"PrefetchAltRecord", func() { s.PrefetchAltRecord(s.Locate(hHit)) }},
		{"Advance", func() { s.Advance(s.Now() + 1) }},
	} {
		if a := testing.AllocsPerRun(100, c.fn); a != 0 {
			t.Errorf("%s: %v allocs/op, want 0", c.name, a)
		}
	}

	// Advance ran the clock past every timeout; start over from tick 0.
	s = newShard(t, 16)
	establish(t, s, hit, 1)

	// Full pair of established flows: the refusal path.
	for n := 10; s.Stats().Entries < 16; n++ {
		establish(t, s, testKey(n), 1)
	}
	if a := testing.AllocsPerRun(100, func() {
		if _, r := s.Insert(&miss, hMiss, 2, tcpSYN); r != Untracked {
			t.Fatalf("Insert into a full pair: %v", r)
		}
	}); a != 0 {
		t.Errorf("Insert untracked: %v allocs/op, want 0", a)
	}

	// Full pair with an evictable flow: the eviction path (each insert
	// evicts the previous one).
	e, _ := s.Lookup(&hit, hHit)
	s.Delete(e)
	s.Insert(&hit, hHit, 1, tcpSYN)
	flip := []Key{hit, miss}
	j := 0
	if a := testing.AllocsPerRun(100, func() {
		j ^= 1
		k := &flip[j]
		s.Insert(k, hashKey(k), 2, tcpSYN)
	}); a != 0 {
		t.Errorf("Insert evicting: %v allocs/op, want 0", a)
	}
	if s.Stats().EvictedUnestablished == 0 {
		t.Error("eviction path not exercised")
	}
}
