package hashing

import (
	"fmt"
	"math/bits"
)

// DefaultMaglevSize is the Maglev paper's table size M, a prime well above
// 100 times a typical backend count. NewMaglev applies no default: vipd's
// comes from configuration (config.DefaultTableSize, kept equal to this
// by a test there); the benchmarks and reports here use this one.
const DefaultMaglevSize = 65537

// MaxMaglevSize bounds M so that a configuration typo cannot allocate
// gigabytes (an entry is two bytes) and so that slot arithmetic fits uint32.
const MaxMaglevSize = 1 << 24

// Seeds of the two independent hashes of a backend's ID that give its
// preference list (offset and skip). They are fixed, not the flow seed: the
// table must be the same on every instance whatever its flow-hash seed.
const (
	seedOffset = 0x3c6ef372fe94f82b // fractional part of √5 (SHA-512 IV)
	seedSkip   = 0xa54ff53a5f1d36f1 // fractional part of √7 (SHA-512 IV)
)

// Maglev is a Maglev lookup table (Eisenbud et al., "Maglev: A Fast and
// Reliable Software Network Load Balancer", NSDI 2016, section 3.4), weighted.
//
// Every backend derives a preference list, a permutation of the M slots,
// from two hashes of its ID: slot(j) = (offset + j·skip) mod M, with
// offset = h1 mod M and skip = h2 mod (M-1) + 1; M prime makes every skip
// coprime to M, so the list visits every slot. Backends then take turns, in
// ID order, claiming the next still-empty slot of their own list until the
// table is full.
//
// Weights follow the credit scheme of Katran's MaglevHashV2: every round each
// backend gains its weight in credit, and a backend claims one slot per round
// in which its credit reaches the largest weight W (paying W). A backend of
// weight w thus claims in a fraction w/W of the rounds, and over the whole
// table ends up with M·w/Σw slots, within a slot or two. With equal weights
// this is exactly the paper's algorithm.
//
// The result balances almost perfectly (with equal weights, slot counts
// differ by at most one) and is nearly minimally disruptive: when a backend
// leaves, its slots are redistributed and only a small extra fraction of the
// others' slots move (see TestMaglevDisruption for the measured bound).
type Maglev struct {
	// entries[s] is 1 + the caller's index of the backend owning slot s, or 0
	// in a table built from no backends. len(entries) == M.
	entries []uint16
}

var _ Table = (*Maglev)(nil)

// NewMaglev builds the table of size m for backends. m must be prime, at
// least len(backends) and at most MaxMaglevSize; the paper advises m > 100·n
// for good balance under weights and small disruption. An empty backend set
// yields a table whose every lookup returns -1.
func NewMaglev(backends []Backend, m uint32) (*Maglev, error) {
	if !IsPrime(uint64(m)) {
		return nil, fmt.Errorf("hashing: maglev size %d: %w", m, ErrNotPrime)
	}
	if m > MaxMaglevSize {
		return nil, fmt.Errorf("hashing: maglev size %d, at most %d: %w", m, MaxMaglevSize, ErrTableTooLarge)
	}
	order, err := canonical(backends)
	if err != nil {
		return nil, err
	}
	if uint64(len(backends)) > uint64(m) {
		return nil, fmt.Errorf("hashing: maglev size %d for %d backends: %w", m, len(backends), ErrTableTooSmall)
	}
	t := &Maglev{entries: make([]uint16, m)}
	if len(backends) > 0 {
		populate(t.entries, backends, order)
	}
	return t, nil
}

// Lookup returns the index of the backend for flow hash h, or -1 if the table
// has no backends. The range reduction takes the high word of h·M (Lemire's
// multiply-shift), so it uses h's high bits and costs one multiply instead of
// a division.
func (t *Maglev) Lookup(h uint64) int {
	s, _ := bits.Mul64(h, uint64(len(t.entries)))
	return int(t.entries[s]) - 1
}

// Size returns the number of slots M.
func (t *Maglev) Size() uint32 { return uint32(len(t.entries)) }

// claimer is one backend's state during population.
type claimer struct {
	next   uint32 // next slot of its preference list to try
	skip   uint32 // step of the preference list, in [1, M-1]
	credit uint64 // accumulated weight, < W between rounds
	weight uint64
	entry  uint16 // value to store: caller index + 1
}

// populate fills entries (all zero on entry) with the weighted Maglev
// population loop. order is the canonical (ID) order of backends.
//
// Cost: about M·ln M slot probes in total (the paper's bound; ~2 ms for
// n = 1000, M = 65537), plus one credit update per backend per round. There
// are ceil(M/n) rounds with equal weights but up to M·W/Σw with skewed ones:
// n = 1000 with one backend 1000 times heavier than the rest takes ~30 ms,
// which is still only a control-plane cost.
func populate(entries []uint16, backends []Backend, order []int) {
	m := uint32(len(entries))
	cs := make([]claimer, len(order))
	var maxW uint64
	for k, i := range order {
		b := backends[i]
		cs[k] = claimer{
			next:   uint32(hashString(b.ID, seedOffset) % uint64(m)),
			skip:   uint32(hashString(b.ID, seedSkip)%uint64(m-1)) + 1,
			weight: uint64(b.Weight),
			entry:  uint16(i + 1),
		}
		maxW = max(maxW, uint64(b.Weight))
	}
	// m == 2 gives skip == 1 for all; any m gives 1 <= skip < m, so
	// next+skip < 2m <= 2^25 never overflows and one subtraction reduces it.
	filled := uint32(0)
	for {
		for k := range cs {
			c := &cs[k]
			c.credit += c.weight
			if c.credit < maxW {
				continue
			}
			c.credit -= maxW
			s := c.next
			for entries[s] != 0 {
				if s += c.skip; s >= m {
					s -= m
				}
			}
			entries[s] = c.entry
			if s += c.skip; s >= m {
				s -= m
			}
			c.next = s
			if filled++; filled == m {
				return
			}
		}
	}
}

// Slot returns the slot of flow hash h, the one Lookup reads.
func (t *Maglev) Slot(h uint64) uint32 {
	s, _ := bits.Mul64(h, uint64(len(t.entries)))
	return uint32(s)
}

// At returns the index of the backend owning slot s (s < Size), or -1 if
// the table has no backends. Slots s, s+1, ... after a flow's own are its
// order of preference beyond its first choice: Maglev fills the table
// taking turns among backends, so neighbouring slots mostly belong to
// different backends, and every box with the same table walks them alike.
func (t *Maglev) At(s uint32) int { return int(t.entries[s]) - 1 }
