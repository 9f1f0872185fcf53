package packet

import (
	"encoding/binary"
	"math/bits"
)

// The Internet checksum (RFC 1071) is the 16-bit ones' complement of the
// ones' complement sum of the data taken as big-endian 16-bit words, an odd
// trailing byte padded with a zero byte on the right.
//
// Two kinds of value appear below and are easy to confuse:
//
//   - a sum: the folded ones' complement sum, not complemented. Sums chain:
//     the sum of a pseudo-header is the initial value of the segment's sum.
//   - a checksum: ^sum, the value stored in a header's checksum field.
//
// A header whose checksum field is correct sums (field included) to 0xFFFF.

// Sum returns the ones' complement sum of b, added to initial and folded to
// 16 bits. It is not complemented. initial is normally 0 or the sum of the
// bytes that precede b; those must be of even length, since an odd prefix
// would shift the pairing of b's bytes into 16-bit words.
//
// Sum reads 8 bytes at a time into a 64-bit accumulator with end-around
// carry. It loads words in little-endian (native) order and swaps the result
// once at the end: ones' complement addition commutes with byte swapping
// (RFC 1071 §2(B)), so the result equals a big-endian word-by-word sum.
func Sum(b []byte, initial uint16) uint16 {
	var acc, c uint64
	for len(b) >= 32 {
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[0:8]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[8:16]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[16:24]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[24:32]), c)
		b = b[32:]
	}
	for len(b) >= 8 {
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[:8]), c)
		b = b[8:]
	}
	// The tail keeps each byte at the same parity, so it lands in the same
	// half of a 16-bit word as it would in a full 8-byte load.
	if len(b) >= 4 {
		acc, c = bits.Add64(acc, uint64(binary.LittleEndian.Uint32(b[:4])), c)
		b = b[4:]
	}
	if len(b) >= 2 {
		acc, c = bits.Add64(acc, uint64(binary.LittleEndian.Uint16(b[:2])), c)
		b = b[2:]
	}
	if len(b) == 1 {
		// Big-endian, an odd byte is the high half of a zero-padded word;
		// little-endian it is the low half.
		acc, c = bits.Add64(acc, uint64(b[0]), c)
	}
	// The end-around carry. It cannot overflow: a carry out of x+y+cin
	// leaves at most 2^64-1 only when x = y = 2^64-1 and cin = 1, so by
	// induction from acc = c = 0, c = 1 implies acc <= 2^64-2.
	acc += c
	s := bits.ReverseBytes16(fold64(acc))
	return add16(s, initial)
}

// Checksum returns ^Sum(b, initial): the value for a checksum field when b
// holds the covered bytes with the field itself zero (or skipped).
func Checksum(b []byte, initial uint16) uint16 {
	return ^Sum(b, initial)
}

// fold64 folds a 64-bit ones' complement accumulator to 16 bits. Each step
// adds the halves; the bounds in the comments show why four steps suffice.
func fold64(x uint64) uint16 {
	x = (x >> 32) + (x & 0xffffffff) // < 2^33
	x = (x >> 32) + (x & 0xffffffff) // <= 0xffffffff
	x = (x >> 16) + (x & 0xffff)     // <= 0x1fffe
	x = (x >> 16) + (x & 0xffff)     // <= 0xffff
	return uint16(x)
}

// fold32 folds a 32-bit ones' complement accumulator to 16 bits (the first
// step leaves at most 0x1fffe, the second at most 0xffff).
func fold32(x uint32) uint16 {
	x = (x >> 16) + (x & 0xffff)
	x = (x >> 16) + (x & 0xffff)
	return uint16(x)
}

// add16 is ones' complement addition of two 16-bit values.
func add16(a, b uint16) uint16 {
	return fold32(uint32(a) + uint32(b))
}

// PseudoHeaderSum4 returns the sum of the IPv4 pseudo-header that TCP
// (RFC 9293 §3.1), UDP (RFC 768) and not ICMPv4 prepend to their checksum:
// source, destination, zero, protocol, and length, the byte count of the
// upper-layer header plus data.
func PseudoHeaderSum4(src, dst [4]byte, proto uint8, length uint16) uint16 {
	s := uint32(binary.BigEndian.Uint16(src[0:2])) +
		uint32(binary.BigEndian.Uint16(src[2:4])) +
		uint32(binary.BigEndian.Uint16(dst[0:2])) +
		uint32(binary.BigEndian.Uint16(dst[2:4])) +
		uint32(proto) + uint32(length)
	return fold32(s)
}

// PseudoHeaderSum6 returns the sum of the IPv6 pseudo-header (RFC 8200
// §8.1) used by TCP, UDP and ICMPv6: source, destination (the final one, if
// a routing header is present), the 32-bit upper-layer packet length, and
// the next-header value of the upper-layer protocol (not that of the first
// extension header).
func PseudoHeaderSum6(src, dst *[16]byte, proto uint8, length uint32) uint16 {
	var acc, c uint64
	acc, c = bits.Add64(acc, binary.BigEndian.Uint64(src[0:8]), c)
	acc, c = bits.Add64(acc, binary.BigEndian.Uint64(src[8:16]), c)
	acc, c = bits.Add64(acc, binary.BigEndian.Uint64(dst[0:8]), c)
	acc, c = bits.Add64(acc, binary.BigEndian.Uint64(dst[8:16]), c)
	acc, c = bits.Add64(acc, uint64(length), c)
	acc, c = bits.Add64(acc, uint64(proto), c)
	acc += c // cannot overflow, see Sum
	return fold64(acc)
}

// ChecksumUpdate16 returns checksum csum adjusted for one 16-bit word of the
// covered data changing from old to new, by RFC 1624 eqn. 3:
//
//	HC' = ~(~HC + ~m + m')
//
// Eqn. 3 rather than eqn. 2 (HC' = HC - ~m - m'), which can yield 0xFFFF
// where a full recomputation yields 0x0000 (RFC 1624 §3): with eqn. 3 the
// result always equals what recomputing the checksum from scratch gives.
func ChecksumUpdate16(csum, old, new uint16) uint16 {
	return ^fold32(uint32(^csum) + uint32(^old) + uint32(new))
}

// ChecksumUpdate32 is ChecksumUpdate16 for an aligned 32-bit field (an IPv4
// address, a TCP sequence number), given as big-endian values.
func ChecksumUpdate32(csum uint16, old, new uint32) uint16 {
	s := uint32(^csum) +
		uint32(^uint16(old>>16)) + uint32(^uint16(old)) +
		uint32(uint16(new>>16)) + uint32(uint16(new))
	return ^fold32(s)
}

// ChecksumUpdate128 is ChecksumUpdate16 for an aligned 128-bit field (an
// IPv6 address). old is read before new, so old may alias the packet and
// new be copied over it afterwards; read both before writing either.
//
// A 64-bit word is congruent to the sum of its four 16-bit words modulo
// 0xFFFF (since 2^16 ≡ 1), so the eight words are added as two 64-bit ones.
func ChecksumUpdate128(csum uint16, old, new *[16]byte) uint16 {
	var acc, c uint64
	acc, c = bits.Add64(acc, uint64(^csum), c)
	acc, c = bits.Add64(acc, ^binary.BigEndian.Uint64(old[0:8]), c)
	acc, c = bits.Add64(acc, ^binary.BigEndian.Uint64(old[8:16]), c)
	acc, c = bits.Add64(acc, binary.BigEndian.Uint64(new[0:8]), c)
	acc, c = bits.Add64(acc, binary.BigEndian.Uint64(new[8:16]), c)
	acc += c // cannot overflow, see Sum
	return ^fold64(acc)
}

// udpChecksumFix maps a computed UDP checksum of 0x0000 to 0xFFFF, its
// other ones' complement representation, because a zero field means "no
// checksum" (RFC 768).
func udpChecksumFix(updated uint16) uint16 {
	if updated == 0 {
		return 0xffff
	}
	return updated
}

// ChecksumAdd updates checksum csum by sum, a 32-bit accumulation of
// ~old + new over the 16-bit words that changed (RFC 1624, eqn. 3), less
// than 2^31 and unfolded: callers that know a change ahead of the packet
// (an address translation) compute that part of sum once.
func ChecksumAdd(csum uint16, sum uint32) uint16 {
	return ^fold32(uint32(^csum) + sum)
}

// ChecksumUpdate48 is ChecksumUpdate16 for a 32-bit field and a 16-bit
// word changing together (an address and a port, or an address and the
// TTL/protocol word), folded once: the cost of one update for two.
func ChecksumUpdate48(csum uint16, old32, new32 uint32, old16, new16 uint16) uint16 {
	s := uint32(^csum) +
		uint32(^uint16(old32>>16)) + uint32(^uint16(old32)) +
		uint32(uint16(new32>>16)) + uint32(uint16(new32)) +
		uint32(^old16) + uint32(new16)
	return ^fold32(s)
}
