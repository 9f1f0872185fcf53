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
// The work is bounded: Config.ExpiryBucketsPerAdvance buckets (8 slots
// each) per call, never a sweep. Timed-out flows the cursor has not reached
// yet cost nothing meanwhile: lookups treat them as misses and inserts reuse
// their slots. The scan keeps Stats.Entries honest and returns the slots of
// idle buckets; one full round takes len(buckets)/K calls.
func (s *Shard) Advance(now Tick) {
	s.epoch++
	if now > s.now {
		s.now = now
	}
	s.expire(s.scan)
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
