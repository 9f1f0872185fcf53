package hashing

import (
	"math/big"
	"testing"
)

func TestIsPrime(t *testing.T) {
	cases := []struct {
		n    uint64
		want bool
	}{
		{0, false}, {1, false}, {2, true}, {3, true}, {4, false}, {37, true}, {41, true}, {49, false},
		{65535, false}, {65536, false}, {65537, true}, {655373, true}, {1 << 24, false},
		// Carmichael numbers: Fermat liars for every coprime base.
		{561, false}, {41041, false}, {825265, false},
		// Strong pseudoprimes to the first k prime bases (OEIS A014233), the
		// inputs on which a Miller–Rabin with too few bases is wrong.
		{2047, false},                // base 2
		{1373653, false},             // bases 2, 3
		{25326001, false},            // bases 2..5
		{3215031751, false},          // bases 2..7
		{2152302898747, false},       // bases 2..11
		{3474749660383, false},       // bases 2..13
		{341550071728321, false},     // bases 2..17
		{3825123056546413051, false}, // bases 2..23
		{1<<61 - 1, true},            // Mersenne prime
		{1<<64 - 59, true},           // largest prime below 2^64
		{1<<64 - 1, false},
		{4294967291, true},               // largest prime below 2^32
		{4294967291 * 4294967279, false}, // product of two large primes
	}
	for _, c := range cases {
		if got := IsPrime(c.n); got != c.want {
			t.Errorf("IsPrime(%d) = %v, want %v", c.n, got, c.want)
		}
	}
}

// TestIsPrimeMatchesBig compares against math/big, whose ProbablyPrime(0) is
// exact below 2^64 (Baillie–PSW), on every small n and on random large ones.
func TestIsPrimeMatchesBig(t *testing.T) {
	check := func(n uint64) {
		if got, want := IsPrime(n), new(big.Int).SetUint64(n).ProbablyPrime(0); got != want {
			t.Fatalf("IsPrime(%d) = %v, math/big says %v", n, got, want)
		}
	}
	for n := range uint64(100000) {
		check(n)
	}
	r := newRand(3)
	for range 20000 {
		check(r.Uint64() | 1)
		check(r.Uint64() >> r.UintN(64))
	}
}
