package hashing

import "encoding/binary"

// Domain constants keep the hash families apart, so that for instance the
// source-only hash of an address is unrelated to any 5-tuple hash and a
// fragment's 3-tuple hash is unrelated to the first fragment's 5-tuple hash.
// Their values are arbitrary: consecutive 64-bit groups of the hexadecimal
// digits of π.
const (
	domFlow4 = 0x243f6a8885a308d3
	domFlow6 = 0x13198a2e03707344
	domSrc4  = 0xa4093822299f31d0
	domSrc6  = 0x082efa98ec4e6c89
	domFrag4 = 0x452821e638d01377
	domFrag6 = 0xbe5466cf34e90c6c
)

// The flow hashes are pure integer arithmetic on values whose byte order is
// fixed by their definition, so a given tuple and seed hash to the same value
// in every process on every architecture; the golden values in testdata pin
// them. They cost one multiply per 64-bit word plus a two-multiply
// finalizer, never allocate, and all but Flow6 and Frag6 inline into the
// caller (those two inline their address step, absorb6).
//
// Addresses are in network byte order as read from the packet: an IPv4
// address is binary.BigEndian.Uint32 of its four bytes and an IPv6 address is
// its sixteen bytes. Ports are host integers (BigEndian.Uint16 of the header
// field), proto is the IP protocol number.

// Flow4 hashes an IPv4 5-tuple.
//
// It is inlinable: the body is start, absorb and absorbLast written out,
// because the inliner charges more for the nested calls than for the
// arithmetic. TestFlow4Spelled checks it against the composed form.
func Flow4(src, dst uint32, sport, dport uint16, proto uint8, seed uint64) uint64 {
	h := (seed ^ domFlow4) * kMul
	h = (h ^ (uint64(src) | uint64(dst)<<32)) * kMul
	h ^= h >> 32
	h = (h ^ (uint64(sport) | uint64(dport)<<16 | uint64(proto)<<32)) * kMul
	return fmix(h)
}

// Flow6 hashes an IPv6 5-tuple.
func Flow6(src, dst *[16]byte, sport, dport uint16, proto uint8, seed uint64) uint64 {
	h := absorb6(start(seed, domFlow6), src, dst)
	return fmix(absorbLast(h, uint64(sport)|uint64(dport)<<16|uint64(proto)<<32))
}

// Src4 hashes an IPv4 source address alone, for client affinity: every
// connection from one client lands on the same backend.
func Src4(src uint32, seed uint64) uint64 {
	return fmix(absorbLast(start(seed, domSrc4), uint64(src)))
}

// Src6 hashes an IPv6 source address alone, for client affinity.
func Src6(src *[16]byte, seed uint64) uint64 {
	h := absorb(start(seed, domSrc6), binary.LittleEndian.Uint64(src[0:8]))
	return fmix(absorbLast(h, binary.LittleEndian.Uint64(src[8:16])))
}

// Frag4 hashes the IPv4 3-tuple (addresses and protocol). Non-first
// fragments carry no ports, so every fragment of a datagram, including the
// first, must be steered by this hash rather than by Flow4.
func Frag4(src, dst uint32, proto uint8, seed uint64) uint64 {
	h := absorb(start(seed, domFrag4), uint64(src)|uint64(dst)<<32)
	return fmix(absorbLast(h, uint64(proto)))
}

// Frag6 hashes the IPv6 3-tuple, for fragments (see Frag4).
func Frag6(src, dst *[16]byte, proto uint8, seed uint64) uint64 {
	return fmix(absorbLast(absorb6(start(seed, domFrag6), src, dst), uint64(proto)))
}

// start returns the initial state of a hash family's chain. Multiplying
// spreads the seed over the whole word: with a plain XOR, two seeds that
// differ only in low bits would merely relabel inputs (h(x, s1) == h(x^δ, s2)
// for a small δ), whereas this way δ is almost surely wider than the first
// absorbed word. The multiply does not depend on the packet, so it overlaps
// with reading the tuple.
func start(seed, dom uint64) uint64 { return (seed ^ dom) * kMul }

// absorb6 folds two IPv6 addresses into h: absorb over their four 64-bit
// words, written out so that absorb6 fits the inlining budget and costs
// Flow6 and Frag6 no call (TestAbsorb6Spelled checks the equivalence). The
// byte order used to read the words is part of the hash definition, not of
// the machine: little-endian is chosen because it is a plain load on amd64
// and arm64.
func absorb6(h uint64, src, dst *[16]byte) uint64 {
	h = (h ^ binary.LittleEndian.Uint64(src[0:8])) * kMul
	h ^= h >> 32
	h = (h ^ binary.LittleEndian.Uint64(src[8:16])) * kMul
	h ^= h >> 32
	h = (h ^ binary.LittleEndian.Uint64(dst[0:8])) * kMul
	h ^= h >> 32
	h = (h ^ binary.LittleEndian.Uint64(dst[8:16])) * kMul
	return h ^ h>>32
}
