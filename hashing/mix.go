package hashing

// The primitives every hash in this package is built from: absorb (and its
// variant absorbLast) and fmix. All are bijections on uint64, which is what
// lets the tests reason about collisions: a chain of absorb steps followed by
// fmix maps two inputs that differ in only one word to different outputs,
// always.

const (
	// kMul is 2^64/φ, truncated (it is odd); multiplying by an odd constant
	// is a bijection modulo 2^64.
	kMul = 0x9e3779b97f4a7c15

	// kFin1 and kFin2 are the multipliers of the splitmix64 output function
	// (Stafford's "Mix13" variant of the MurmurHash3 finalizer).
	kFin1 = 0xbf58476d1ce4e5b9
	kFin2 = 0x94d049bb133111eb
)

// absorb folds the word w into the running state h. For a fixed h it is a
// bijection of w and for a fixed w a bijection of h. It mixes only partially
// (a product carries low bits upwards, the shift folds them back down once);
// fmix at the end of every chain does the avalanche.
func absorb(h, w uint64) uint64 {
	h = (h ^ w) * kMul
	return h ^ h>>32
}

// absorbLast is absorb without the fold, for the last word before fmix,
// whose first step is the same fold.
func absorbLast(h, w uint64) uint64 { return (h ^ w) * kMul }

// fmix is a full-avalanche bijection: every input bit flips each output bit
// with probability close to 1/2.
func fmix(h uint64) uint64 {
	h ^= h >> 30
	h *= kFin1
	h ^= h >> 27
	h *= kFin2
	return h ^ h>>31
}

// hashString is a seeded 64-bit hash of s, used only when tables are built
// (backend identities), never per packet. The length is absorbed first, so the
// zero padding of the last word cannot make "a" and "a\x00" collide. Each word
// goes through the full fmix rather than absorb because two differently seeded
// hashes of the same string must look independent (Maglev's offset and skip).
func hashString(s string, seed uint64) uint64 {
	h := fmix(seed ^ uint64(len(s)))
	for ; len(s) >= 8; s = s[8:] {
		w := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		h = fmix(h ^ w)
	}
	if len(s) > 0 {
		var w uint64
		for i := 0; i < len(s); i++ {
			w |= uint64(s[i]) << (8 * i)
		}
		h = fmix(h ^ w)
	}
	return h
}
