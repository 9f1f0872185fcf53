package hashing

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// newRand returns a deterministic generator: every test input is reproducible.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x7669706474657374)) }

// backendID is the identity the control plane would give the i-th backend.
func backendID(i int) string { return fmt.Sprintf("198.18.%d.%d:8080", 1+i/250, 1+i%250) }

// equalBackends returns n backends of weight 1.
func equalBackends(n int) []Backend {
	bs := make([]Backend, n)
	for i := range bs {
		bs[i] = Backend{ID: backendID(i), Weight: 1}
	}
	return bs
}

// weightedBackends returns one backend per weight.
func weightedBackends(weights ...uint32) []Backend {
	bs := make([]Backend, len(weights))
	for i, w := range weights {
		bs[i] = Backend{ID: backendID(i), Weight: w}
	}
	return bs
}

// shuffled returns a shuffled copy of bs.
func shuffled(bs []Backend, r *rand.Rand) []Backend {
	out := append([]Backend(nil), bs...)
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// without returns a copy of bs without element i.
func without(bs []Backend, i int) []Backend {
	return append(append([]Backend(nil), bs[:i]...), bs[i+1:]...)
}

// slotCounts returns how many Maglev slots each backend (by caller index)
// owns, failing the test on any slot that does not name a backend.
func slotCounts(t testing.TB, tab *Maglev, n int) []int {
	t.Helper()
	counts := make([]int, n)
	for s, e := range tab.entries {
		if e == 0 || int(e) > n {
			t.Fatalf("slot %d holds %d, want 1..%d", s, e, n)
		}
		counts[e-1]++
	}
	return counts
}

// slotIDs returns the ID owning each Maglev slot.
func slotIDs(tab *Maglev, bs []Backend) []string {
	ids := make([]string, len(tab.entries))
	for s, e := range tab.entries {
		ids[s] = bs[e-1].ID
	}
	return ids
}

// maxOverMean returns max(counts)/mean(counts).
func maxOverMean(counts []int) float64 {
	total, top := 0, 0
	for _, c := range counts {
		total += c
		top = max(top, c)
	}
	return float64(top) * float64(len(counts)) / float64(total)
}

// chiSquare returns Pearson's statistic of counts against the uniform
// distribution, and the two-sided acceptance interval mean ± 6 standard
// deviations of the chi-square distribution with len(counts)-1 degrees of
// freedom (normal approximation, fine for hundreds of buckets). A statistic
// below the interval is as suspicious as one above it: sequential inputs
// through a weak hash land in the buckets too evenly.
func chiSquare(counts []int) (stat, lo, hi float64) {
	total := 0
	for _, c := range counts {
		total += c
	}
	want := float64(total) / float64(len(counts))
	for _, c := range counts {
		d := float64(c) - want
		stat += d * d / want
	}
	df := float64(len(counts) - 1)
	sd := math.Sqrt(2 * df)
	return stat, df - 6*sd, df + 6*sd
}
