package conntrack

import "math/bits"

// ForEach calls fn for every live (not timed-out) flow of the shard, in
// table order, until fn returns false. fn may Touch, SetBackend, SetFlags
// or Delete the entry it is given, but must not Insert or Advance.
//
// It walks the whole shard, so it is for the control plane, not the packet
// path — and like every Shard method it runs on the owner goroutine: the
// worker runs a requested scan between two batches and hands the result
// back (e.g. over a channel). It does not allocate, but the time it takes
// delays the next batch: about a millisecond per 100k slots.
func (s *Shard) ForEach(fn func(Entry) bool) {
	for bi := range s.buckets {
		b := &s.buckets[bi]
		for u := b.used(); u != 0; u &= u - 1 {
			i := bits.TrailingZeros32(u)
			if s.expired(b, i) {
				continue
			}
			if !fn(Entry{b, uint32(bi), uint32(i)}) {
				return
			}
		}
	}
}

// CountByBackend adds to dst[r] the number of live flows pinned to backend
// reference r, for every r. Same rules as ForEach: owner goroutine, between
// batches. It allocates only when dst gains a key.
func (s *Shard) CountByBackend(dst map[uint32]int) {
	for bi := range s.buckets {
		b := &s.buckets[bi]
		for u := b.used(); u != 0; u &= u - 1 {
			i := bits.TrailingZeros32(u)
			if !s.expired(b, i) {
				dst[b.recs[i&7].backend]++
			}
		}
	}
}
