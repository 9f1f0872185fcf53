package hashing

import "testing"

// TestZeroAllocs pins the hot path's allocation-free claim: the flow hashes and
// every table's Lookup run per packet.
func TestZeroAllocs(t *testing.T) {
	bs := equalBackends(100)
	var sink uint64
	var idx int
	cases := []struct {
		name string
		f    func()
	}{
		{"Flow4", func() { sink += Flow4(client4, vip4, 40000, 443, protoTCP, testSeed) }},
		{"Flow6", func() { sink += Flow6(&client6, &vip6, 40000, 443, protoTCP, testSeed) }},
		{"Src4", func() { sink += Src4(client4, testSeed) }},
		{"Src6", func() { sink += Src6(&client6, testSeed) }},
		{"Frag4", func() { sink += Frag4(client4, vip4, protoUDP, testSeed) }},
		{"Frag6", func() { sink += Frag6(&client6, &vip6, protoUDP, testSeed) }},
	}
	for _, alg := range algorithms {
		tab := buildWith(t, alg.name, bs)
		cases = append(cases, struct {
			name string
			f    func()
		}{alg.name + ".Lookup", func() { idx += tab.Lookup(Flow4(client4, vip4, uint16(idx), 443, protoTCP, testSeed)) }})
	}
	weighted := buildWith(t, "rendezvous", weightedBackends(1, 2, 3))
	cases = append(cases, struct {
		name string
		f    func()
	}{"rendezvous(weighted).Lookup", func() { idx += weighted.Lookup(uint64(idx)) }})
	for _, c := range cases {
		if n := testing.AllocsPerRun(1000, c.f); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", c.name, n)
		}
	}
	_, _ = sink, idx
}
