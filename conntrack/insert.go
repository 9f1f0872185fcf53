package conntrack

import "math/bits"

// InsertResult tells the caller what Insert did.
type InsertResult uint8

const (
	// Untracked: both candidate buckets hold only live flows that may not
	// be evicted. Nothing was stored; the caller forwards the packet by
	// its stateless Maglev pick, which is what the flow would have been
	// pinned to anyway.
	Untracked InsertResult = iota
	// Inserted: stored in a free slot (possibly freed by moving another
	// flow to its other bucket).
	Inserted
	// ReplacedExpired: stored over a timed-out flow not yet reclaimed.
	ReplacedExpired
	// ReplacedUnestablished: stored over an evictable flow (one not yet
	// proven, Entry.Evictable) of the two buckets: the least proven, and
	// among those the one seen longest ago.
	ReplacedUnestablished
	// Existed: the key was already tracked; the existing entry is returned
	// unchanged (neither touched nor re-pinned).
	Existed
)

var resultNames = [...]string{"Untracked", "Inserted", "ReplacedExpired", "ReplacedUnestablished", "Existed"}

func (r InsertResult) String() string {
	if int(r) < len(resultNames) {
		return resultNames[r]
	}
	return "InsertResult(?)"
}

// Tracked reports whether the flow has an entry after Insert.
func (r InsertResult) Tracked() bool { return r != Untracked }

// Insert starts tracking k (flow hash h) pinned to backend, in the state set
// by the packet's protocol and TCP flags (see State), last seen now. It is
// meant for a key Lookup just missed; a live entry for k is returned as is.
//
// Where it goes, in order, all within the flow's two candidate buckets:
//  1. a free slot, in the less loaded bucket (the primary on ties);
//  2. the slot of a timed-out flow;
//  3. a slot freed by moving one of the 16 resident flows to its own other
//     bucket, if that has room (skipped when the shard is nearly full);
//  4. the slot of an evictable flow (not yet proven, Entry.Evictable): the
//     lowest proof level, and among those the one seen longest ago;
//  5. nowhere: Untracked. A proven flow is never evicted, so a flood of
//     new flows cannot unpin flows that have proven themselves over time.
//
// Every outcome is counted in Stats. Insert does a bounded amount of work:
// at most about 20 bucket metadata reads (the pair, 16 relocation probes,
// the primary of an evicted flow) and no loops over the table.
func (s *Shard) Insert(k *Key, h uint64, backend uint32, tcpFlags uint8) (Entry, InsertResult) {
	return s.InsertAt(k, s.Locate(h), backend, tcpFlags)
}

// InsertAt is Insert at the location Locate returned for k's hash.
func (s *Shard) InsertAt(k *Key, l Loc, backend uint32, tcpFlags uint8) (Entry, InsertResult) {
	p, t := l.p, l.t
	a := s.alternate(p, t)
	bp, ba := &s.buckets[p], &s.buckets[a]

	// A live duplicate would make lookups ambiguous; an expired one is
	// reclaimed here exactly as Lookup would.
	if e, ok := s.existing(bp, p, t, k); ok {
		return e, Existed
	}
	if bp.ovf != 0 {
		if e, ok := s.existing(ba, a, t, k); ok {
			return e, Existed
		}
	}
	return s.insertNew(k, p, a, t, backend, tcpFlags)
}

// InsertMissed is InsertAt for a key LookupAt has just missed at l, with
// no other call on the shard in between: the key is then known to be
// absent (LookupAt reclaimed an expired entry for it), so the search for
// a duplicate is skipped. The pipeline's miss path calls it.
func (s *Shard) InsertMissed(k *Key, l Loc, backend uint32, tcpFlags uint8) (Entry, InsertResult) {
	return s.insertNew(k, l.p, s.missAlt, l.t, backend, tcpFlags)
}

// insertNew places k, known to be absent, in its pair of buckets p and a.
func (s *Shard) insertNew(k *Key, p, a uint32, t uint16, backend uint32, tcpFlags uint8) (Entry, InsertResult) {
	bp, ba := &s.buckets[p], &s.buckets[a]

	st := initialPhase(k.Proto, tcpFlags)
	np, na := bp.room(), ba.room()
	switch {
	case np > 0 && np >= na:
		return s.place(bp, p, p, free(bp.used()), t, k, backend, st), Inserted
	case na > 0:
		return s.place(ba, a, p, free(ba.used()), t, k, backend, st), Inserted
	}

	// Both buckets full: one pass over their 16 slots finds both a
	// timed-out slot and the eviction victim.
	expired, victim := s.scanPair(bp, ba)
	if expired != 0 {
		b, bi, i := pairSlot(bp, p, ba, a, bits.TrailingZeros32(expired))
		s.c.evictedExpired++
		return s.replace(b, bi, p, i, t, k, backend, st), ReplacedExpired
	}
	if s.live < s.relocMax {
		if b, bi, i, ok := s.relocate(bp, p, ba, a); ok {
			s.c.relocations++
			return s.place(b, bi, p, i, t, k, backend, st), Inserted
		}
	}
	if victim != noVictim {
		b, bi, i := pairSlot(bp, p, ba, a, int(victim&pairSlotMask))
		s.c.evictedUnestablished++
		return s.replace(b, bi, p, i, t, k, backend, st), ReplacedUnestablished
	}
	s.c.untracked++
	return Entry{}, Untracked
}

// existing looks for k in bucket b the way Lookup does.
func (s *Shard) existing(b *bucket, bi uint32, t uint16, k *Key) (Entry, bool) {
	i := b.find(t, k)
	if i < 0 {
		return Entry{}, false
	}
	if s.expired(b, i) {
		s.remove(b, bi, i)
		s.c.expirations++
		return Entry{}, false
	}
	return Entry{b, bi, uint32(i)}, true
}

// free returns the lowest free slot of a bucket whose used mask is u.
func free(u uint32) int { return bits.TrailingZeros32(^u) }

// place writes a new flow into free slot i of bucket b (index bi); p is the
// flow's primary bucket, so bi != p means it lives in its alternate.
func (s *Shard) place(b *bucket, bi, p uint32, i int, t uint16, k *Key, backend uint32, ph uint8) Entry {
	i &= 7
	b.recs[i].set(k, backend, s.now)
	b.seen[i] = s.now
	b.state[i] = ph
	if bi != p {
		b.state[i] |= altBit
		s.buckets[p].ovf++
	}
	b.setTag(i, t)
	s.live++
	s.c.inserts++
	return Entry{b, bi, uint32(i)}
}

// A full pair's slots are numbered 0-15 in scanPair's results: the
// primary's eight, then the alternate's.
const pairSlotMask = 0xf

// noVictim is scanPair's victim when every slot of the pair is proven.
const noVictim = ^uint64(0)

// replace writes a new flow over the flow in slot i of bucket b (index
// bi): remove and then place, without freeing the slot in between (the
// live count stays). p is the new flow's primary bucket. It repeats
// place's writes rather than calling it: written as a call to place,
// every eviction cost 9 more instructions (callgrind, nat/miss 1,541 ->
// 1,550; again at 4da678c with the shared writes in a helper, which does
// not inline: 1,480 -> 1,491), which a flood pays on every packet.
func (s *Shard) replace(b *bucket, bi, p uint32, i int, t uint16, k *Key, backend uint32, ph uint8) Entry {
	i &= 7
	s.epoch++
	if b.state[i]&altBit != 0 { // the old flow's primary loses an overflow
		s.buckets[s.primary(bi, b.tag(i))].ovf--
	}
	b.recs[i].set(k, backend, s.now)
	b.seen[i] = s.now
	b.state[i] = ph
	if bi != p {
		b.state[i] |= altBit
		s.buckets[p].ovf++
	}
	b.setTag(i, t)
	s.c.inserts++
	return Entry{b, bi, uint32(i)}
}

// scanPair reads the metadata of a full pair once and returns the mask of
// its timed-out slots (bit j = pair slot j) and its eviction victim: of
// the evictable (unproven) flows, the one with the lowest proof level, and
// among those the one seen longest ago, the first in pair slot order on
// ties. A flow that has sent in more distinct ticks has shown more of what
// a spoofer must pay for, and one that has gone quiet longest is the least
// likely to be a live transfer.
//
// The victim is a rank, level<<36 | seen<<4 | pair slot, so that one
// unsigned minimum orders by level, then age, then slot (Tick is 32 bits:
// seen fills bits 4-35); its low four bits are the slot; noVictim if none.
//
// This runs for every new flow once the table is full, which is what a
// flood of new flows makes it, so on amd64 it is SSE4.1 (scanPairSIMD,
// ~90 instructions); elsewhere one branch-free pass in Go (scanPairGo,
// ~400) finds both the oldest flow, for the timeout check, and the victim.
func (s *Shard) scanPair(b0, b1 *bucket) (expired uint32, victim uint64) {
	var oldest Tick
	if haveSIMD {
		lv, c, o, best := scanPairSIMD(b0, b1)
		oldest, victim = o, noVictim
		if c != 0 {
			victim = lv<<36 | best
		}
	} else {
		oldest, victim = scanPairGo(b0, b1)
	}
	// Timeouts are checked slot by slot only when the pair's oldest flow
	// is older than the shortest timeout, which a flood of new flows,
	// cycling through the table far faster, rarely lets happen.
	if s.now-oldest > s.minTimeout {
		for j := range 2 * slotsPerBucket {
			if s.expired(pairBucket(b0, b1, j), j) {
				expired |= 1 << j
			}
		}
	}
	return expired, victim
}

// scanPairGo is scanPairSIMD's answer in Go: the oldest tick of the pair's
// sixteen slots and the victim rank.
func scanPairGo(b0, b1 *bucket) (oldest Tick, victim uint64) {
	o0, v0 := scanBucketGo(b0, 0)
	o1, v1 := scanBucketGo(b1, slotsPerBucket)
	return min(o0, o1), min(v0, v1)
}

// scanBucketGo is scanPairGo for one bucket, whose slots are pair slots
// base to base+7. Branch-free per slot, ~23 instructions each.
func scanBucketGo(b *bucket, base uint64) (oldest Tick, victim uint64) {
	oldest, victim = ^Tick(0), noVictim
	for i := range slotsPerBucket {
		st, seen := b.state[i], b.seen[i]
		oldest = min(oldest, seen)
		r := uint64(st&levelMask)<<(36-levelShift) | uint64(seen)<<4 | (base + uint64(i))
		if !evictable(st) {
			r = noVictim
		}
		victim = min(victim, r)
	}
	return oldest, victim
}

// pairBucket is the bucket of pair slot j (expired and the bucket's other
// accessors take the slot modulo 8).
func pairBucket(b0, b1 *bucket, j int) *bucket {
	if j < slotsPerBucket {
		return b0
	}
	return b1
}

// pairSlot maps a pair slot of scanPair to its bucket, index and slot.
func pairSlot(b0 *bucket, i0 uint32, b1 *bucket, i1 uint32, j int) (*bucket, uint32, int) {
	if j < slotsPerBucket {
		return b0, i0, j
	}
	return b1, i1, j - slotsPerBucket
}

// relocate frees a slot in the full pair by moving one resident flow to its
// own other bucket (one level of cuckoo displacement, no chains). The moved
// flow keeps its key, backend, state and age. It lets the shard fill much
// further before the first insert fails (TestOccupancy).
func (s *Shard) relocate(b0 *bucket, i0 uint32, b1 *bucket, i1 uint32) (*bucket, uint32, int, bool) {
	for _, c := range [2]struct {
		b  *bucket
		bi uint32
	}{{b0, i0}, {b1, i1}} {
		for i := range slotsPerBucket {
			oi := s.other(c.b, c.bi, i)
			o := &s.buckets[oi]
			u := o.used()
			if u == fullMask {
				continue
			}
			s.move(c.b, i, o, free(u))
			return c.b, c.bi, i, true
		}
	}
	return nil, 0, 0, false
}

// move copies slot i of b to free slot j of o, the other bucket of its
// pair, and frees slot i. The overflow count belongs to the primary: it
// grows when a flow leaves its primary, shrinks when it comes home.
func (s *Shard) move(b *bucket, i int, o *bucket, j int) {
	i, j = i&7, j&7
	s.epoch++
	o.recs[j] = b.recs[i]
	o.seen[j] = b.seen[i]
	if st := b.state[i]; st&altBit != 0 {
		o.state[j] = st &^ altBit
		o.ovf--
	} else {
		o.state[j] = st | altBit
		b.ovf++
	}
	o.setTag(j, b.tag(i))
	b.setTag(i, 0)
	b.state[i] = 0
}
