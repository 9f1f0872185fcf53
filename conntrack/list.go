package conntrack

import "math/bits"

// Flow is a copy of one tracked flow, made for a listing (vipd conns): it
// stays valid after the shard changes, unlike an Entry.
type Flow struct {
	Key      Key
	Backend  uint32 // the opaque backend reference
	Flags    uint8  // the pipeline's opaque flag bits
	State    State
	LastSeen Tick // the tick of the flow's last packet
	// Age is how many ticks ago the flow was inserted, modulo 2^24
	// (194 days at one tick a second): a flow older than that shows
	// younger.
	Age Tick
}

// List appends to dst a copy of every live flow in n buckets (8 slots
// each) starting at bucket from for which keep returns true (nil keeps
// all), and returns dst and the bucket to continue from: 0 once the walk
// has passed the last bucket. It never grows dst: it stops before a bucket
// when dst has no room left for a whole bucket (8 flows), and returns that
// bucket to continue from with a new dst. A full listing starts at 0 and
// calls it until it returns 0.
//
// Like CountByBackend it runs on the owner goroutine, one bounded step
// between batches (at most n buckets scanned, at most cap(dst) flows
// copied); keep runs there too, on a Flow it must not retain. Flows
// inserted, removed or moved between steps may be missed or listed twice.
// It never allocates.
func (s *Shard) List(dst []Flow, from, n int, keep func(*Flow) bool) ([]Flow, int) {
	if from < 0 || from >= len(s.buckets) {
		return dst, 0
	}
	end := min(len(s.buckets), from+max(n, 1))
	for bi := from; bi < end; bi++ {
		if cap(dst)-len(dst) < slotsPerBucket {
			return dst, bi
		}
		b := &s.buckets[bi]
		for u := b.used(); u != 0; u &= u - 1 {
			i := bits.TrailingZeros32(u)
			if s.expired(b, i) {
				continue
			}
			// Copied into dst before keep sees it: a local for keep
			// to point at would escape, one allocation per step.
			r := &b.recs[i&7]
			dst = append(dst, Flow{Key: r.key, Backend: r.backend, Flags: r.flags, State: State(b.state[i] & stateMask),
				LastSeen: b.seen[i], Age: (s.now - r.born()) & bornMask})
			if keep != nil && !keep(&dst[len(dst)-1]) {
				dst = dst[:len(dst)-1]
			}
		}
	}
	if end == len(s.buckets) {
		return dst, 0
	}
	return dst, end
}
