package hashing

import (
	"fmt"
	"testing"
)

// Benchmarks report domain units next to ns/op: ms/build for table builds,
// ns/lookup and lookups/s for the per-packet path. All of them run with
// -benchtime=1x, which CI uses as a smoke test.

func BenchmarkMaglevBuild(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("N=%d/M=%d", n, DefaultMaglevSize), func(b *testing.B) {
			bs := equalBackends(n)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := NewMaglev(bs, DefaultMaglevSize); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e6/float64(b.N), "ms/build")
		})
	}
}

// BenchmarkBuild covers the comparison algorithms at N=100.
func BenchmarkBuild(b *testing.B) {
	bs := equalBackends(100)
	for _, alg := range algorithms {
		b.Run(alg.name+"/N=100", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := alg.build(bs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e6/float64(b.N), "ms/build")
		})
	}
}

// lookupInputs is a pool of random tuples, cycled through so that the table
// is probed at random slots (as real traffic does) rather than at one slot the
// cache and branch predictor would learn.
type tuple struct {
	src4, dst4   uint32
	src6, dst6   [16]byte
	sport, dport uint16
}

// nInputs is a power of two so that cycling costs a mask, not a division.
const nInputs = 4096

func lookupInputs() []tuple {
	r := newRand(12)
	ts := make([]tuple, nInputs)
	for i := range ts {
		t := &ts[i]
		t.src4, t.dst4 = r.Uint32(), vip4
		t.src6, t.dst6 = client6, vip6
		for k := 8; k < 16; k++ {
			t.src6[k] = byte(r.Uint32())
		}
		t.sport, t.dport = uint16(r.Uint32()), 443
	}
	return ts
}

// BenchmarkLookup measures the whole per-packet decision: flow hash plus
// table lookup, for each algorithm, N=100 backends, IPv4 and IPv6.
func BenchmarkLookup(b *testing.B) {
	ts := lookupInputs()
	bs := equalBackends(100)
	for _, alg := range algorithms {
		tab := buildWith(b, alg.name, bs)
		b.Run(alg.name+"/ipv4", func(b *testing.B) {
			b.ReportAllocs()
			sum, i := 0, 0
			for b.Loop() {
				t := &ts[i&(nInputs-1)]
				sum += tab.Lookup(Flow4(t.src4, t.dst4, t.sport, t.dport, protoTCP, testSeed))
				i++
			}
			reportLookups(b, sum)
		})
		b.Run(alg.name+"/ipv6", func(b *testing.B) {
			b.ReportAllocs()
			sum, i := 0, 0
			for b.Loop() {
				t := &ts[i&(nInputs-1)]
				sum += tab.Lookup(Flow6(&t.src6, &t.dst6, t.sport, t.dport, protoTCP, testSeed))
				i++
			}
			reportLookups(b, sum)
		})
	}
}

// BenchmarkMaglevLookupDirect calls the concrete type, as the dataplane does,
// so Lookup is inlined; BenchmarkLookup goes through the Table interface.
func BenchmarkMaglevLookupDirect(b *testing.B) {
	ts := lookupInputs()
	tab, err := NewMaglev(equalBackends(100), DefaultMaglevSize)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("ipv4", func(b *testing.B) {
		b.ReportAllocs()
		sum, i := 0, 0
		for b.Loop() {
			t := &ts[i&(nInputs-1)]
			sum += tab.Lookup(Flow4(t.src4, t.dst4, t.sport, t.dport, protoTCP, testSeed))
			i++
		}
		reportLookups(b, sum)
	})
	b.Run("ipv6", func(b *testing.B) {
		b.ReportAllocs()
		sum, i := 0, 0
		for b.Loop() {
			t := &ts[i&(nInputs-1)]
			sum += tab.Lookup(Flow6(&t.src6, &t.dst6, t.sport, t.dport, protoTCP, testSeed))
			i++
		}
		reportLookups(b, sum)
	})
}

func BenchmarkFlowHash(b *testing.B) {
	ts := lookupInputs()
	var sink uint64
	cases := []struct {
		name string
		f    func(t *tuple) uint64
	}{
		{"Flow4", func(t *tuple) uint64 { return Flow4(t.src4, t.dst4, t.sport, t.dport, protoTCP, testSeed) }},
		{"Flow6", func(t *tuple) uint64 { return Flow6(&t.src6, &t.dst6, t.sport, t.dport, protoTCP, testSeed) }},
		{"Src4", func(t *tuple) uint64 { return Src4(t.src4, testSeed) }},
		{"Src6", func(t *tuple) uint64 { return Src6(&t.src6, testSeed) }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				sink += c.f(&ts[i&(nInputs-1)])
				i++
			}
		})
	}
	_ = sink
}

func reportLookups(b *testing.B, sink int) {
	ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(ns, "ns/lookup")
	b.ReportMetric(1e9/ns, "lookups/s")
	if sink == -1<<62 {
		b.Log(sink) // keeps the results alive
	}
}
