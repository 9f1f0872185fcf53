package conntrack

import (
	"math/rand/v2"
	"testing"
)

// TestScanPair holds scanPair to the plain definition of its two answers,
// on random full pairs: the first timed-out slot in pair order, and of the
// evictable slots the lowest proof level, then the oldest, then the first.
// Ticks near 0 and near the top of the range, ties in level and age, and
// pairs with no evictable slot all occur.
func TestScanPair(t *testing.T) {
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
