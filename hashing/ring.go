package hashing

import (
	"fmt"
	"slices"
)

// DefaultVnodes is the number of virtual nodes per unit of weight on a Ring.
const DefaultVnodes = 160

// MaxRingPoints bounds the number of points on a Ring (12 bytes each).
const MaxRingPoints = 1 << 22

// seedRing seeds the hash of a backend's ID that its ring points derive from.
const seedRing = 0x510e527fade682d1 // fractional part of √11 (SHA-512 IV)

// Ring is consistent hashing on a ring with virtual nodes (Karger et al.,
// 1997), kept for comparison. Each backend places Weight·vnodes points on the
// 64-bit circle; a flow goes to the owner of the first point at or after its
// hash, wrapping around. Adding or removing a backend moves only the flows
// between its points and their predecessors, but the load is uneven: with v
// points per backend the largest share exceeds the mean by roughly
// sqrt(2·ln(n)/v) in relative terms.
type Ring struct {
	points []uint64 // sorted ascending
	owners []int32  // owners[k] is the caller index of the backend owning points[k]
}

var _ Table = (*Ring)(nil)

// NewRing builds a ring with vnodes points per unit of weight (use
// DefaultVnodes). Weights are not reduced by their GCD: the point count is
// Σ Weight·vnodes and must not exceed MaxRingPoints.
func NewRing(backends []Backend, vnodes int) (*Ring, error) {
	if vnodes < 1 {
		return nil, fmt.Errorf("hashing: ring with %d vnodes: %w", vnodes, ErrBadVnodes)
	}
	order, err := canonical(backends)
	if err != nil {
		return nil, err
	}
	// Checking as the sum grows keeps it far from overflow: every term is
	// below 2^32·2^22.
	var total uint64
	for _, b := range backends {
		if vnodes > MaxRingPoints {
			total = uint64(vnodes)
		} else {
			total += uint64(b.Weight) * uint64(vnodes)
		}
		if total > MaxRingPoints {
			return nil, fmt.Errorf("hashing: ring needs more than %d points: %w", MaxRingPoints, ErrTableTooLarge)
		}
	}
	type point struct {
		pos  uint64
		rank int32 // position in canonical order, breaks ties between equal positions
	}
	pts := make([]point, 0, total)
	for rank, i := range order {
		id := hashString(backends[i].ID, seedRing)
		for j := range uint64(backends[i].Weight) * uint64(vnodes) {
			pts = append(pts, point{pos: fmix(absorb(id, j)), rank: int32(rank)})
		}
	}
	slices.SortFunc(pts, func(a, b point) int {
		if a.pos != b.pos {
			if a.pos < b.pos {
				return -1
			}
			return 1
		}
		return int(a.rank - b.rank)
	})
	t := &Ring{points: make([]uint64, len(pts)), owners: make([]int32, len(pts))}
	for k, p := range pts {
		t.points[k] = p.pos
		t.owners[k] = int32(order[p.rank])
	}
	return t, nil
}

// Lookup returns the index of the backend for flow hash h, or -1 if the ring
// is empty. It is a binary search: O(log(points)).
func (t *Ring) Lookup(h uint64) int {
	lo, hi := 0, len(t.points)
	if hi == 0 {
		return -1
	}
	// Invariant: points[:lo] < h <= points[hi:].
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if t.points[mid] < h {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == len(t.points) {
		lo = 0
	}
	return int(t.owners[lo])
}
