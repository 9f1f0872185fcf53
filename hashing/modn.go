package hashing

import "fmt"

// MaxModNSlots bounds the slot array of a ModN table (see NewModN).
const MaxModNSlots = 1 << 20

// ModN is the classic hash-mod-N assignment, kept only for comparison: it
// balances perfectly but moves almost every flow when the set changes (going
// from 10 to 11 backends keeps only about 1/11 of flows in place).
//
// Weights repeat a backend's slot: the slot array holds each backend
// Weight/g times in ID order, g being the GCD of all weights, and a flow goes
// to slots[h mod len(slots)]. The reduction is a true modulo, not
// multiply-shift, because multiply-shift keeps far more flows in place when N
// changes and would flatter the algorithm this type exists to show.
type ModN struct {
	slots []int32 // caller indices
}

var _ Table = (*ModN)(nil)

// NewModN builds a ModN table. The total number of slots, Σ Weight/GCD, must
// not exceed MaxModNSlots.
func NewModN(backends []Backend) (*ModN, error) {
	order, err := canonical(backends)
	if err != nil {
		return nil, err
	}
	g := gcdWeights(backends)
	var total uint64
	for _, b := range backends {
		total += uint64(b.Weight / g)
	}
	if total > MaxModNSlots {
		return nil, fmt.Errorf("hashing: mod-N needs %d slots, at most %d: %w", total, MaxModNSlots, ErrTableTooLarge)
	}
	t := &ModN{slots: make([]int32, 0, total)}
	for _, i := range order {
		for range backends[i].Weight / g {
			t.slots = append(t.slots, int32(i))
		}
	}
	return t, nil
}

// Lookup returns the index of the backend for flow hash h, or -1 if the table
// has no backends.
func (t *ModN) Lookup(h uint64) int {
	if len(t.slots) == 0 {
		return -1
	}
	return int(t.slots[h%uint64(len(t.slots))])
}
