package dataplane

import (
	"encoding/binary"
	"math/bits"
)

// The classifier tables below are tiny, immutable open-addressed hash
// tables, built once per snapshot. A Go map would do, but costs a hash call
// and more memory traffic per packet; these cost one multiply and usually one
// compare. Load factor is at most 1/2, so a probe sequence is short, and a
// miss ends at the first empty slot.

// key4 packs an IPv4 address, protocol and port into one word.
func key4(addr uint32, proto uint8, port uint16) uint64 {
	return uint64(addr)<<32 | uint64(proto)<<16 | uint64(port)
}

// empty marks a free slot and is what get returns for a missing key; it is
// never stored as a value (other negative values, like ambiguous, are).
const empty = -1

type slot4 struct {
	key uint64
	val int32
}

type table4 struct {
	slots []slot4
	shift uint
}

func newTable4(n int) table4 {
	size, shift := tableSize(n)
	t := table4{slots: make([]slot4, size), shift: shift}
	for i := range t.slots {
		t.slots[i].val = empty
	}
	return t
}

// fib is 2^64/φ, the multiplier of Fibonacci hashing (Knuth 6.4).
const fib = 0x9e3779b97f4a7c15

func (t *table4) put(k uint64, v int32) {
	mask := uint64(len(t.slots) - 1)
	for i := (k * fib) >> t.shift; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.val == empty || s.key == k {
			s.key, s.val = k, v
			return
		}
	}
}

// get returns the value stored for k, or empty.
func (t *table4) get(k uint64) int32 {
	if len(t.slots) == 0 {
		return empty
	}
	mask := uint64(len(t.slots) - 1)
	for i := (k * fib) >> t.shift; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.val == empty {
			return empty
		}
		if s.key == k {
			return s.val
		}
	}
}

// key6 is key4 for IPv6.
type key6 struct {
	hi, lo uint64
	pp     uint64 // proto<<16 | port
}

func mkKey6(addr *[16]byte, proto uint8, port uint16) key6 {
	return key6{binary.BigEndian.Uint64(addr[:8]), binary.BigEndian.Uint64(addr[8:]), uint64(proto)<<16 | uint64(port)}
}

type slot6 struct {
	key key6
	val int32
}

type table6 struct {
	slots []slot6
	shift uint
}

func newTable6(n int) table6 {
	size, shift := tableSize(n)
	t := table6{slots: make([]slot6, size), shift: shift}
	for i := range t.slots {
		t.slots[i].val = empty
	}
	return t
}

func (k key6) hash() uint64 {
	h := k.hi*fib ^ bits.RotateLeft64(k.lo*fib, 31) ^ k.pp
	return h * fib
}

func (t *table6) put(k key6, v int32) {
	mask := uint64(len(t.slots) - 1)
	for i := k.hash() >> t.shift; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.val == empty || s.key == k {
			s.key, s.val = k, v
			return
		}
	}
}

func (t *table6) get(k key6) int32 {
	if len(t.slots) == 0 {
		return empty
	}
	mask := uint64(len(t.slots) - 1)
	for i := k.hash() >> t.shift; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.val == empty {
			return empty
		}
		if s.key == k {
			return s.val
		}
	}
}

// tableSize returns a power-of-two slot count of at least 2n (and 8), and
// the shift that maps a 64-bit hash onto it.
func tableSize(n int) (int, uint) {
	size := 8
	for size < 2*n {
		size <<= 1
	}
	return size, uint(64 - bits.TrailingZeros(uint(size)))
}

// addrFilter4 is a one-hash Bloom filter of 4096 bits over the VIP
// addresses of a snapshot: a clear bit proves that an address is no VIP's.
// The packet path asks it whether a client's source address is a VIP
// (spoofed), which it almost never is: one load and a bit test instead of
// a probe of addr4. With a few hundred VIP addresses most bits stay clear.
type addrFilter4 [64]uint64

func (f *addrFilter4) bit(a uint32) (int, uint64) {
	i := (uint64(a) * fib) >> 52 // 12 bits
	return int(i >> 6), 1 << (i & 63)
}

func (f *addrFilter4) add(a uint32) {
	w, m := f.bit(a)
	f[w] |= m
}

// mayHave reports false only for an address never added.
func (f *addrFilter4) mayHave(a uint32) bool {
	w, m := f.bit(a)
	return f[w]&m != 0
}
