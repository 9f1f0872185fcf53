package conntrack

import "math/bits"

// A shard is a flat []bucket. A bucket is five cache lines: one line of
// metadata for its eight slots, then the eight 32-byte records.
//
//	line 0   tags[8]×16b | seen[8]×32b | state[8]×8b | ovf 32b | pad
//	line 1-4 recs[8]: Key (24 B) | backend (4 B) | flags (1 B) | born (3 B)
//
// Everything that decides whether a slot matters — occupancy, age, state,
// which bucket of its pair it lives in — is on line 0, so expiry, eviction
// and relocation read one line per bucket and touch records only to move
// them. A lookup reads line 0 and the one record line whose tag matched;
// records are 32 bytes and never straddle a line. Large slices start on a
// page boundary, so in practice every bucket starts on a cache line; nothing
// depends on it for correctness.
//
// Cost: 320 bytes per 8 flows = 40 bytes per flow, no pointers (the GC never
// scans the table).
type bucket struct {
	// tags holds a 16-bit tag per slot, slot i in bits 16*(i%4) of word
	// i/4; 0 marks a free slot. A tag is the low 16 bits of the flow hash
	// (0 mapped to 1), so a lookup compares a key only ~once in 8192 misses.
	tags [2]uint64
	// seen is the tick of the slot's last packet.
	seen [slotsPerBucket]Tick
	// state is the slot's phase (State and proof level, see state.go),
	// plus altBit when the entry lives in the alternate bucket of its pair.
	state [slotsPerBucket]uint8
	// ovf counts entries whose primary bucket is this one but which live
	// in their alternate bucket. While it is zero a lookup that misses
	// here is a miss, without reading a second bucket.
	ovf uint32
	_   [4]byte
	// recs are the slots' payloads.
	recs [slotsPerBucket]record
}

// record is a slot's payload: the full key (tags only filter) and value.
type record struct {
	key     Key
	backend uint32
	flags   uint8
	// bornLo and bornHi are the low 24 bits of the tick the flow was
	// inserted in, for listings (Flow.Age): the record's padding, so free.
	// Only a listing reads them.
	bornHi uint8
	bornLo uint16
}

// set makes r the record of a new flow with key k on backend b, inserted
// at tick now, field by field: b.recs[i] = record{...} is built on the
// stack and copied in 16-byte moves whose loads wait for the narrower
// stores of the literal (a failed store-to-load forward on every insert).
func (r *record) set(k *Key, b uint32, now Tick) {
	r.key, r.backend, r.flags = *k, b, 0
	r.bornHi, r.bornLo = uint8(now>>16), uint16(now)
}

// bornMask is the range of a record's birth tick: ages wrap after 2^24
// ticks (194 days).
const bornMask = 1<<24 - 1

// born returns the low 24 bits of the record's birth tick.
func (r *record) born() Tick { return Tick(r.bornHi)<<16 | Tick(r.bornLo) }

const (
	slotsPerBucket = 8
	bucketBytes    = 320 // size of bucket; layout_test.go pins it
	fullMask       = 1<<slotsPerBucket - 1

	stateMask = 0x07 // State bits of bucket.state (level bits: state.go)
	altBit    = 0x80 // entry lives in the alternate bucket of its pair
)

// SWAR helpers over four 16-bit lanes of a uint64.
const (
	laneLow  = 0x0001_0001_0001_0001
	laneHigh = 0x8000_8000_8000_8000
)

// zeroLanes sets bit 15 of every lane of x that is zero, exactly: the add
// cannot carry out of a lane because (lane&0x7fff)+0x7fff <= 0xfffe.
func zeroLanes(x uint64) uint64 {
	return ^(((x &^ laneHigh) + ^uint64(laneHigh)) | x) & laneHigh
}

// laneBits packs the lane flags of zeroLanes (bits 15, 31, 47, 63) into bits
// 0-3. The multiply moves each flag to bits 48-51; the partial products that
// land elsewhere never reach those bits or carry into them.
func laneBits(m uint64) uint32 {
	const spread = 1<<48 | 1<<33 | 1<<18 | 1<<3
	return uint32(((m >> 15) * spread) >> 48 & 0xf)
}

// match returns a bit mask (bit i = slot i) of the slots whose tag is t.
// match(0) is the mask of free slots.
func (b *bucket) match(t uint16) uint32 {
	p := uint64(t) * laneLow
	return laneBits(zeroLanes(b.tags[0]^p)) | laneBits(zeroLanes(b.tags[1]^p))<<4
}

// room returns the number of free slots of b, from the zero lanes of its
// tags without packing them into a mask (bucket 1's flags shifted into the
// bits below bucket 0's): Insert asks it of both buckets of a pair for
// every new flow, and needs a slot mask only from a bucket with room.
func (b *bucket) room() int {
	return bits.OnesCount64(zeroLanes(b.tags[0]) | zeroLanes(b.tags[1])>>1)
}

// oldest returns the least tick of b's eight slots, free ones included.
func (b *bucket) oldest() Tick {
	t := &b.seen
	return min(min(t[0], t[1]), min(t[2], t[3]), min(t[4], t[5]), min(t[6], t[7]))
}

// used returns the mask of occupied slots.
func (b *bucket) used() uint32 { return ^b.match(0) & fullMask }

func (b *bucket) tag(i int) uint16 {
	return uint16(b.tags[i>>2&1] >> (16 * (i & 3)))
}

func (b *bucket) setTag(i int, t uint16) {
	w := &b.tags[i>>2&1]
	sh := 16 * (i & 3)
	*w = *w&^(0xffff<<sh) | uint64(t)<<sh
}

// find returns the slot holding k, or -1. Tag matches whose key differs are
// skipped; the key is the identity, the tag only a filter.
//
// It does not pack the tag matches into a slot mask as match does: the two
// words' lane flags go into one word as in room (bit 16j+15 is slot j, bit
// 16j+14 slot 4+j), and the slot of a flag is computed only for the flags
// there are, nearly always one: two multiplies fewer on every lookup. The
// order it tries matching slots in differs from match's, which only
// matters for a key held twice, which Insert never does.
func (b *bucket) find(t uint16, k *Key) int {
	p := uint64(t) * laneLow
	for m := zeroLanes(b.tags[0]^p) | zeroLanes(b.tags[1]^p)>>1; m != 0; m &= m - 1 {
		n := bits.TrailingZeros64(m)
		i := n>>4 | (^n&1)<<2
		if b.recs[i&7].key.equal(k) {
			return i
		}
	}
	return -1
}
