package dataplane

import (
	"maps"
	"testing"
)

// TestTableDigests: the digest follows what places new flows (seed, the
// table's members and weights, source hashing) and not how a box numbers
// its backends.
func TestTableDigests(t *testing.T) {
	digests := func(edit func(*Spec)) map[string]string {
		t.Helper()
		spec := testSpec()
		if edit != nil {
			edit(spec)
		}
		s, err := NewSnapshot(spec)
		if err != nil {
			t.Fatal(err)
		}
		return s.TableDigests()
	}
	base := digests(nil)
	if len(base) != len(testSpec().VIPs) {
		t.Fatalf("%d digests for %d VIPs", len(base), len(testSpec().VIPs))
	}
	renumbered := digests(func(s *Spec) {
		for i := range s.VIPs {
			for j := range s.VIPs[i].Backends {
				s.VIPs[i].Backends[j].Ref += 100
			}
		}
	})
	if !maps.Equal(base, renumbered) {
		t.Errorf("renumbering the backends changed the digests:\n%v\n%v", base, renumbered)
	}
	for _, tc := range []struct {
		name string
		edit func(*Spec)
		vips []string // the VIPs whose digest must change
	}{
		{"seed", func(s *Spec) { s.Seed++ }, []string{"nat4", "dsr4", "udp4", "all4", "nat6", "dsr6"}},
		{"a weight", func(s *Spec) { s.VIPs[0].Backends[0].Weight *= 3 }, []string{"nat4"}},
		{"a backend's port", func(s *Spec) { s.VIPs[4].Backends[1].Port++ }, []string{"nat6"}},
		{"source hash", func(s *Spec) { s.VIPs[2].SrcHash = true }, []string{"udp4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := digests(tc.edit)
			for name, d := range got {
				changed := d != base[name]
				want := false
				for _, v := range tc.vips {
					want = want || v == name
				}
				if changed != want {
					t.Errorf("VIP %s: digest changed %v, want %v", name, changed, want)
				}
			}
		})
	}
}
