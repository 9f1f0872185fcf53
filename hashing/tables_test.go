package hashing

import (
	"errors"
	"math"
	"testing"
)

// algorithms are the four Table constructors under test, with the sizes the
// rest of vipd uses.
var algorithms = []struct {
	name  string
	build func([]Backend) (Table, error)
}{
	{"maglev", func(bs []Backend) (Table, error) { return asTable(NewMaglev(bs, DefaultMaglevSize)) }},
	{"modn", func(bs []Backend) (Table, error) { return asTable(NewModN(bs)) }},
	{"ring", func(bs []Backend) (Table, error) { return asTable(NewRing(bs, DefaultVnodes)) }},
	{"rendezvous", func(bs []Backend) (Table, error) { return asTable(NewRendezvous(bs)) }},
}

// asTable converts a constructor's result, keeping a nil table nil rather
// than a non-nil interface holding a nil pointer.
func asTable[T Table](tab T, err error) (Table, error) {
	if err != nil {
		return nil, err
	}
	return tab, nil
}

// buildWith builds bs with the named algorithm.
func buildWith(t testing.TB, name string, bs []Backend) Table {
	t.Helper()
	for _, alg := range algorithms {
		if alg.name == name {
			tab, err := alg.build(bs)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return tab
		}
	}
	t.Fatalf("no algorithm %q", name)
	return nil
}

// lookupIDs returns the ID each hash maps to.
func lookupIDs(t testing.TB, tab Table, bs []Backend, hashes []uint64) []string {
	t.Helper()
	ids := make([]string, len(hashes))
	for k, h := range hashes {
		i := tab.Lookup(h)
		if i < 0 || i >= len(bs) {
			t.Fatalf("Lookup(%#x) = %d, want 0..%d", h, i, len(bs)-1)
		}
		ids[k] = bs[i].ID
	}
	return ids
}

func randomHashes(n int, seed uint64) []uint64 {
	r := newRand(seed)
	hs := make([]uint64, n)
	for i := range hs {
		hs[i] = r.Uint64()
	}
	return hs
}

func TestOrderIndependence(t *testing.T) {
	sets := map[string][]Backend{
		"equal":    equalBackends(50),
		"weighted": weightedBackends(1, 4, 2, 2, 3, 1, 1, 4, 3, 2, 1, 1, 2, 3, 4, 5, 1, 2, 1, 1),
	}
	hashes := randomHashes(20000, 6)
	for _, alg := range algorithms {
		for setName, bs := range sets {
			t.Run(alg.name+"/"+setName, func(t *testing.T) {
				ref, err := alg.build(bs)
				if err != nil {
					t.Fatal(err)
				}
				want := lookupIDs(t, ref, bs, hashes)
				r := newRand(7)
				for range 5 {
					perm := shuffled(bs, r)
					tab, err := alg.build(perm)
					if err != nil {
						t.Fatal(err)
					}
					got := lookupIDs(t, tab, perm, hashes)
					for k := range want {
						if got[k] != want[k] {
							t.Fatalf("hash %#x: %s in the original order, %s after a shuffle", hashes[k], want[k], got[k])
						}
					}
					if m, ok := tab.(*Maglev); ok && !slicesEqual(slotIDs(m, perm), slotIDs(ref.(*Maglev), bs)) {
						t.Fatal("shuffled input gives a different Maglev table")
					}
				}
			})
		}
	}
}

func TestEmptyTables(t *testing.T) {
	for _, alg := range algorithms {
		tab, err := alg.build(nil)
		if err != nil {
			t.Errorf("%s: empty set: %v, want an empty table", alg.name, err)
			continue
		}
		for _, h := range []uint64{0, 42, ^uint64(0)} {
			if got := tab.Lookup(h); got != -1 {
				t.Errorf("%s: empty table: Lookup(%#x) = %d, want -1", alg.name, h, got)
			}
		}
	}
}

func TestSingleBackend(t *testing.T) {
	bs := []Backend{{ID: "[2001:db8::1]:80", Weight: 3}}
	for _, alg := range algorithms {
		tab, err := alg.build(bs)
		if err != nil {
			t.Fatalf("%s: %v", alg.name, err)
		}
		for _, h := range randomHashes(1000, 8) {
			if got := tab.Lookup(h); got != 0 {
				t.Fatalf("%s: Lookup(%#x) = %d, want 0", alg.name, h, got)
			}
		}
	}
}

func TestBackendErrors(t *testing.T) {
	cases := []struct {
		name     string
		backends []Backend
		want     error
	}{
		{"duplicate ID", []Backend{{"a:1", 1}, {"b:1", 1}, {"a:1", 2}}, ErrDuplicateID},
		{"zero weight", []Backend{{"a:1", 1}, {"b:1", 0}}, ErrZeroWeight},
		{"empty ID", []Backend{{"a:1", 1}, {"", 1}}, ErrEmptyID},
		{"too many backends", equalBackends(MaxBackends + 1), ErrTooManyBackends},
	}
	for _, alg := range algorithms {
		for _, tc := range cases {
			t.Run(alg.name+"/"+tc.name, func(t *testing.T) {
				tab, err := alg.build(tc.backends)
				if !errors.Is(err, tc.want) {
					t.Fatalf("error = %v, want %v", err, tc.want)
				}
				if tab != nil {
					t.Errorf("got a table with error %v", err)
				}
			})
		}
	}
}

func TestRingErrors(t *testing.T) {
	cases := []struct {
		name     string
		backends []Backend
		vnodes   int
		want     error
	}{
		{"zero vnodes", equalBackends(2), 0, ErrBadVnodes},
		{"negative vnodes", equalBackends(2), -1, ErrBadVnodes},
		{"too many points", weightedBackends(1, MaxRingPoints/DefaultVnodes), DefaultVnodes, ErrTableTooLarge},
		{"huge vnodes", equalBackends(2), math.MaxInt, ErrTableTooLarge},
		{"huge weights", weightedBackends(1<<32-1, 1<<32-1, 1<<32-1), 1 << 22, ErrTableTooLarge},
	}
	for _, tc := range cases {
		if _, err := NewRing(tc.backends, tc.vnodes); !errors.Is(err, tc.want) {
			t.Errorf("%s: error = %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestModNErrors(t *testing.T) {
	if _, err := NewModN(weightedBackends(1, MaxModNSlots)); !errors.Is(err, ErrTableTooLarge) {
		t.Errorf("error = %v, want %v", err, ErrTableTooLarge)
	}
	// Large weights with a large common divisor are cheap.
	tab, err := NewModN(weightedBackends(3_000_000_000, 1_000_000_000))
	if err != nil {
		t.Fatal(err)
	}
	if len(tab.slots) != 4 {
		t.Errorf("weights 3e9:1e9 use %d slots, want 4", len(tab.slots))
	}
}

// TestWeightedShares checks the comparison algorithms honour weights over one
// million random flows. Rendezvous is exact in expectation, so its shares must
// be within 2% (the sampling error is about 0.3%); ModN is exact by
// construction; a ring with 160 points per unit weight scatters each share by
// roughly 1/sqrt(160·w), so it only gets a loose 25%.
func TestWeightedShares(t *testing.T) {
	weights := []uint32{1, 2, 3, 4}
	bs := weightedBackends(weights...)
	hashes := randomHashes(1_000_000, 9)
	for _, tc := range []struct {
		alg   string
		bound float64
	}{{"modn", 0.02}, {"ring", 0.25}, {"rendezvous", 0.02}} {
		tab := buildWith(t, tc.alg, bs)
		counts := make([]int, len(bs))
		for _, h := range hashes {
			counts[tab.Lookup(h)]++
		}
		for i, w := range weights {
			want := float64(w) / 10
			got := float64(counts[i]) / float64(len(hashes))
			if rel := got/want - 1; rel > tc.bound || rel < -tc.bound {
				t.Errorf("%s: backend %d (weight %d): share %.4f, want %.4f ± %.0f%%", tc.alg, i, w, got, want, 100*tc.bound)
			}
		}
	}
}

// TestComparisonDisruption pins what the comparison algorithms exist to show:
// rendezvous and the ring move only the removed backend's flows, and mod-N
// moves almost all of them.
func TestComparisonDisruption(t *testing.T) {
	bs := equalBackends(11)
	rest := without(bs, 4)
	hashes := randomHashes(200000, 10)
	for _, tc := range []struct {
		alg           string
		minMoved, max float64 // of the survivors' flows
	}{{"modn", 0.80, 1}, {"ring", 0, 0}, {"rendezvous", 0, 0}} {
		before, after := buildWith(t, tc.alg, bs), buildWith(t, tc.alg, rest)
		a, b := lookupIDs(t, before, bs, hashes), lookupIDs(t, after, rest, hashes)
		_, moved := disruption(a, b, bs[4].ID)
		t.Logf("%s: %.2f%% of the survivors' flows moved", tc.alg, 100*moved)
		if moved < tc.minMoved || moved > tc.max {
			t.Errorf("%s: %.2f%% of the survivors' flows moved, want %.0f%%..%.0f%%", tc.alg, 100*moved, 100*tc.minMoved, 100*tc.max)
		}
	}
}

func TestWeightedScoreBounds(t *testing.T) {
	prev := 0.0
	for _, s := range []uint64{0, 1, 1 << 12, 1 << 40, 1 << 63, ^uint64(0) - 1<<12, ^uint64(0)} {
		got := weightedScore(1, s)
		if math.IsInf(got, 0) || math.IsNaN(got) || got <= 0 || got < prev {
			t.Errorf("weightedScore(1, %#x) = %v after %v, want finite, positive, non-decreasing", s, got, prev)
		}
		prev = got
	}
}
