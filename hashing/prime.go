package hashing

import "math/bits"

// IsPrime reports whether n is prime. It is exact for every uint64: the
// Miller–Rabin test with the first twelve primes as bases has no strong
// pseudoprime below 3.1·10^23 (Sorenson and Webster, "Strong pseudoprimes
// to twelve prime bases", 2017), far above 2^64.
func IsPrime(n uint64) bool {
	bases := [...]uint64{2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37}
	if n < 2 {
		return false
	}
	for _, p := range bases {
		if n%p == 0 {
			return n == p
		}
	}
	// n-1 = d·2^s with d odd.
	d := n - 1
	s := bits.TrailingZeros64(d)
	d >>= s
	for _, a := range bases {
		if !strongProbablePrime(n, d, s, a) {
			return false
		}
	}
	return true
}

// strongProbablePrime reports whether odd n passes the strong probable prime
// test to base a, given n-1 = d·2^s.
func strongProbablePrime(n, d uint64, s int, a uint64) bool {
	x := powMod(a, d, n)
	if x == 1 || x == n-1 {
		return true
	}
	for range s - 1 {
		x = mulMod(x, x, n)
		if x == n-1 {
			return true
		}
	}
	return false
}

// mulMod returns a·b mod n for a, b < n, without overflow: the 128-bit
// product's high word is below n, which is what bits.Rem64 requires.
func mulMod(a, b, n uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return bits.Rem64(hi, lo, n)
}

// powMod returns a^e mod n.
func powMod(a, e, n uint64) uint64 {
	r := uint64(1)
	a %= n
	for ; e > 0; e >>= 1 {
		if e&1 == 1 {
			r = mulMod(r, a, n)
		}
		a = mulMod(a, a, n)
	}
	return r
}
