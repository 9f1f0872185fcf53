package conntrack

import (
	"math/bits"
	"unsafe"

	"github.com/vipd/vipd/internal/prefetch"
)

// Prefetch and PrefetchRecord are the optional first passes of a batch:
// call Prefetch for every frame's flow, then PrefetchRecord for every one,
// then do the lookups (LookupAt), all at the flow's Loc. Alone, a lookup in a table far larger than the cache
// waits for two dependent memory reads (the bucket's metadata line, then
// the matching record's line); the passes start those reads for the whole
// batch, so that they overlap instead of following one another
// (BenchmarkLookupBatch measures the gain; README.md records it).
//
// The loads are prefetch hints (internal/prefetch), so nothing waits for
// them. Owner only, like
// every Shard method.

// Prefetch starts loading the metadata line of the flow's primary bucket.
func (s *Shard) Prefetch(l Loc) {
	prefetch.Line(unsafe.Pointer(&s.buckets[l.p]))
}

// PrefetchRecord reads the metadata line Prefetch loaded and starts loading
// what the flow's lookup reads next: the record line of the first slot
// whose tag matches, or, when none does, the alternate bucket's metadata
// line, which the lookup reads if some of the bucket's flows live there
// and an insert of the new flow reads in any case.
//
// It reports whether it went on to the alternate bucket: then a third
// pass, PrefetchAltRecord, can start loading the record there.
func (s *Shard) PrefetchRecord(l Loc) (alt bool) {
	p, t := l.p, l.t
	b := &s.buckets[p]
	if m := b.match(t); m != 0 {
		prefetch.Line(unsafe.Pointer(&b.recs[bits.TrailingZeros32(m)&7]))
		return false
	}
	prefetch.Line(unsafe.Pointer(&s.buckets[s.alternate(p, t)]))
	return true
}

// PrefetchAltRecord reads the alternate bucket's metadata line
// PrefetchRecord loaded and starts loading the record line of its first
// slot whose tag matches, if any: the flow lives in its alternate bucket
// when its primary is full, which at a high fill is one flow in several.
func (s *Shard) PrefetchAltRecord(l Loc) {
	b := &s.buckets[s.alternate(l.p, l.t)]
	if m := b.match(l.t); m != 0 {
		prefetch.Line(unsafe.Pointer(&b.recs[bits.TrailingZeros32(m)&7]))
	}
}
