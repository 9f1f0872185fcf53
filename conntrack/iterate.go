package conntrack

import "math/bits"

// ForEach calls fn for every live (not timed-out) flow of the shard, in
// table order, until fn returns false. fn may Touch, SetBackend, SetFlags
// or Delete the entry it is given, but must not Insert or Advance.
//
// Like every Shard method it runs on the owner goroutine, and it walks the
// whole shard in one go, during which the worker forwards nothing. It is meant for tests and for small tables; for periodic
// control-plane counts use the bounded steps of CountByBackend.
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

// InactiveBit marks, in CountByBackend's counts, the key of a backend
// reference's inactive flows: dst[r|InactiveBit]. References stay below
// it.
const InactiveBit = 1 << 31

// CountByBackend adds to dst[r], for every backend reference r, the live
// flows pinned to r in n buckets (8 slots each) starting at bucket from,
// and to dst[r|InactiveBit] those of them not established — half-open
// (SynSent, Unconfirmed), closing, or a datagram flow not yet proven —
// as ipvsadm tells ActiveConn from InActConn; it returns the bucket to
// continue from: 0 once the walk has passed the last bucket. A full count
// starts at 0 and calls it until it returns 0.
//
// The owning worker runs one step between batches, so the pause per step
// is bounded by n (BenchmarkCountByBackend; README.md records a step of
// 1024) while the control plane waits for the sum. Flows inserted, removed or moved between steps may be missed or
// counted twice: the result is a gauge, not an invariant. It allocates only
// when dst gains a key.
func (s *Shard) CountByBackend(dst map[uint32]int, from, n int) int {
	if from < 0 || from >= len(s.buckets) {
		return 0
	}
	end := min(len(s.buckets), from+max(n, 1))
	for bi := from; bi < end; bi++ {
		b := &s.buckets[bi]
		for u := b.used(); u != 0; u &= u - 1 {
			i := bits.TrailingZeros32(u)
			if !s.expired(b, i) {
				r := b.recs[i&7].backend
				dst[r]++
				if st := State(b.state[i] & stateMask); st != StateEstablished && st != StateUDP {
					dst[r|InactiveBit]++
				}
			}
		}
	}
	if end == len(s.buckets) {
		return 0
	}
	return end
}
