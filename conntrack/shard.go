package conntrack

import "math/bits"

// Shard is one worker's part of the table. It is owned by a single
// goroutine: no Shard method is synchronized, and all must be called by the
// owner only (ownership may pass to another goroutine through the usual
// happens-before, e.g. a channel). Only Table.Stats reads a shard from
// elsewhere, through the counters Advance publishes.
//
// Each flow has two candidate buckets, both derived from the flow hash h
// passed by the caller, mixed with the table's secret key (see locate):
// the primary, from the high bits of the mix, and the alternate, at an
// offset derived from the 16-bit tag (the low bits of the mix). Because the
// offset depends only on the tag, which the slot stores, an entry's other
// bucket is known without its hash; relocation and overflow bookkeeping
// rely on that.
type Shard struct {
	buckets []bucket
	nb      uint64    // len(buckets), >= 2
	key     [2]uint64 // the table's secret (Config.BucketKey)
	now     Tick
	timeout [stateMask + 1]Tick // idle ticks per State
	// minTimeout is the shortest timeout of a live State: a slot seen
	// within it has not timed out, whatever its State.
	minTimeout Tick
	cursor     uint32 // next bucket the expiry scan examines
	// missAlt is the alternate bucket of the key LookupAt last missed,
	// which InsertMissed, called right after it, inserts.
	missAlt uint32
	scan    int // buckets examined per Advance, at most
	// sweepRate is how many buckets each tick adds to credit, the
	// buckets the expiry scan still owes: len(buckets)/SweepPeriod,
	// rounded up. sweepTicks is SweepPeriod in ticks.
	sweepRate, sweepTicks, credit uint64
	// relocMax is the live count at or above which Insert no longer tries
	// to make room by moving entries: near full, a move rarely succeeds,
	// and a flood of new flows would pay up to 16 bucket reads each.
	relocMax uint64
	live     uint64
	// epoch changes whenever an entry may stop being what a lookup of
	// its key returns: a flow leaves its slot (remove, replace, move)
	// or the clock advances (a lookup tests expiry). See Epoch.
	epoch uint64
	c     counters
	pub   published
}

// Multipliers of the bucket mix: those of MurmurHash3's 64-bit finalizer,
// odd, so each multiply is a bijection.
const (
	mixMul1 = 0xff51afd7ed558ccd
	mixMul2 = 0xc4ceb9fe1a85ec53
)

// mix maps a flow hash to the table's own hash: a bijection of h keyed by
// the table's secret. The flow hash is a public function of the packet
// (its seed must be shared by every box and has a public default), so
// anyone can compute h; without the secret nobody can tell which flows
// share a bucket. Each key word is folded in ahead of a multiply, so the
// carries a multiply spreads depend on the secret; the shift-xors fold the
// well-mixed high half into the low half, so the tag depends on every bit
// of h too.
func (s *Shard) mix(h uint64) uint64 {
	x := (h ^ s.key[0]) * mixMul1
	x ^= x >> 32
	x = (x ^ s.key[1]) * mixMul2
	return x ^ x>>32
}

// locate returns the primary bucket and the tag of a flow hash. Both come
// from the keyed mix of h: the bucket from the high bits (multiply-shift
// range reduction, no division, any bucket count), the tag from the low 16,
// so the two are independent.
func (s *Shard) locate(h uint64) (uint32, uint16) {
	l := s.Locate(h)
	return l.p, l.t
}

// offset is the distance from a flow's primary bucket to its alternate, in
// [1, nb-1], so the two always differ.
func (s *Shard) offset(t uint16) uint32 {
	return 1 + uint32(uint64(t)*(s.nb-1)>>16)
}

// alternate returns the alternate bucket of a flow with primary p and tag t.
func (s *Shard) alternate(p uint32, t uint16) uint32 {
	a := p + s.offset(t)
	if uint64(a) >= s.nb {
		a -= uint32(s.nb)
	}
	return a
}

// primary inverts alternate.
func (s *Shard) primary(a uint32, t uint16) uint32 {
	off := s.offset(t)
	if a >= off {
		return a - off
	}
	return a + uint32(s.nb) - off
}

// other returns the bucket of the pair that slot i of bucket bi is not in.
func (s *Shard) other(b *bucket, bi uint32, i int) uint32 {
	if b.state[i]&altBit != 0 {
		return s.primary(bi, b.tag(i))
	}
	return s.alternate(bi, b.tag(i))
}

// expired reports whether slot i of b has been idle longer than its
// state's timeout. Ticks never go backwards and never wrap, so now-seen is
// the idle time.
func (s *Shard) expired(b *bucket, i int) bool {
	return s.now-b.seen[i&7] > s.timeout[b.state[i&7]&stateMask]
}

// Live returns the number of flows the shard holds (expired ones not yet
// reclaimed included). Owner only.
func (s *Shard) Live() int { return int(s.live) }

// Now returns the tick of the last Advance.
func (s *Shard) Now() Tick { return s.now }

// Loc is where a flow lives in one shard: its primary bucket and tag, a
// function of the flow hash and the shard's secret (Locate). A caller that
// makes several passes over a batch (Prefetch, PrefetchRecord, LookupAt,
// InsertAt) computes it once per flow.
type Loc struct {
	p uint32
	t uint16
}

// Locate returns the location of flow hash h in this shard.
func (s *Shard) Locate(h uint64) Loc {
	// locate, written out: within the inlining budget, Locate runs in
	// the caller's frame once per packet.
	x := s.mix(h)
	hi, _ := bits.Mul64(x, s.nb)
	t := uint16(x)
	if t == 0 {
		t = 1 // 0 marks a free slot
	}
	return Loc{uint32(hi), t}
}

// Epoch returns the shard's epoch: while it stays the same, an Entry a
// lookup returned is the one a lookup of the same key would return again
// (Touch, SetBackend and SetFlags keep it; a flow placed in a free slot
// moves no other). A caller may keep an Entry and its epoch instead of
// looking the same flow up again. Owner only.
func (s *Shard) Epoch() uint64 { return s.epoch }

// Lookup returns the live entry for k, whose flow hash is h. A flow that
// has timed out but not yet been reclaimed is a miss; Lookup reclaims it on
// the spot (counted as an expiration). h must be the same function of the
// key on every call, as the hash that chose the flow's Maglev slot is.
func (s *Shard) Lookup(k *Key, h uint64) (Entry, bool) { return s.LookupAt(k, s.Locate(h)) }

// LookupAt is Lookup at the location Locate returned for k's hash.
func (s *Shard) LookupAt(k *Key, l Loc) (Entry, bool) {
	bi, t := l.p, l.t
	b := &s.buckets[bi]
	i := b.find(t, k)
	if i < 0 {
		// A miss: the alternate, read here only if some of the primary's
		// flows live there, is kept for InsertMissed in any case.
		a := s.alternate(bi, t)
		s.missAlt = a
		if b.ovf == 0 {
			return Entry{}, false
		}
		bi, b = a, &s.buckets[a]
		if i = b.find(t, k); i < 0 {
			return Entry{}, false
		}
	}
	if s.expired(b, i) {
		s.remove(b, bi, i)
		s.c.expirations++
		s.missAlt = s.alternate(l.p, t) // a miss too
		return Entry{}, false
	}
	return Entry{b, bi, uint32(i)}, true
}

// Touch accounts for one more packet of the flow: it moves the state and
// proof level along the machine documented on State, using the TCP flags
// byte of the packet (ignored for non-TCP flows) and whether the packet
// comes in a later tick than the flow's last one, and stamps the shard's
// current tick. Insert already accounts for the packet that created a flow.
func (s *Shard) Touch(e Entry, tcpFlags uint8) {
	i := e.i & 7
	st := e.b.state[i]
	later := min(s.now-e.b.seen[i], 1) // seen <= now: 1 iff a later tick
	e.b.state[i] = st&altBit | next[st&phaseMask][classOf[tcpFlags]][later]
	e.b.seen[i] = s.now
}

// SetBackend re-pins the flow to backend b. The pipeline calls it when the
// flow's backend has been removed or is down; a draining backend keeps its
// flows, so for those it is not called. Counted as a repick.
func (s *Shard) SetBackend(e Entry, b uint32) {
	e.b.recs[e.i&7].backend = b
	s.c.repicks++
}

// Renew gives the flow's tuple to a new connection, whose first packet has
// TCP flags tcpFlags (ignored for non-TCP flows): pinned to backend b,
// with the pipeline's flags set to flags, the state and proof level that
// packet gives a new flow (a SYN: SynSent, level 0), and its age counted
// from now (Flow.Age). The pipeline calls it when a client reuses a tuple
// for a new connection; nothing of the old connection carries over, its
// proof of life least of all. Counted as a repick. e stays valid.
func (s *Shard) Renew(e Entry, b uint32, tcpFlags, flags uint8) {
	i := e.i & 7
	r := &e.b.recs[i]
	r.backend, r.flags = b, flags
	r.bornHi, r.bornLo = uint8(s.now>>16), uint16(s.now)
	e.b.state[i] = e.b.state[i]&altBit | initialPhase(r.key.Proto, tcpFlags)
	e.b.seen[i] = s.now
	s.c.repicks++
}

// Delete removes the flow (e.g. on RST, or by an operator). e and every
// other Entry of the same slot are invalid afterwards.
func (s *Shard) Delete(e Entry) {
	s.remove(e.b, e.bi, int(e.i&7))
	s.c.deletes++
}

// remove frees slot i of bucket b (index bi), keeping the overflow count of
// the entry's primary bucket exact. The free slot's tick becomes now, so
// that the expiry scan's idle test (expire) does not see a departed flow's
// age.
func (s *Shard) remove(b *bucket, bi uint32, i int) {
	s.epoch++
	if b.state[i&7]&altBit != 0 {
		s.buckets[s.primary(bi, b.tag(i))].ovf--
	}
	b.setTag(i, 0)
	b.state[i&7] = 0
	b.seen[i&7] = s.now
	s.live--
}
