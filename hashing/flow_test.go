package hashing

import (
	"encoding/binary"
	"testing"
)

const (
	// testSeed is the seed the golden values (testdata/golden.txt) were
	// computed with: the ASCII string "vipd-fh1" read big-endian. The
	// seed vipd runs with is configuration's (config.DefaultFlowHashSeed
	// unless set).
	testSeed uint64 = 0x76697064_2d666831

	protoTCP = 6
	protoUDP = 17
	// 198.18.0.10 and 198.19.0.80, a client and a VIP in the benchmarking range.
	client4 = 0xc612000a
	vip4    = 0xc6130050
)

var (
	client6 = [16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0a}
	vip6    = [16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0x50}
)

// addr6 returns client6 with the 32-bit counter i written at byte offset off.
func addr6(i uint32, off int) *[16]byte {
	a := client6
	binary.BigEndian.PutUint32(a[off:], i)
	return &a
}

// bucketBits is log2 of the bucket count of the mixing tests: 1024 buckets,
// read from the top bits (as Maglev's multiply-shift does) and from the bottom
// bits (as a power-of-two shard index would).
const bucketBits = 10

// mixingCases are input families a load balancer really sees, each a function
// from a sample number to a hash. Sequential families are the hard ones for a
// weak hash: one client opening connections from consecutive ports, a
// scanner walking addresses.
func mixingCases() []struct {
	name string
	n    int
	hash func(i int) uint64
} {
	r := newRand(1)
	return []struct {
		name string
		n    int
		hash func(i int) uint64
	}{
		{"Flow4/random", 1 << 20, func(int) uint64 {
			return Flow4(r.Uint32(), r.Uint32(), uint16(r.Uint32()), uint16(r.Uint32()), uint8(r.Uint32()), testSeed)
		}},
		{"Flow4/one-client-sequential-sport", 1 << 16, func(i int) uint64 {
			return Flow4(client4, vip4, uint16(i), 443, protoTCP, testSeed)
		}},
		{"Flow4/sequential-clients", 1 << 20, func(i int) uint64 {
			return Flow4(client4+uint32(i), vip4, 40000, 443, protoTCP, testSeed)
		}},
		{"Flow4/sequential-dport", 1 << 16, func(i int) uint64 {
			return Flow4(client4, vip4, 40000, uint16(i), protoUDP, testSeed)
		}},
		{"Flow6/random", 1 << 20, func(int) uint64 {
			var s, d [16]byte
			binary.LittleEndian.PutUint64(s[:8], r.Uint64())
			binary.LittleEndian.PutUint64(s[8:], r.Uint64())
			binary.LittleEndian.PutUint64(d[:8], r.Uint64())
			binary.LittleEndian.PutUint64(d[8:], r.Uint64())
			return Flow6(&s, &d, uint16(r.Uint32()), uint16(r.Uint32()), uint8(r.Uint32()), testSeed)
		}},
		{"Flow6/one-client-sequential-sport", 1 << 16, func(i int) uint64 {
			return Flow6(&client6, &vip6, uint16(i), 443, protoTCP, testSeed)
		}},
		{"Flow6/sequential-interface-ids", 1 << 20, func(i int) uint64 {
			return Flow6(addr6(uint32(i), 12), &vip6, 40000, 443, protoTCP, testSeed)
		}},
		{"Flow6/sequential-prefixes", 1 << 20, func(i int) uint64 {
			return Flow6(addr6(uint32(i), 4), &vip6, 40000, 443, protoTCP, testSeed)
		}},
		{"Src4/sequential", 1 << 20, func(i int) uint64 { return Src4(client4+uint32(i), testSeed) }},
		{"Src4/random", 1 << 20, func(int) uint64 { return Src4(r.Uint32(), testSeed) }},
		{"Src6/sequential-interface-ids", 1 << 20, func(i int) uint64 { return Src6(addr6(uint32(i), 12), testSeed) }},
		{"Src6/sequential-prefixes", 1 << 20, func(i int) uint64 { return Src6(addr6(uint32(i), 4), testSeed) }},
		{"Frag4/sequential-clients", 1 << 20, func(i int) uint64 { return Frag4(client4+uint32(i), vip4, protoUDP, testSeed) }},
		{"Frag6/sequential-interface-ids", 1 << 20, func(i int) uint64 {
			return Frag6(addr6(uint32(i), 12), &vip6, protoUDP, testSeed)
		}},
	}
}

// bucketCounts spreads n hashes over 2^bucketBits buckets by their top and by
// their bottom bits.
func bucketCounts(n int, hash func(int) uint64) (top, bottom []int) {
	top = make([]int, 1<<bucketBits)
	bottom = make([]int, 1<<bucketBits)
	for i := range n {
		h := hash(i)
		top[h>>(64-bucketBits)]++
		bottom[h&(1<<bucketBits-1)]++
	}
	return top, bottom
}

func TestFlowHashMixing(t *testing.T) {
	for _, tc := range mixingCases() {
		t.Run(tc.name, func(t *testing.T) {
			top, bottom := bucketCounts(tc.n, tc.hash)
			for _, b := range []struct {
				name   string
				counts []int
			}{{"top bits", top}, {"bottom bits", bottom}} {
				stat, lo, hi := chiSquare(b.counts)
				t.Logf("%s: chi2=%.0f (accept %.0f..%.0f), max/mean=%.3f", b.name, stat, lo, hi, maxOverMean(b.counts))
				if stat < lo || stat > hi {
					t.Errorf("%s: chi-square %.0f outside %.0f..%.0f: not uniform", b.name, stat, lo, hi)
				}
			}
		})
	}
}

// TestChiSquareRejectsWeakHashes shows the mixing test can fail: hashes that
// are fine for random inputs but not for sequential ones are caught by one
// bound or the other.
func TestChiSquareRejectsWeakHashes(t *testing.T) {
	weak := []struct {
		name string
		hash func(i int) uint64
	}{
		// Perfectly even in the bottom bits (chi2 = 0), one bucket on top.
		{"identity", func(i int) uint64 { return uint64(i) }},
		// A multiplicative hash: even at the bottom, lattice-like on top.
		{"golden-multiply", func(i int) uint64 { return uint64(i) * kMul }},
		// absorb alone, without the finalizer.
		{"absorb-only", func(i int) uint64 { return absorb(testSeed, uint64(i)) }},
	}
	for _, w := range weak {
		top, bottom := bucketCounts(1<<16, w.hash)
		s1, lo, hi := chiSquare(top)
		s2, _, _ := chiSquare(bottom)
		if s1 >= lo && s1 <= hi && s2 >= lo && s2 <= hi {
			t.Errorf("%s: chi-square %.0f (top) and %.0f (bottom) both accepted; the test cannot tell a weak hash", w.name, s1, s2)
		}
	}
}

// TestFlowHashAvalanche checks that flipping any single input bit flips every
// output bit with probability close to 1/2: a hash that passes the bucket tests
// but leaves some input bit weakly mixed would fail here.
func TestFlowHashAvalanche(t *testing.T) {
	const samples = 2000
	// 6 standard deviations of a binomial(2000, 1/2) proportion is 0.067.
	const lo, hi = 0.43, 0.57
	type tuple6 struct {
		src, dst     [16]byte
		sport, dport uint16
		proto        uint8
	}
	cases := []struct {
		name   string
		inBits int
		hash   func(r *tuple6, flip int) uint64
	}{
		{"Flow4", 104, func(u *tuple6, flip int) uint64 {
			in := [13]byte{}
			copy(in[:4], u.src[:4])
			copy(in[4:8], u.dst[:4])
			binary.BigEndian.PutUint16(in[8:], u.sport)
			binary.BigEndian.PutUint16(in[10:], u.dport)
			in[12] = u.proto
			if flip >= 0 {
				in[flip/8] ^= 1 << (flip % 8)
			}
			return Flow4(binary.BigEndian.Uint32(in[0:]), binary.BigEndian.Uint32(in[4:]),
				binary.BigEndian.Uint16(in[8:]), binary.BigEndian.Uint16(in[10:]), in[12], testSeed)
		}},
		{"Flow6", 296, func(u *tuple6, flip int) uint64 {
			in := [37]byte{}
			copy(in[:16], u.src[:])
			copy(in[16:32], u.dst[:])
			binary.BigEndian.PutUint16(in[32:], u.sport)
			binary.BigEndian.PutUint16(in[34:], u.dport)
			in[36] = u.proto
			if flip >= 0 {
				in[flip/8] ^= 1 << (flip % 8)
			}
			return Flow6((*[16]byte)(in[0:16]), (*[16]byte)(in[16:32]),
				binary.BigEndian.Uint16(in[32:]), binary.BigEndian.Uint16(in[34:]), in[36], testSeed)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRand(2)
			flips := make([][64]int, tc.inBits)
			for range samples {
				var u tuple6
				for i := range u.src {
					u.src[i], u.dst[i] = byte(r.Uint32()), byte(r.Uint32())
				}
				u.sport, u.dport, u.proto = uint16(r.Uint32()), uint16(r.Uint32()), uint8(r.Uint32())
				base := tc.hash(&u, -1)
				for b := range tc.inBits {
					d := base ^ tc.hash(&u, b)
					for o := range 64 {
						flips[b][o] += int(d >> o & 1)
					}
				}
			}
			worst := 0.5
			for b := range tc.inBits {
				for o := range 64 {
					p := float64(flips[b][o]) / samples
					if p < lo || p > hi {
						t.Errorf("input bit %d flips output bit %d with probability %.3f, want %.2f..%.2f", b, o, p, lo, hi)
					}
					if d, w := p-0.5, worst-0.5; d*d > w*w {
						worst = p
					}
				}
			}
			t.Logf("worst flip probability %.3f", worst)
		})
	}
}

// TestFlowHashSeed checks that the seed matters, and that hashes under two
// seeds are unrelated: a flow's bucket under one seed says nothing about its
// bucket under the other.
func TestFlowHashSeed(t *testing.T) {
	const n = 1 << 16
	const seedA, seedB = testSeed, testSeed + 1
	src, dst := client6, vip6
	funcs := []struct {
		name string
		hash func(i uint32, seed uint64) uint64
	}{
		{"Flow4", func(i uint32, s uint64) uint64 { return Flow4(client4+i, vip4, 40000, 443, protoTCP, s) }},
		{"Flow6", func(i uint32, s uint64) uint64 { return Flow6(addr6(i, 12), &dst, 40000, 443, protoTCP, s) }},
		{"Src4", func(i uint32, s uint64) uint64 { return Src4(client4+i, s) }},
		{"Src6", func(i uint32, s uint64) uint64 { return Src6(addr6(i, 12), s) }},
		{"Frag4", func(i uint32, s uint64) uint64 { return Frag4(client4+i, vip4, protoUDP, s) }},
		{"Frag6", func(i uint32, s uint64) uint64 { return Frag6(&src, addr6(i, 12), protoUDP, s) }},
	}
	for _, f := range funcs {
		same, sameBucket := 0, 0
		for i := range uint32(n) {
			a, b := f.hash(i, seedA), f.hash(i, seedB)
			if a == b {
				same++
			}
			if a>>(64-bucketBits) == b>>(64-bucketBits) {
				sameBucket++
			}
		}
		// Independent hashes share a bucket 1 time in 1024: 64 ± 8 here.
		if same > 0 || sameBucket > 2*n>>bucketBits {
			t.Errorf("%s: seeds %#x and %#x: %d equal hashes, %d of %d in the same bucket (independent: ~%d)",
				f.name, seedA, seedB, same, sameBucket, n, n>>bucketBits)
		}
	}
}

// TestFlowHashFamiliesDiffer checks the domain separation: the same addresses
// through different hash families give unrelated values.
func TestFlowHashFamiliesDiffer(t *testing.T) {
	h := map[string]uint64{
		"Flow4": Flow4(client4, vip4, 0, 0, 0, testSeed),
		"Frag4": Frag4(client4, vip4, 0, testSeed),
		"Src4":  Src4(client4, testSeed),
		"Flow6": Flow6(&client6, &vip6, 0, 0, 0, testSeed),
		"Frag6": Frag6(&client6, &vip6, 0, testSeed),
		"Src6":  Src6(&client6, testSeed),
	}
	seen := map[uint64]string{}
	for name, v := range h {
		if other, dup := seen[v]; dup {
			t.Errorf("%s and %s hash to the same value %#x", name, other, v)
		}
		seen[v] = name
	}
}

// TestFlowHashSingleWordInjective checks the structural claim in mix.go:
// tuples that differ in one absorbed word never collide. Every source port of
// one client and every address of a /16 hash to distinct values.
func TestFlowHashSingleWordInjective(t *testing.T) {
	seen := make(map[uint64]uint32, 1<<16)
	for p := range uint32(1 << 16) {
		h := Flow4(client4, vip4, uint16(p), 443, protoTCP, testSeed)
		if q, dup := seen[h]; dup {
			t.Fatalf("ports %d and %d collide", q, p)
		}
		seen[h] = p
	}
	clear(seen)
	for a := range uint32(1 << 16) {
		h := Src4(client4&0xffff0000|a, testSeed)
		if q, dup := seen[h]; dup {
			t.Fatalf("addresses %#x and %#x collide", q, a)
		}
		seen[h] = a
	}
}

// TestFlowHashSeedIsNotRelabeling checks that two seeds differing in one low
// bit are not the same hash function with inputs relabeled by a small XOR,
// which is what XOR-ing the seed straight into the state would give.
func TestFlowHashSeedIsNotRelabeling(t *testing.T) {
	const seedA, seedB = testSeed, testSeed ^ 1
	under := make(map[uint64]bool, 1<<12)
	for i := range uint32(1 << 12) {
		under[Src4(client4+i, seedB)] = true
	}
	hits := 0
	for i := range uint32(1 << 12) {
		for d := range uint32(256) {
			if under[Src4((client4+i)^d, seedA)] {
				hits++
			}
		}
	}
	// Unrelated functions would share a value by chance with probability
	// about 2^20 * 2^12 / 2^64: never.
	if hits > 0 {
		t.Errorf("%d inputs under seed %#x reproduce a hash under seed %#x", hits, seedA, seedB)
	}
}

// TestFlow4Spelled checks that Flow4, written out for the inliner, is the
// same chain as the other hashes: start, absorb, absorbLast, fmix.
func TestFlow4Spelled(t *testing.T) {
	r := newRand(13)
	for range 10000 {
		src, dst, sport, dport, proto, seed := r.Uint32(), r.Uint32(), uint16(r.Uint32()), uint16(r.Uint32()), uint8(r.Uint32()), r.Uint64()
		h := absorb(start(seed, domFlow4), uint64(src)|uint64(dst)<<32)
		want := fmix(absorbLast(h, uint64(sport)|uint64(dport)<<16|uint64(proto)<<32))
		if got := Flow4(src, dst, sport, dport, proto, seed); got != want {
			t.Fatalf("Flow4 = %#x, composed chain = %#x", got, want)
		}
	}
}

// TestAbsorb6Spelled checks absorb6, written out for the inliner, against
// four absorb steps.
func TestAbsorb6Spelled(t *testing.T) {
	r := newRand(14)
	for range 10000 {
		var src, dst [16]byte
		binary.LittleEndian.PutUint64(src[0:], r.Uint64())
		binary.LittleEndian.PutUint64(src[8:], r.Uint64())
		binary.LittleEndian.PutUint64(dst[0:], r.Uint64())
		binary.LittleEndian.PutUint64(dst[8:], r.Uint64())
		h := r.Uint64()
		want := absorb(h, binary.LittleEndian.Uint64(src[0:]))
		want = absorb(want, binary.LittleEndian.Uint64(src[8:]))
		want = absorb(want, binary.LittleEndian.Uint64(dst[0:]))
		want = absorb(want, binary.LittleEndian.Uint64(dst[8:]))
		if got := absorb6(h, &src, &dst); got != want {
			t.Fatalf("absorb6 = %#x, four absorbs = %#x", got, want)
		}
	}
}
