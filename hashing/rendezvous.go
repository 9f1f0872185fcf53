package hashing

import "math"

// seedHRW seeds the hash of a backend's ID used in rendezvous scores.
const seedHRW = 0x9b05688c2b3e6c1f // fractional part of √13 (SHA-512 IV)

// Rendezvous is highest-random-weight hashing (Thaler and Ravishankar, 1998),
// kept for comparison. Every backend scores every flow and the highest score
// wins; removing a backend moves only its own flows and adding one moves only
// the flows it now wins, exactly the ideal 1/n, but a lookup costs O(n).
//
// With equal weights the score is the 64-bit hash s = fmix(h ^ key). With
// unequal weights it is the weighted score -w/ln(u), u = s mapped into (0, 1),
// which gives backend i a share of exactly w_i/Σw (Schindelhauer and
// Schomaker, "Weighted distributed hash tables", 2005). -1/ln(u) is
// increasing in u, so for equal weights both scores pick the same backend up
// to floating-point ties; the integer path is used because it is several
// times faster and has none. Ties go to the backend first in ID order.
type Rendezvous struct {
	keys    []uint64  // hash of each backend's ID, canonical order
	owners  []int32   // caller index of each backend, canonical order
	weights []float64 // nil when all weights are equal
}

var _ Table = (*Rendezvous)(nil)

// NewRendezvous builds a rendezvous table.
func NewRendezvous(backends []Backend) (*Rendezvous, error) {
	order, err := canonical(backends)
	if err != nil {
		return nil, err
	}
	t := &Rendezvous{keys: make([]uint64, len(order)), owners: make([]int32, len(order))}
	equal := true
	for k, i := range order {
		t.keys[k] = hashString(backends[i].ID, seedHRW)
		t.owners[k] = int32(i)
		equal = equal && backends[i].Weight == backends[order[0]].Weight
	}
	if !equal {
		t.weights = make([]float64, len(order))
		for k, i := range order {
			t.weights[k] = float64(backends[i].Weight)
		}
	}
	return t, nil
}

// Lookup returns the index of the backend for flow hash h, or -1 if the table
// has no backends.
func (t *Rendezvous) Lookup(h uint64) int {
	if len(t.keys) == 0 {
		return -1
	}
	best := 0
	if t.weights == nil {
		top := fmix(h ^ t.keys[0])
		for k := 1; k < len(t.keys); k++ {
			if s := fmix(h ^ t.keys[k]); s > top {
				best, top = k, s
			}
		}
		return int(t.owners[best])
	}
	top := math.Inf(-1)
	for k, key := range t.keys {
		if s := weightedScore(t.weights[k], fmix(h^key)); s > top {
			best, top = k, s
		}
	}
	return int(t.owners[best])
}

// weightedScore returns -w/ln(u) for u = s mapped into the open interval
// (0, 1): the top 52 bits plus one half, times 2^-52. With 52 bits the sum is
// exact in a float64, so u never rounds up to 1, where ln(u) = 0 would turn
// the best score into -Inf. The result is finite, positive and increasing
// in s.
func weightedScore(w float64, s uint64) float64 {
	u := (float64(s>>12) + 0.5) * 0x1p-52
	return -w / math.Log(u)
}
