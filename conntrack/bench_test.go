package conntrack

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"testing"
	"time"
)

// Benchmarks run against one shard — one worker's table — holding 1M or
// 10M live established flows at ~89% occupancy. A fixture is filled once
// per process and shared by the benchmarks of its size; with b.Loop the
// benchmark body (and so any setup in it) runs once however long the loop.
//
// "random" lookups draw flows uniformly from the whole table, so nearly
// every lookup misses the CPU caches (the tables are 44 MB and 444 MB);
// "hot" cycles through 1024 flows, the cost when the table is cached.

const sampleSize = 1 << 20 // lookup/insert keys per fixture; a power of two

type fixture struct {
	tab    *Table
	s      *Shard
	flows  int
	fillNs float64 // mean ns per flow to insert and establish it

	keys   []Key // live flows, random order
	hashes []uint64
	fresh  []Key // flows not in the table
	freshH []uint64
}

var fixtures = map[int]*fixture{}

var sizes = []struct {
	name  string
	flows int
}{{"1M", 1 << 20}, {"10M", 10 << 20}}

func getFixture(b *testing.B, flows int) *fixture {
	if f := fixtures[flows]; f != nil {
		return f
	}
	// A fixed bucket key, so that every run (and every build) works on the
	// same layout.
	tab, err := New(Config{Capacity: flows / 8 * 9, Shards: 1, BucketKey: testBucketKey})
	if err != nil {
		b.Fatal(err)
	}
	f := &fixture{tab: tab, s: tab.Shard(0), flows: flows}
	start := time.Now()
	for n := range flows {
		k := testKey(n)
		h := hashKey(&k)
		e, r := f.s.Insert(&k, h, uint32(n%64), tcpSYN)
		if !r.Tracked() {
			b.Fatalf("fill: flow %d of %d refused at %d%% occupancy", n, flows, 100*n/tab.Capacity())
		}
		f.s.Touch(e, tcpACK)
		prove(e)
	}
	f.fillNs = float64(time.Since(start).Nanoseconds()) / float64(flows)

	rng := rand.New(rand.NewPCG(uint64(flows), 7))
	f.keys, f.hashes = make([]Key, sampleSize), make([]uint64, sampleSize)
	f.fresh, f.freshH = make([]Key, sampleSize), make([]uint64, sampleSize)
	for j := range sampleSize {
		f.keys[j] = testKey(rng.IntN(flows))
		f.hashes[j] = hashKey(&f.keys[j])
		f.fresh[j] = testKey(flows + j) // testKey is distinct below 2^24
		f.freshH[j] = hashKey(&f.fresh[j])
	}
	fixtures[flows] = f
	return f
}

func (f *fixture) report(b *testing.B) {
	b.ReportMetric(float64(f.tab.Bytes())/float64(f.tab.Capacity()), "B/slot")
	b.ReportMetric(float64(f.tab.Bytes())/float64(f.flows), "B/flow")
}

func BenchmarkLookupHit(b *testing.B) {
	for _, sz := range sizes {
		for _, mode := range []struct {
			name string
			mask int
		}{{"random", sampleSize - 1}, {"hot", 1023}} {
			b.Run("flows="+sz.name+"/"+mode.name, func(b *testing.B) {
				f := getFixture(b, sz.flows)
				s, keys, hashes, mask := f.s, f.keys, f.hashes, mode.mask
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					j := i & mask
					if _, ok := s.Lookup(&keys[j], hashes[j]); !ok {
						b.Fatal("miss")
					}
				}
				f.report(b)
				b.ReportMetric(f.fillNs, "fill-ns/flow")
			})
		}
	}
}

// BenchmarkLookupBatch is the random lookup as a batch-shaped pipeline can
// do it, over 32 frames: plain lookups; a Prefetch pass, then the lookups;
// a Prefetch pass and a PrefetchRecord pass, then the lookups (what the
// dataplane does). ns/op is per batch; ns/lookup divides it by 32.
func BenchmarkLookupBatch(b *testing.B) {
	const batch = 32
	for _, sz := range sizes {
		for _, passes := range []string{"plain", "prefetch", "prefetch+record"} {
			b.Run("flows="+sz.name+"/"+passes, func(b *testing.B) {
				f := getFixture(b, sz.flows)
				s, keys, hashes := f.s, f.keys, f.hashes
				var locs [batch]Loc
				b.ReportAllocs()
				n := 0
				for i := 0; b.Loop(); i += batch {
					j := i & (sampleSize - 1)
					for m := range locs {
						locs[m] = s.Locate(hashes[j+m])
					}
					if passes != "plain" {
						for _, l := range locs {
							s.Prefetch(l)
						}
					}
					if passes == "prefetch+record" {
						for _, l := range locs {
							s.PrefetchRecord(l)
						}
					}
					for m, l := range locs {
						if _, ok := s.LookupAt(&keys[j+m], l); !ok {
							b.Fatal("miss")
						}
					}
					n += batch
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/lookup")
				f.report(b)
			})
		}
	}
}

func BenchmarkLookupMiss(b *testing.B) {
	for _, sz := range sizes {
		b.Run("flows="+sz.name, func(b *testing.B) {
			f := getFixture(b, sz.flows)
			s, keys, hashes := f.s, f.fresh, f.freshH
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				j := i & (sampleSize - 1)
				if _, ok := s.Lookup(&keys[j], hashes[j]); ok {
					b.Fatal("hit")
				}
			}
			f.report(b)
		})
	}
}

// BenchmarkPacket is the per-packet work for a known flow: Lookup + Touch.
func BenchmarkPacket(b *testing.B) {
	for _, sz := range sizes {
		b.Run("flows="+sz.name+"/random", func(b *testing.B) {
			f := getFixture(b, sz.flows)
			s, keys, hashes := f.s, f.keys, f.hashes
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				j := i & (sampleSize - 1)
				e, _ := s.Lookup(&keys[j], hashes[j])
				s.Touch(e, tcpACK)
			}
			f.report(b)
		})
	}
}

// BenchmarkInsert inserts a new flow and deletes it again, so the table
// stays at its live count: the cost of a new flow is the Insert plus a
// Delete of a slot already in cache (a few ns). Inserts that make room by
// relocation move flows for good, so over millions of them a pair can end
// up full with nothing to move: such an insert is refused (Untracked, the
// table's answer when full), counted in refused/op, and not deleted.
func BenchmarkInsert(b *testing.B) {
	for _, sz := range sizes {
		b.Run("flows="+sz.name, func(b *testing.B) {
			f := getFixture(b, sz.flows)
			s, keys, hashes := f.s, f.fresh, f.freshH
			refused := 0
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				j := i & (sampleSize - 1)
				e, r := s.Insert(&keys[j], hashes[j], 1, tcpSYN)
				switch r {
				case Inserted:
					s.Delete(e)
				case Untracked:
					refused++
				default:
					b.Fatalf("Insert: %v", r)
				}
			}
			b.ReportMetric(float64(refused)/float64(b.N), "refused/op")
			f.report(b)
		})
	}
}

// BenchmarkAdvance is the per-batch cost of the clock tick and the
// incremental expiry scan over a table of live flows: a call while the
// clock owes buckets (8 examined), and one after a tick's buckets are paid
// (what most of a busy worker's batches pay: TestSweepPace).
func BenchmarkAdvance(b *testing.B) {
	for _, sz := range sizes {
		for _, owed := range []bool{true, false} {
			name := "flows=" + sz.name + "/owed"
			if !owed {
				name = "flows=" + sz.name + "/paid"
			}
			b.Run(name, func(b *testing.B) {
				f := getFixture(b, sz.flows)
				s := f.s
				b.ReportAllocs()
				for b.Loop() {
					if owed {
						s.credit = s.nb
					}
					s.Advance(s.now)
				}
				s.credit = 0
			})
		}
	}
}

// BenchmarkFlood is the cost of a spoofed SYN once the table is full, the
// price of a flood packet: refused when its bucket pair is full of
// established flows (established), or stored over the oldest SYN of a
// pair full of them (unproven), as a flood that filled the table makes
// every later SYN. Both rows with the portable pair scan and with the
// SIMD one (simd=true), where the CPU has it.
func BenchmarkFlood(b *testing.B) {
	for _, fill := range []string{"established", "unproven"} {
		for _, simd := range benchSIMDModes() {
			b.Run(fmt.Sprintf("%s/simd=%v", fill, simd), func(b *testing.B) {
				have := haveSIMD
				defer func() { haveSIMD = have }()
				haveSIMD = simd
				benchFlood(b, fill == "established")
			})
		}
	}
}

// benchSIMDModes is simdModes for benchmarks.
func benchSIMDModes() []bool {
	if haveSIMD {
		return []bool{false, true}
	}
	return []bool{false}
}

func benchFlood(b *testing.B, established bool) {
	const slots = 1 << 20
	tab, err := New(Config{Capacity: slots, Shards: 1, BucketKey: testBucketKey})
	if err != nil {
		b.Fatal(err)
	}
	s := tab.Shard(0)
	for n := 0; n < 2*slots && s.live < slots; n++ {
		if established {
			establish(b, s, testKey(n), 1)
		} else {
			k := testKey(n)
			s.Insert(&k, hashKey(&k), 1, tcpSYN)
		}
	}
	rng := rand.New(rand.NewPCG(1, 1))
	keys, hashes := make([]Key, sampleSize), make([]uint64, sampleSize)
	for j := range keys {
		keys[j] = testKey(2*slots + rng.IntN(1<<23))
		hashes[j] = hashKey(&keys[j])
	}
	before := s.Stats()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		j := i & (sampleSize - 1)
		if _, ok := s.Lookup(&keys[j], hashes[j]); !ok {
			s.Insert(&keys[j], hashes[j], 1, tcpSYN)
		}
	}
	after := s.Stats()
	b.ReportMetric(100*float64(after.Entries)/slots, "%full")
	b.ReportMetric(float64(after.EvictedUnestablished-before.EvictedUnestablished)/float64(b.N), "evicted/op")
}

// BenchmarkCountByBackend is one bounded step of the control plane's
// per-backend count (1024 buckets), and the whole walk of a 1M-flow shard.
func BenchmarkCountByBackend(b *testing.B) {
	f := getFixture(b, sizes[0].flows)
	dst := map[uint32]int{}
	b.Run("step=1024", func(b *testing.B) {
		next := 0
		for b.Loop() {
			next = f.s.CountByBackend(dst, next, 1024)
		}
	})
	b.Run("whole", func(b *testing.B) {
		for b.Loop() {
			countAll(f.s, dst, 1024)
		}
	})
}

// BenchmarkLocate is the keyed mix with the bucket and tag it yields, each
// call waiting for the one before (its input depends on the last result),
// so ns/op is the latency a lookup pays before its first memory read;
// "unkeyed" is the same reduction taken straight from h, for reference.
func BenchmarkLocate(b *testing.B) {
	s := newShard(b, 1<<20)
	hs := make([]uint64, 1024)
	for i := range hs {
		hs[i] = fmix(uint64(i) + 1)
	}
	b.Run("keyed", func(b *testing.B) {
		var acc uint64
		for i := 0; b.Loop(); i++ {
			p, t := s.locate(hs[i&1023] ^ acc&1)
			acc += uint64(p) + uint64(t)
		}
		sinkLocate = acc
	})
	b.Run("unkeyed", func(b *testing.B) {
		var acc uint64
		for i := 0; b.Loop(); i++ {
			h := hs[i&1023] ^ acc&1
			hi, _ := bits.Mul64(h, s.nb)
			t := max(uint16(h), 1)
			acc += hi + uint64(t)
		}
		sinkLocate = acc
	})
}

var sinkLocate uint64
