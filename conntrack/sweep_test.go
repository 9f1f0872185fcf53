package conntrack

import (
	"testing"
	"time"
)

// TestSweepPace: the expiry scan goes round a shard once a SweepPeriod,
// paced by the clock: however many Advance calls a tick brings, they
// examine the buckets that tick owes and no more; calls too few to pay it
// slow the sweep down without letting the debt grow past a round; an idle
// worker's AdvanceIdle pays up to IdleExpiryBuckets at once.
func TestSweepPace(t *testing.T) {
	const nb = 1000 // buckets
	newSweepShard := func(t *testing.T) *Shard {
		tab, err := New(Config{Capacity: nb * slotsPerBucket, Shards: 1, Timeouts: testTimeouts,
			BucketKey: testBucketKey, SweepPeriod: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return tab.Shard(0)
	}
	// examined returns how far the cursor moved during f (it never goes
	// round more than once here).
	examined := func(s *Shard, f func()) int {
		before := s.cursor
		f()
		return int((uint64(s.cursor) + nb - uint64(before)) % nb)
	}

	t.Run("a tick's buckets, however many calls", func(t *testing.T) {
		s := newSweepShard(t)
		if s.sweepRate != 100 {
			t.Fatalf("sweepRate %d, want 100 (1,000 buckets in 10 ticks)", s.sweepRate)
		}
		for tick := Tick(1); tick <= 3; tick++ {
			n := examined(s, func() {
				for range 1000 { // a busy worker's batches in one tick
					s.Advance(tick)
				}
			})
			if n != 100 {
				t.Fatalf("tick %d: 1,000 calls examined %d buckets, want the tick's 100", tick, n)
			}
		}
		// Calls at a tick whose buckets are paid examine none.
		if n := examined(s, func() { s.Advance(3) }); n != 0 {
			t.Fatalf("a paid tick's call examined %d buckets", n)
		}
	})

	t.Run("few calls: the debt stops at a round", func(t *testing.T) {
		s := newSweepShard(t)
		for tick := Tick(1); tick <= 40; tick++ {
			if n := examined(s, func() { s.Advance(tick) }); n != DefaultExpiryBucketsPerAdvance {
				t.Fatalf("tick %d: examined %d, want %d (the per-call bound)", tick, n, DefaultExpiryBucketsPerAdvance)
			}
		}
		// Each tick tops the debt up to the cap, a round, and its one
		// call pays 8 of it.
		if want := uint64(nb - DefaultExpiryBucketsPerAdvance); s.credit != want {
			t.Fatalf("owed %d buckets after 40 ticks of one call each, want a round less a call (%d)", s.credit, want)
		}
	})

	t.Run("idle: a gap's debt in one call, a round at most", func(t *testing.T) {
		s := newSweepShard(t)
		for i := range 3000 {
			insert(t, s, testKey(i), 1, tcpSYN, Inserted)
		}
		// An hour later every flow has timed out; the idle worker's
		// next call owes a whole round (not 360 of them) and pays it.
		s.AdvanceIdle(3600)
		if s.cursor != 0 {
			t.Fatalf("cursor at %d after one idle call, want 0 (a round from 0)", s.cursor)
		}
		if st := s.Stats(); st.Entries != 0 || st.Expirations != 3000 || s.credit != 0 {
			t.Fatalf("after an idle call an hour later: %+v, still owed %d", st, s.credit)
		}
		checkInvariants(t, s)
	})

	t.Run("busy: timed-out flows gone within a period", func(t *testing.T) {
		s := newSweepShard(t)
		for i := range 3000 {
			insert(t, s, testKey(i), 1, tcpSYN, Inserted)
		}
		// The worker is busy from tick 1 on (50 batches a tick); every
		// flow has timed out from start on, and the sweep reaches them
		// in the ten ticks that follow.
		start := Tick(Ticks(testTimeouts.TCPUnestablished) + 1)
		for tick := Tick(1); tick < start+10; tick++ {
			for range 50 {
				s.Advance(tick)
			}
			if tick == start+4 {
				if e := s.Stats().Entries; e == 0 || e == 3000 {
					t.Fatalf("half a period in: %d flows left; the sweep should be about half done", e)
				}
			}
		}
		if st := s.Stats(); st.Entries != 0 || st.Expirations != 3000 {
			t.Fatalf("a period of busy ticks after the timeout: %+v", st)
		}
		checkInvariants(t, s)
	})
}
