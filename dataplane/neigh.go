package dataplane

import (
	"encoding/binary"
	"net/netip"
	"sync/atomic"
)

// NeighborCache remembers the MAC address of clients on the ingress port's
// connected subnets, learned from the source MAC of their own frames, so
// that NAT replies to them can be addressed without asking the kernel,
// which never talks to those clients and so has no neighbor entry for them.
//
// It is shared by all workers (a reply may arrive on another queue than its
// flow) and lock-free: each slot is a small seqlock of atomics. A writer
// that finds a slot busy skips the update (it will see the client again);
// a reader that sees a slot change under it reports a miss. Slots are
// chosen by hash and overwritten by newer clients: it is a cache, and a
// miss costs one dropped reply (counted no_neighbor) until the client's
// next packet.
type NeighborCache struct {
	slots []nslot
	mask  uint64
}

type nslot struct {
	seq    atomic.Uint64 // odd while a writer fills the slot
	hi, lo atomic.Uint64 // the address, IPv4 mapped into IPv6
	mac    atomic.Uint64 // 48-bit MAC; 0 = empty
}

// NewNeighborCache returns a cache of at least n slots (a power of two).
func NewNeighborCache(n int) *NeighborCache {
	size := 64
	for size < n {
		size <<= 1
	}
	return &NeighborCache{slots: make([]nslot, size), mask: uint64(size - 1)}
}

func (c *NeighborCache) slot(hi, lo uint64) *nslot {
	h := (hi*fib ^ lo) * fib
	return &c.slots[h>>32&c.mask]
}

// macWord packs a MAC into the low 48 bits of a word, big-endian, in two
// loads (learn runs for every packet of an on-link NAT client).
func macWord(m [6]byte) uint64 {
	return uint64(binary.BigEndian.Uint32(m[:4]))<<16 | uint64(binary.BigEndian.Uint16(m[4:]))
}

// learn records that the client at (hi, lo) sends from mac.
func (c *NeighborCache) learn(hi, lo uint64, mac [6]byte) {
	s := c.slot(hi, lo)
	m := macWord(mac)
	seq := s.seq.Load()
	if seq&1 == 0 && s.mac.Load() == m && s.hi.Load() == hi && s.lo.Load() == lo && s.seq.Load() == seq {
		return // already known: the common case is read-only
	}
	if seq&1 != 0 || !s.seq.CompareAndSwap(seq, seq+1) {
		return
	}
	s.hi.Store(hi)
	s.lo.Store(lo)
	s.mac.Store(m)
	s.seq.Store(seq + 2)
}

// lookup returns the MAC learned for (hi, lo).
func (c *NeighborCache) lookup(hi, lo uint64) ([6]byte, bool) {
	s := c.slot(hi, lo)
	seq := s.seq.Load()
	if seq&1 != 0 {
		return [6]byte{}, false
	}
	h, l, m := s.hi.Load(), s.lo.Load(), s.mac.Load()
	if s.seq.Load() != seq || h != hi || l != lo || m == 0 {
		return [6]byte{}, false
	}
	return [6]byte{byte(m >> 40), byte(m >> 32), byte(m >> 24), byte(m >> 16), byte(m >> 8), byte(m)}, true
}

// nkey4 and nkey6 give the cache's key of an address: IPv4 as
// IPv4-mapped IPv6, so that one table holds both.
func nkey4(a [4]byte) (uint64, uint64) {
	return 0, 0xffff<<32 | uint64(binary.BigEndian.Uint32(a[:]))
}

func nkey6(a *[16]byte) (uint64, uint64) {
	return binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:])
}

// Learned returns the cache's MAC for addr (for tests and the admin API).
func (c *NeighborCache) Learned(addr netip.Addr) ([6]byte, bool) {
	a := addr.As16()
	return c.lookup(nkey6(&a))
}
