package conntrack

import (
	"math/bits"
	"unsafe"

	"github.com/vipd/vipd/internal/prefetch"
)

// Advance moves the shard's clock to now (a clock never goes back: an
// earlier now is ignored), reclaims timed-out flows in the next few buckets
// of a round-robin cursor, and publishes the shard's counters for
// Table.Stats. The owner calls it once per batch, before processing it.
//
// The work is bounded and paced by the clock, not by the calls: each tick
// owes len(buckets)/Config.SweepPeriod buckets, which the calls of that
// tick examine at most Config.ExpiryBucketsPerAdvance at a time (8
// buckets, 64 slots), never a sweep. So a shard is swept once a
// SweepPeriod whether its worker takes a thousand batches a second or a
// hundred thousand (when they are too few to pay what the ticks owe, the
// sweep slows down and what is owed stops growing at one full round);
// the batches after a tick's buckets are done pay nothing. Timed-out
// flows the cursor has not reached yet cost nothing meanwhile: lookups
// treat them as misses and inserts reuse their slots. The scan keeps
// Stats.Entries honest and returns the slots of idle buckets.
func (s *Shard) Advance(now Tick) { s.advance(now, s.scan) }

// AdvanceIdle is Advance for a worker that has nothing to forward (its
// poll timed out): it may examine up to IdleExpiryBuckets buckets, so that
// the sweep keeps its period without traffic, when Advance calls are a
// few a second.
func (s *Shard) AdvanceIdle(now Tick) { s.advance(now, IdleExpiryBuckets) }

func (s *Shard) advance(now Tick, most int) {
	if now > s.now {
		// A lookup tests expiry against the clock: a later tick may
		// make it miss a flow it found before. The same tick does not,
		// and the scan's removals step the epoch themselves.
		s.epoch++
		// At most a round owed: an idle gap must not become a burst of
		// rounds, and the multiply cannot overflow.
		ticks := min(uint64(now-s.now), s.sweepTicks)
		s.credit = min(s.credit+ticks*s.sweepRate, s.nb)
		s.now = now
	}
	if n := min(uint64(most), s.credit); n > 0 {
		s.expire(int(n))
		s.credit -= n
	}
	s.publish()
}

// expire examines n buckets from the cursor and frees their timed-out slots.
func (s *Shard) expire(n int) {
	c := s.cursor
	for range n {
		b := &s.buckets[c]
		// A bucket whose every tick is within the shortest timeout holds
		// no timed-out flow: one minimum over its eight ticks instead of
		// a timeout lookup per flow. (Free slots keep their removal's
		// tick, remove, so they do not make a bucket look idle.)
		if s.now-b.oldest() <= s.minTimeout {
			if c++; uint64(c) == s.nb {
				c = 0
			}
			continue
		}
		for u := b.used(); u != 0; u &= u - 1 {
			i := bits.TrailingZeros32(u)
			if s.expired(b, i) {
				s.remove(b, c, i)
				s.c.expirations++
			}
		}
		if c++; uint64(c) == s.nb {
			c = 0
		}
	}
	s.cursor = c
	// Start loading the metadata lines the next call examines: it comes a
	// batch later, long enough for them to arrive, whereas each would
	// otherwise be a miss in a table larger than the caches (eight
	// buckets a batch are too few, and too far apart in time, for the
	// hardware's stream prefetcher).
	for range n {
		prefetch.Line(unsafe.Pointer(&s.buckets[c]))
		if c++; uint64(c) == s.nb {
			c = 0
		}
	}
}
