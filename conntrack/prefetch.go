package conntrack

// Prefetch starts loading the metadata lines of both candidate buckets of
// flow hash h, without waiting for them. It is an optional first pass over
// a batch: call it for every frame, then do the lookups. Alone, a lookup in
// a table far larger than the cache waits for up to three dependent memory
// reads; a prefetch pass overlaps the first of them across the batch
// (BenchmarkLookupBatch measures the gain; README.md records it). The
// record line is still read when the lookup finds its slot.
//
// Go has no prefetch instruction, so this issues ordinary loads and folds
// the values into a field nothing reads: the CPU does not wait for a load
// until its value is needed, and the compiler cannot drop a load whose
// value is stored. Owner only, like every Shard method.
func (s *Shard) Prefetch(h uint64) {
	p, t := s.locate(h)
	a := s.alternate(p, t)
	s.sink += s.buckets[p].tags[0] + s.buckets[a].tags[0]
}
