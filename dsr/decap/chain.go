package decap

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"
)

// SocketLookup tells whether this host has a connection for a flow.
type SocketLookup interface {
	// Lookup reports whether a socket of protocol proto (6 TCP, 17 UDP)
	// with local address and port local is connected to remote: an
	// established (or closing, or half-open) TCP connection, or a
	// connected UDP socket. A listening TCP socket or an unconnected UDP
	// socket is not a match, though it would receive the packet. It is
	// called from several goroutines at once.
	Lookup(proto uint8, local, remote netip.AddrPort) (bool, error)
}

// chainer decides, for a packet with a previous-owner hint, whether it
// is delivered here, chained to the previous owner or dropped, and counts
// why. The receive goroutines share it.
type chainer struct {
	on     bool
	peers  []netip.Prefix // the only addresses a packet is chained to
	lookup SocketLookup
	cache  *flowCache // nil: every hinted packet is looked up
	stats  *counters
}

// verdict is what becomes of a hinted packet.
type verdict uint8

const (
	deliverHere verdict = iota // counted by HintOutcome
	chainOn                    // counted by the caller once sent
	dropTarget                 // counted as DropChainTarget
)

// decide returns what becomes of inner, an accepted inner packet that
// came with hint h: delivered here, chained to h.prev, or dropped because
// h.prev is not a chain peer. With a cache hit it does not allocate; a
// lookup may.
func (c *chainer) decide(inner []byte, h hint) verdict {
	c.stats.hinted.Add(1)
	if !c.on {
		return c.local(HintOff)
	}
	if h.chained {
		return c.local(HintChainedIn)
	}
	k, syn, ok := flowOf(inner)
	if !ok {
		return c.local(HintNoPorts)
	}
	if syn {
		c.cache.forget(k)
		return c.local(HintSYN)
	}
	now := nanotime()
	if here, ok := c.cache.get(k, now); ok {
		c.stats.cacheHits.Add(1)
		if here {
			return c.local(HintMatch)
		}
		return c.to(h.prev)
	}
	c.stats.lookups.Add(1)
	here, err := c.lookup.Lookup(k.proto, k.local, k.remote)
	if err != nil {
		return c.local(HintLookupError) // not cached: the next packet asks again
	}
	c.cache.put(k, here, now)
	if here {
		return c.local(HintMatch)
	}
	return c.to(h.prev)
}

func (c *chainer) local(o HintOutcome) verdict {
	c.stats.hints[o].Add(1)
	return deliverHere
}

// to returns chainOn when prev is in the chain peers, else counts the
// drop. The hint is the packet's own word: with a forged outer source or
// too wide an allow-list, a sender could name any address and have this
// host send datagrams to every host's GUE port. Delivered here instead,
// the packet would only earn the client a reset (no local connection has
// it), so it is dropped; the counter also shows a ChainPeers that lacks
// a backend vipd knows.
func (c *chainer) to(prev netip.Addr) verdict {
	if inPrefixes(c.peers, prev) {
		return chainOn
	}
	c.stats.dropped[DropChainTarget].Add(1)
	return dropTarget
}

// observe is called with every inner packet delivered without a hint:
// a connection start forgets the flow's cached decision, so that a new
// connection on a reused 5-tuple is looked up afresh.
func (c *chainer) observe(inner []byte) {
	if c.cache == nil {
		return
	}
	if k, syn, ok := flowOf(inner); ok && syn {
		c.cache.forget(k)
	}
}

// epoch anchors nanotime: time.Since reads the monotonic clock.
var epoch = time.Now()

// nanotime is the monotonic time in nanoseconds since epoch, never 0.
func nanotime() int64 { return int64(time.Since(epoch)) + 1 }

// flowCache remembers, for a short time, the lookup result of recently
// hinted flows, so that a flow whose packets all carry a hint costs one
// kernel lookup per TTL rather than one per packet. It is a fixed array
// of slots, each flow hashed to one (a newer flow takes the slot over),
// with striped locks: it never allocates after newFlowCache, and its
// size is bounded by construction. The nil *flowCache caches nothing.
type flowCache struct {
	ttl   int64 // nanoseconds
	seed  uint64
	mask  uint64 // len(slots) - 1
	slots []cacheSlot
	locks [cacheLocks]paddedMutex
}

// cacheLocks is the number of lock stripes, enough that the receive
// goroutines rarely wait for each other.
const cacheLocks = 64

type paddedMutex struct {
	sync.Mutex
	_ [56]byte // one cache line each
}

type cacheSlot struct {
	key     flowKey
	expires int64 // nanotime; 0: empty
	here    bool  // the lookup found a local connection
}

// newFlowCache returns a cache of size slots (rounded up to a power of
// two, at least cacheLocks) whose entries live for ttl.
func newFlowCache(size int, ttl time.Duration) *flowCache {
	n := max(cacheLocks, 1<<bits.Len(uint(size-1)))
	return &flowCache{ttl: int64(ttl), seed: rand.Uint64(), mask: uint64(n - 1), slots: make([]cacheSlot, n)}
}

// index hashes k to a slot. The seed keeps a sender from choosing flows
// that collide on every host.
func (c *flowCache) index(k flowKey) uint64 {
	l, r := k.local.Addr().As16(), k.remote.Addr().As16()
	h := c.seed ^ uint64(k.proto)<<32 ^ uint64(k.local.Port())<<16 ^ uint64(k.remote.Port())
	for _, w := range [4]uint64{
		binary.LittleEndian.Uint64(l[:8]), binary.LittleEndian.Uint64(l[8:]),
		binary.LittleEndian.Uint64(r[:8]), binary.LittleEndian.Uint64(r[8:]),
	} {
		h = (h ^ w) * 0x9e3779b97f4a7c15
		h ^= h >> 29
	}
	return h & c.mask
}

func (c *flowCache) get(k flowKey, now int64) (here, ok bool) {
	if c == nil {
		return false, false
	}
	i := c.index(k)
	mu := &c.locks[i%cacheLocks]
	mu.Lock()
	s := c.slots[i]
	mu.Unlock()
	if s.expires == 0 || s.key != k || now >= s.expires {
		return false, false
	}
	return s.here, true
}

func (c *flowCache) put(k flowKey, here bool, now int64) {
	if c == nil {
		return
	}
	i := c.index(k)
	mu := &c.locks[i%cacheLocks]
	mu.Lock()
	c.slots[i] = cacheSlot{key: k, expires: now + c.ttl, here: here}
	mu.Unlock()
}

func (c *flowCache) forget(k flowKey) {
	if c == nil {
		return
	}
	i := c.index(k)
	mu := &c.locks[i%cacheLocks]
	mu.Lock()
	if c.slots[i].key == k {
		c.slots[i] = cacheSlot{}
	}
	mu.Unlock()
}
