package conntrack

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestScanPair holds scanPair to the plain definition of its two answers,
// on random full pairs: the first timed-out slot in pair order, and of the
// evictable slots the lowest proof level, then the oldest, then the first.
// Ticks near 0 and near the top of the range, ties in level and age, and
// pairs with no evictable slot all occur.
func TestScanPair(t *testing.T) {
	for _, simd := range simdModes(t) {
		haveSIMD = simd
		t.Run(fmt.Sprintf("simd=%v", simd), testScanPair)
	}
}

// simdModes returns the values of haveSIMD to test under, restoring it
// at cleanup: the portable version always, the SIMD one where the CPU
// has it.
func simdModes(t *testing.T) []bool {
	have := haveSIMD
	t.Cleanup(func() { haveSIMD = have })
	if !have {
		t.Log("no SSE4.1 (or not amd64): only the portable scanPair is tested")
		return []bool{false}
	}
	return []bool{false, true}
}

func testScanPair(t *testing.T) {
	s := newShard(t, 1024)
	rng := rand.New(rand.NewPCG(1, 2))
	states := []uint8{}
	for st := StateSynSent; st <= StateUDP; st++ {
		for lv := uint8(0); lv <= ProofTicks; lv++ {
			states = append(states, phase(st, lv), phase(st, lv)|altBit)
		}
	}
	var b [2]bucket
	ties, noneExpired, someExpired := 0, 0, 0
	for n := 0; n < 200_000; n++ {
		s.now = Tick(rng.Uint32N(8))
		if n%2 == 0 {
			s.now = ^Tick(0) - Tick(rng.Uint32N(8))
		}
		allProven := rng.IntN(8) == 0
		maxAge := []uint32{3, 30, 200}[rng.IntN(3)] // none, some or most past a timeout
		for j := range 16 {
			bk, i := &b[j/8], j%8
			bk.state[i] = states[rng.IntN(len(states))]
			if allProven {
				bk.state[i] = bk.state[i]&^levelMask | proven
			}
			bk.seen[i] = s.now - min(Tick(rng.Uint32N(maxAge)), s.now) // seen <= now
		}
		wantExp, wantVictim := -1, -1
		var rank uint64
		for j := range 16 {
			bk, i := &b[j/8], j%8
			if wantExp < 0 && s.expired(bk, i) {
				wantExp = j
			}
			st := bk.state[i]
			if !evictable(st) {
				continue
			}
			r := uint64(st&levelMask)<<32 | uint64(bk.seen[i])
			if wantVictim >= 0 && r == rank {
				ties++
			}
			if wantVictim < 0 || r < rank {
				wantVictim, rank = j, r
			}
		}
		exp, victim := s.scanPair(&b[0], &b[1])
		if wantExp < 0 {
			noneExpired++
		} else {
			someExpired++
		}
		gotExp, gotVictim := -1, -1
		for j := range 16 {
			if exp&(1<<j) != 0 {
				gotExp = j
				break
			}
		}
		if victim != noVictim {
			gotVictim = int(victim & pairSlotMask)
		}
		if gotExp != wantExp || gotVictim != wantVictim {
			t.Fatalf("now %d, states %v %v, seen %v %v: scanPair gave expired %d victim %d, want %d and %d",
				s.now, b[0].state, b[1].state, b[0].seen, b[1].seen, gotExp, gotVictim, wantExp, wantVictim)
		}
		for j := range 16 { // and the whole mask, not only its first bit
			if want := s.expired(&b[j/8], j%8); (exp&(1<<j) != 0) != want {
				t.Fatalf("slot %d: expired bit %v, want %v", j, !want, want)
			}
		}
	}
	if ties == 0 || noneExpired < 1000 || someExpired < 1000 {
		t.Fatalf("%d ties in rank, %d pairs with no timed-out slot, %d with one: the test misses a case", ties, noneExpired, someExpired)
	}
}

// TestScanPairEdges pins scanPair's victim, level included, on pairs the
// random test meets rarely: every slot proven, ticks at the top of the
// range on candidates and on the slots that are not, one candidate in the
// last slot, all sixteen alike. Both versions, where the CPU has SIMD.
func TestScanPairEdges(t *testing.T) {
	const top = ^Tick(0)
	all := func(lv uint8, seen Tick) (st [16]uint8, sn [16]Tick) {
		for j := range st {
			st[j], sn[j] = phase(StateUDP, lv), seen
		}
		return
	}
	tests := []struct {
		name      string
		edit      func(st *[16]uint8, sn *[16]Tick)
		wantLevel uint64
		wantSlot  int // -1: noVictim
	}{
		{"all proven", func(st *[16]uint8, sn *[16]Tick) { *st, *sn = all(ProofTicks, 5) }, 0, -1},
		{"all alike", func(st *[16]uint8, sn *[16]Tick) { *st, *sn = all(0, 5) }, 0, 0},
		{"only the last slot evictable", func(st *[16]uint8, sn *[16]Tick) {
			*st, *sn = all(ProofTicks, 5)
			st[15] = phase(StateUDP, 2)
		}, 2, 15},
		{"top tick on a candidate, behind a proven slot with it", func(st *[16]uint8, sn *[16]Tick) {
			*st, *sn = all(ProofTicks, top)
			st[9] = phase(StateUDP, 1) | altBit
		}, 1, 9},
		{"oldest of the lowest level, not of all", func(st *[16]uint8, sn *[16]Tick) {
			*st, *sn = all(2, 100)
			sn[3] = 1 // older, but at level 2
			st[7], sn[7] = phase(StateSynSent, 1), 90
			st[12], sn[12] = phase(StateSynSent, 1), 80
		}, 1, 12},
		{"ties at the lowest level go to the first slot", func(st *[16]uint8, sn *[16]Tick) {
			*st, *sn = all(1, 100)
			st[6], sn[6] = phase(StateSynSent, 0), 50
			st[13], sn[13] = phase(StateSynSent, 0), 50
		}, 0, 6},
	}
	for _, simd := range simdModes(t) {
		haveSIMD = simd
		for _, tc := range tests {
			t.Run(fmt.Sprintf("simd=%v/%s", simd, tc.name), func(t *testing.T) {
				s := newShard(t, 1024)
				s.now = 200
				var st [16]uint8
				var sn [16]Tick
				tc.edit(&st, &sn)
				var b [2]bucket
				for j := range 16 {
					b[j/8].state[j%8], b[j/8].seen[j%8] = st[j], sn[j]
				}
				_, victim := s.scanPair(&b[0], &b[1])
				if tc.wantSlot < 0 {
					if victim != noVictim {
						t.Fatalf("victim %#x, want none", victim)
					}
					return
				}
				if victim == noVictim {
					t.Fatalf("no victim, want slot %d", tc.wantSlot)
				}
				if got := int(victim & pairSlotMask); got != tc.wantSlot {
					t.Errorf("victim slot %d, want %d", got, tc.wantSlot)
				}
				if got := victim >> 36; got != tc.wantLevel {
					t.Errorf("victim level %d, want %d", got, tc.wantLevel)
				}
				if got := Tick(victim >> 4); got != sn[tc.wantSlot] {
					t.Errorf("victim seen %d, want %d", got, sn[tc.wantSlot])
				}
			})
		}
	}
}
