package hashing

import (
	"errors"
	"testing"
)

func TestMaglevBalance(t *testing.T) {
	for _, n := range []int{1, 2, 3, 10, 100, 1000} {
		tab, err := NewMaglev(equalBackends(n), DefaultMaglevSize)
		if err != nil {
			t.Fatal(err)
		}
		counts := slotCounts(t, tab, n)
		lo, hi := counts[0], counts[0]
		for _, c := range counts {
			lo, hi = min(lo, c), max(hi, c)
		}
		r := maxOverMean(counts)
		t.Logf("n=%d: slots per backend %d..%d, max/mean %.4f", n, lo, hi, r)
		if r > 1.02 {
			t.Errorf("n=%d: max/mean table share %.4f, want <= 1.02", n, r)
		}
		// With equal weights every backend claims one slot per round and the
		// table fills during the last round: counts differ by at most one.
		if hi-lo > 1 {
			t.Errorf("n=%d: slot counts range %d..%d, want a spread of at most 1", n, lo, hi)
		}
	}
}

func TestMaglevWeights(t *testing.T) {
	// The credit scheme gives backend i M·w_i/Σw slots within about two, so
	// the relative error is about 2/(expected slots). Every mix below gives
	// each backend at least ~200 of the 65537 slots, which keeps that under
	// 1%; the assertion is the 2% of the issue.
	many := make([]uint32, 50)
	r := newRand(4)
	for i := range many {
		many[i] = 1 + r.Uint32N(10)
	}
	mixes := []struct {
		name    string
		weights []uint32
	}{
		{"1:2", []uint32{1, 2}},
		{"1:2:3:4", []uint32{1, 2, 3, 4}},
		{"three-small-one-big", []uint32{1, 1, 1, 10}},
		{"1:100", []uint32{1, 100}},
		{"1..10", []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{"primes", []uint32{3, 5, 7, 11, 13}},
		{"large-values", []uint32{1_000_000_000, 3_000_000_000, 4_000_000_000}},
		{"50-random-1..10", many},
	}
	for _, mix := range mixes {
		t.Run(mix.name, func(t *testing.T) {
			bs := weightedBackends(mix.weights...)
			tab, err := NewMaglev(bs, DefaultMaglevSize)
			if err != nil {
				t.Fatal(err)
			}
			counts := slotCounts(t, tab, len(bs))
			var sumW float64
			for _, w := range mix.weights {
				sumW += float64(w)
			}
			worst := 0.0
			for i, w := range mix.weights {
				want := float64(w) / sumW
				got := float64(counts[i]) / DefaultMaglevSize
				rel := got/want - 1
				worst = max(worst, rel, -rel)
				if rel > 0.02 || rel < -0.02 {
					t.Errorf("backend %d (weight %d): share %.5f, weight share %.5f, off by %.2f%%", i, w, got, want, 100*rel)
				}
			}
			t.Logf("worst relative error %.3f%%", 100*worst)
		})
	}
}

// TestMaglevDisruption removes one backend of n and counts the slots that
// change owner (for uniform flow hashes, the fraction of flows remapped).
//
// The removed backend's slots must all move: that is the ideal 1/n. Maglev is
// not perfectly minimal on top of that: the survivors' preference lists are
// walked again and, late in the population loop where free slots are
// contested, some claim a slot a different survivor had before. The paper
// accepts this, favouring balance over minimal disruption (section 3.4), and
// a larger M shrinks it. Measured with M = 65537, removing each backend in
// turn at n = 10 and 40–50 of them at n = 100 and 1000: 0.2–1.0% of the
// survivors' slots move (mean ≈ 0.6%), and with M = 655373 about a quarter
// to a half of that. The bound asserted
// is 1.5% of the survivors' flows, so the total remapped is at most the
// removed share plus 1.5 points. Adding a backend is the mirror image.
func TestMaglevDisruption(t *testing.T) {
	const extraBound = 0.015
	for _, n := range []int{3, 10, 100, 1000} {
		bs := equalBackends(n)
		before, err := NewMaglev(bs, DefaultMaglevSize)
		if err != nil {
			t.Fatal(err)
		}
		idsBefore := slotIDs(before, bs)
		for k := range min(n, 5) {
			gone := k * n / min(n, 5)
			rest := without(bs, gone)
			after, err := NewMaglev(rest, DefaultMaglevSize)
			if err != nil {
				t.Fatal(err)
			}
			removed, survivors := disruption(idsBefore, slotIDs(after, rest), bs[gone].ID)
			t.Logf("n=%d remove %s: removed share %.3f%% (1/n = %.3f%%), survivors' slots moved %.3f%%",
				n, bs[gone].ID, 100*removed, 100/float64(n), 100*survivors)
			if survivors > extraBound {
				t.Errorf("n=%d remove %s: %.3f%% of the survivors' flows moved, want <= %.1f%%", n, bs[gone].ID, 100*survivors, 100*extraBound)
			}
			if r := removed * float64(n); r < 0.98 || r > 1.02 {
				t.Errorf("n=%d: the removed backend owned %.3f%% of the table, want 1/n = %.3f%%", n, 100*removed, 100/float64(n))
			}
		}
		// Add: the newcomer takes about 1/(n+1); every survivor slot it did
		// not take should stay where it was.
		grown := append(equalBackends(n), Backend{ID: "198.18.255.254:8080", Weight: 1})
		after, err := NewMaglev(grown, DefaultMaglevSize)
		if err != nil {
			t.Fatal(err)
		}
		added, others := disruption(slotIDs(after, grown), idsBefore, grown[n].ID)
		t.Logf("n=%d add one: newcomer share %.3f%%, other slots moved %.3f%%", n, 100*added, 100*others)
		if others > extraBound {
			t.Errorf("n=%d add one: %.3f%% of the other flows moved, want <= %.1f%%", n, 100*others, 100*extraBound)
		}
	}
}

// disruption compares two slot→ID maps of equal size. It returns the share of
// slots owned by id in a and, among the slots not owned by id in a, the share
// whose owner differs in b.
func disruption(a, b []string, id string) (share, moved float64) {
	own, other, changed := 0, 0, 0
	for s := range a {
		if a[s] == id {
			own++
			continue
		}
		other++
		if a[s] != b[s] {
			changed++
		}
	}
	return float64(own) / float64(len(a)), float64(changed) / float64(other)
}

func TestMaglevEmpty(t *testing.T) {
	for _, bs := range [][]Backend{nil, {}} {
		tab, err := NewMaglev(bs, DefaultMaglevSize)
		if err != nil {
			t.Fatalf("NewMaglev(%v): %v, want an empty table", bs, err)
		}
		if tab.Size() != DefaultMaglevSize {
			t.Errorf("Size() = %d, want %d", tab.Size(), DefaultMaglevSize)
		}
		for _, h := range []uint64{0, 1, 1 << 63, ^uint64(0)} {
			if got := tab.Lookup(h); got != -1 {
				t.Errorf("empty table: Lookup(%#x) = %d, want -1", h, got)
			}
		}
	}
}

func TestMaglevLookupRange(t *testing.T) {
	// The extreme hashes map to the first and last slot.
	bs := equalBackends(7)
	tab, err := NewMaglev(bs, 13)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tab.Lookup(0), int(tab.entries[0])-1; got != want {
		t.Errorf("Lookup(0) = %d, want slot 0's owner %d", got, want)
	}
	if got, want := tab.Lookup(^uint64(0)), int(tab.entries[12])-1; got != want {
		t.Errorf("Lookup(max) = %d, want slot 12's owner %d", got, want)
	}
	r := newRand(5)
	for range 10000 {
		if i := tab.Lookup(r.Uint64()); i < 0 || i >= len(bs) {
			t.Fatalf("Lookup returned %d, want 0..%d", i, len(bs)-1)
		}
	}
}

func TestMaglevErrors(t *testing.T) {
	firstPrimeAbove := func(n uint64) uint32 {
		for !IsPrime(n) {
			n++
		}
		return uint32(n)
	}
	cases := []struct {
		name     string
		backends []Backend
		m        uint32
		want     error
	}{
		{"m zero", equalBackends(1), 0, ErrNotPrime},
		{"m one", equalBackends(1), 1, ErrNotPrime},
		{"m even", equalBackends(3), 65536, ErrNotPrime},
		{"m composite odd", equalBackends(3), 65535, ErrNotPrime},
		{"m Carmichael", equalBackends(3), 561, ErrNotPrime},
		{"m below n", equalBackends(5), 3, ErrTableTooSmall},
		{"m too large", equalBackends(1), firstPrimeAbove(MaxMaglevSize), ErrTableTooLarge},
		{"duplicate ID", []Backend{{"a:1", 1}, {"b:1", 1}, {"a:1", 2}}, 13, ErrDuplicateID},
		{"zero weight", []Backend{{"a:1", 1}, {"b:1", 0}}, 13, ErrZeroWeight},
		{"empty ID", []Backend{{"", 1}}, 13, ErrEmptyID},
		{"too many backends", equalBackends(MaxBackends + 1), firstPrimeAbove(MaxBackends + 1), ErrTooManyBackends},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tab, err := NewMaglev(tc.backends, tc.m)
			if !errors.Is(err, tc.want) {
				t.Fatalf("NewMaglev(m=%d) error = %v, want %v", tc.m, err, tc.want)
			}
			if tab != nil {
				t.Errorf("NewMaglev returned a table with error %v", err)
			}
		})
	}
	// The boundary cases that must succeed.
	for _, tc := range []struct {
		n int
		m uint32
	}{{2, 2}, {3, 3}, {13, 13}, {1, 65537}} {
		tab, err := NewMaglev(equalBackends(tc.n), tc.m)
		if err != nil {
			t.Errorf("n=%d m=%d: %v", tc.n, tc.m, err)
			continue
		}
		slotCounts(t, tab, tc.n)
	}
}

// TestMaglevWeightsScaleInvariant checks that only weight ratios matter.
func TestMaglevWeightsScaleInvariant(t *testing.T) {
	a, err := NewMaglev(weightedBackends(1, 2, 3), 1021)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewMaglev(weightedBackends(7, 14, 21), 1021)
	if err != nil {
		t.Fatal(err)
	}
	if !slicesEqual(a.entries, b.entries) {
		t.Error("weights 1:2:3 and 7:14:21 give different tables")
	}
}

func slicesEqual[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
