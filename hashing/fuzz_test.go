package hashing

import (
	"math/rand/v2"
	"testing"
)

// fuzzSizes are the table sizes FuzzMaglev picks from: tiny primes exercise
// the boundary M == n, large ones the realistic case.
var fuzzSizes = []uint32{2, 3, 5, 7, 13, 61, 251, 1021, 4093, 65537}

// FuzzMaglev builds weighted tables from arbitrary backend sets and checks the
// invariants that must hold for any input:
//
//   - every slot names a backend (Lookup never returns -1 or out of range);
//   - backend i owns between fair_i - 2 and fair_i + n·w_i/Σw + 1 slots,
//     fair_i = M·w_i/Σw; this follows from the credit scheme (after r rounds
//     backend i has claimed floor(r·w_i/W) slots, W the largest weight, and
//     the table fills during one round), so in particular every backend with
//     a fair share of two slots or more gets at least one;
//   - with equal weights slot counts differ by at most one;
//   - the table does not depend on the order of the input.
func FuzzMaglev(f *testing.F) {
	f.Add(uint16(3), uint32(1), uint64(1), uint8(9), uint64(1))
	f.Add(uint16(1000), uint32(1), uint64(2), uint8(9), uint64(2))
	f.Add(uint16(10), uint32(100), uint64(3), uint8(9), uint64(3))
	f.Add(uint16(13), uint32(5), uint64(4), uint8(4), uint64(4))
	f.Fuzz(func(t *testing.T, n uint16, maxWeight uint32, weightSeed uint64, sizePick uint8, permSeed uint64) {
		m := fuzzSizes[int(sizePick)%len(fuzzSizes)]
		nb := int(n) % 1200
		if uint32(nb) > m {
			nb = int(m)
		}
		r := rand.New(rand.NewPCG(weightSeed, 0))
		bs := make([]Backend, nb)
		for i := range bs {
			bs[i] = Backend{ID: backendID(i), Weight: 1}
			if maxWeight > 1 {
				bs[i].Weight = 1 + r.Uint32N(maxWeight)
			}
		}
		tab, err := NewMaglev(bs, m)
		if err != nil {
			t.Fatalf("n=%d m=%d: %v", nb, m, err)
		}
		if nb == 0 {
			if got := tab.Lookup(weightSeed); got != -1 {
				t.Fatalf("empty table: Lookup = %d", got)
			}
			return
		}
		counts := slotCounts(t, tab, nb)
		var sumW float64
		equal := true
		for _, b := range bs {
			sumW += float64(b.Weight)
			equal = equal && b.Weight == bs[0].Weight
		}
		lo, hi := counts[0], counts[0]
		for i, c := range counts {
			lo, hi = min(lo, c), max(hi, c)
			share := float64(bs[i].Weight) / sumW
			fair := float64(m) * share
			if float64(c) <= fair-2 || float64(c) > fair+float64(nb)*share+1 {
				t.Errorf("backend %d (weight %d of %.0f): %d slots of %d, fair share %.2f", i, bs[i].Weight, sumW, c, m, fair)
			}
		}
		if equal && hi-lo > 1 {
			t.Errorf("equal weights: slot counts %d..%d", lo, hi)
		}
		perm := shuffled(bs, rand.New(rand.NewPCG(permSeed, 1)))
		tab2, err := NewMaglev(perm, m)
		if err != nil {
			t.Fatal(err)
		}
		if !slicesEqual(slotIDs(tab, bs), slotIDs(tab2, perm)) {
			t.Error("table depends on input order")
		}
	})
}
