package afxdp

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ring is one of the four single-producer/single-consumer rings an AF_XDP
// socket shares with the kernel. The producer and consumer indexes are
// free-running uint32 counters; an index i addresses slot i & mask. The
// side that owns an index writes it with a release store after filling or
// draining slots, and the other side reads it with an acquire load, so the
// slots themselves need no atomics.
//
// cachedProd and cachedCons are this process's last view of both indexes:
// for a ring we produce to, cachedCons is refreshed only when the cache says
// the ring is full; for a ring we consume from, cachedProd only when it says
// the ring is empty. That is the point of caching: most calls touch no
// shared cache line but our own.
type ring struct {
	prod, cons, flags *uint32
	descs             unsafe.Pointer // *[size]uint64 (fill, completion) or *[size]unix.XDPDesc (rx, tx)
	mask, size        uint32
	cachedProd        uint32
	cachedCons        uint32
	mem               []byte // the mapping, for munmap
}

// mapRing maps one ring of socket fd. elem is the size of a descriptor.
func mapRing(fd int, pgoff int64, off unix.XDPRingOffset, size uint32, elem uintptr) (ring, error) {
	n := int(off.Desc) + int(size)*int(elem)
	mem, err := unix.Mmap(fd, pgoff, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return ring{}, fmt.Errorf("mmap ring at %#x: %w", pgoff, err)
	}
	base := unsafe.Pointer(&mem[0])
	r := ring{
		prod:  (*uint32)(unsafe.Add(base, off.Producer)),
		cons:  (*uint32)(unsafe.Add(base, off.Consumer)),
		flags: (*uint32)(unsafe.Add(base, off.Flags)),
		descs: unsafe.Add(base, off.Desc),
		mask:  size - 1,
		size:  size,
		mem:   mem,
	}
	r.cachedProd = atomic.LoadUint32(r.prod)
	r.cachedCons = atomic.LoadUint32(r.cons)
	return r, nil
}

func (r *ring) unmap() {
	if r.mem != nil {
		unix.Munmap(r.mem)
		r.mem = nil
	}
}

// --- producer side (fill, tx) ---

// free returns how many slots can be produced, refreshing the consumer
// index only when the cached view has fewer than want.
func (r *ring) free(want uint32) uint32 {
	n := r.size - (r.cachedProd - r.cachedCons)
	if n >= want {
		return n
	}
	r.cachedCons = atomic.LoadUint32(r.cons)
	return r.size - (r.cachedProd - r.cachedCons)
}

// submit publishes the slots produced since the last submit.
func (r *ring) submit() { atomic.StoreUint32(r.prod, r.cachedProd) }

// --- consumer side (rx, completion) ---

// avail returns how many slots can be consumed, refreshing the producer
// index only when the cached view is empty.
func (r *ring) avail() uint32 {
	n := r.cachedProd - r.cachedCons
	if n > 0 {
		return n
	}
	r.cachedProd = atomic.LoadUint32(r.prod)
	return r.cachedProd - r.cachedCons
}

// release hands consumed slots back to the kernel.
func (r *ring) release() { atomic.StoreUint32(r.cons, r.cachedCons) }

func (r *ring) needWakeup() bool { return atomic.LoadUint32(r.flags)&unix.XDP_RING_NEED_WAKEUP != 0 }

// addr returns the address slot of a fill or completion ring.
func (r *ring) addr(i uint32) *uint64 {
	return (*uint64)(unsafe.Add(r.descs, uintptr(i&r.mask)*8))
}

// desc returns the descriptor slot of an rx or tx ring.
func (r *ring) desc(i uint32) *unix.XDPDesc {
	return (*unix.XDPDesc)(unsafe.Add(r.descs, uintptr(i&r.mask)*unsafe.Sizeof(unix.XDPDesc{})))
}
