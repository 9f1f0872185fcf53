package control

import (
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/vipd/vipd/control/config"
)

// Registry assigns stable VIP IDs and backend references. It is safe for
// concurrent use.
//
// # Reusing backend references
//
// The dataplane indexes its backend array, and each worker its per-backend
// counters, by reference; so references are reused, or churn over many
// reloads would grow both without bound. Conntrack entries store a
// reference too, and an entry must never reach a backend its flow was not
// pinned to. The invariant that makes reuse safe:
//
//   - A backend that leaves the configuration (Forget, called once the
//     snapshot without it is published) keeps its reference on hold. If the
//     same backend (same VIP, address and port) comes back, it gets the
//     same reference and epoch again: its pinned flows may go on.
//   - Another backend gets a held reference only once hold has passed since
//     Forget, hold being longer than the longest conntrack timeout plus the
//     time a worker may still forward by an older snapshot. From the first
//     snapshot without the reference on, no worker refreshes an entry that
//     holds it (the pipeline re-pins such an entry, or leaves it alone,
//     since the reference is not in its snapshot) and Maglev never picks it;
//     so after hold every such entry has expired, and a lookup never returns
//     an expired entry. The dataplane's other guard (an entry's backend must
//     belong to the VIP the packet is for) stays, but no longer carries the
//     safety alone.
//   - Each binding of a reference to a backend has its own epoch
//     (BackendSpec.Epoch), so that workers restart the counters they keep by
//     reference when it names a new backend.
//
// A new registry holds references for RefHold of the default conntrack
// timeouts; SetHold sets the hold for the configured ones.
type Registry struct {
	mu      sync.Mutex
	vipIDs  map[string]uint16
	nextVIP uint32
	freeVIP []uint16 // released by Forget, reused once nextVIP is exhausted
	refs    map[string]uint32
	nextRef uint32
	// epochs[ref] is the epoch of ref's current (or last) binding.
	epochs map[uint32]uint32
	// held maps the keys Forget dropped to their references, until the
	// reference goes to another backend; free is the same references in
	// the order they were released.
	held map[string]release
	free []release
	seq  uint64 // counts releases: tells a release from a later one of the same key
	hold time.Duration
	now  func() time.Time
}

// release is a reference Forget put on hold at a time.
type release struct {
	key string
	ref uint32
	at  time.Time
	seq uint64
}

// NewRegistry returns an empty registry. IDs and references start at 1 so
// that 0 never names anything.
func NewRegistry() *Registry {
	return &Registry{
		vipIDs: map[string]uint16{}, refs: map[string]uint32{}, nextVIP: 1, nextRef: 1,
		epochs: map[uint32]uint32{}, held: map[string]release{}, hold: RefHold(&config.Conntrack{}), now: time.Now,
	}
}

// refHoldSlack is what RefHold adds to the longest conntrack timeout: the
// conntrack clock ticks by the second and an entry expires only once its
// idle time exceeds the timeout (up to two ticks late), and a worker may
// forward one more batch by a superseded snapshot. Seconds cover both
// with a wide margin.
const refHoldSlack = 10 * time.Second

// RefHold is how long a released backend reference must stay unused under
// the conntrack timeouts of c (zero: the default): longer than any entry
// that holds it can live without being refreshed.
func RefHold(c *config.Conntrack) time.Duration {
	pick := func(v config.Duration, def time.Duration) time.Duration {
		if v > 0 {
			return v.D()
		}
		return def
	}
	longest := max(pick(c.TCPUnestablished, config.DefaultTCPUnestablished),
		pick(c.TCPUnconfirmed, config.DefaultTCPUnconfirmed),
		pick(c.TCPEstablished, config.DefaultTCPEstablished),
		pick(c.TCPClosing, config.DefaultTCPClosing),
		pick(c.UDP, config.DefaultUDPTimeout))
	return longest + refHoldSlack
}

// SetHold lets a released reference go to another backend once d has
// passed since it was released (see Registry). d must exceed the longest
// conntrack timeout by the time a worker may use a superseded snapshot.
func (r *Registry) SetHold(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hold = d
}

// Hold returns the hold (SetHold).
func (r *Registry) Hold() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hold
}

// SetClock replaces the clock that times holds (tests).
func (r *Registry) SetClock(now func() time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.now = now
}

// VIPKey is a VIP's identity.
func VIPKey(v *config.VIP) string { return v.Key() }

// BackendKey is a backend's identity within its VIP.
func BackendKey(v *config.VIP, b *config.Backend) string {
	return v.Key() + " " + netip.AddrPortFrom(b.Address, b.Port).String()
}

// VIPID returns the ID of the VIP with identity key, assigning a new one on
// first sight. IDs of VIPs that left the configuration are reused only once
// all 65535 have been handed out.
func (r *Registry) VIPID(key string) (uint16, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id, ok := r.vipIDs[key]; ok {
		return id, nil
	}
	var id uint16
	switch {
	case r.nextVIP <= 0xffff:
		id = uint16(r.nextVIP)
		r.nextVIP++
	case len(r.freeVIP) > 0:
		// A reused ID may still name stale conntrack entries of the VIP that
		// had it; their backend references belong to that VIP, or are
		// held until those entries expired, so the dataplane re-picks
		// them rather than misdirect them.
		id = r.freeVIP[0]
		r.freeVIP = r.freeVIP[1:]
	default:
		return 0, fmt.Errorf("control: all 65535 VIP IDs are in use")
	}
	r.vipIDs[key] = id
	return id, nil
}

// Ref returns the reference of the backend with identity key, assigning
// one on first sight (see Bind).
func (r *Registry) Ref(key string) uint32 {
	ref, _ := r.Bind(key)
	return ref
}

// Bind returns the reference of the backend with identity key and the
// epoch of that binding. On first sight it gives the key its former
// reference if it has one on hold, else the reference released longest
// ago if its hold has passed, under a new epoch, else a new reference.
func (r *Registry) Bind(key string) (ref, epoch uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ref, ok := r.refs[key]; ok {
		return ref, r.epochs[ref]
	}
	if h, ok := r.held[key]; ok {
		delete(r.held, key)
		r.refs[key] = h.ref
		return h.ref, r.epochs[h.ref]
	}
	now := r.now()
	for len(r.free) > 0 {
		f := r.free[0]
		if h, ok := r.held[f.key]; !ok || h.seq != f.seq {
			r.free = r.free[1:] // taken back by its own key since
			continue
		}
		if now.Sub(f.at) < r.hold {
			break
		}
		r.free = r.free[1:]
		delete(r.held, f.key)
		r.epochs[f.ref]++
		r.refs[key] = f.ref
		return f.ref, r.epochs[f.ref]
	}
	ref = r.nextRef
	r.nextRef++
	r.epochs[ref] = 1
	r.refs[key] = ref
	return ref, 1
}

// Forget drops the identities that are not in keep. A VIP that comes back
// after being removed gets a fresh ID; a backend's reference is held (see
// Registry). The caller calls it once the snapshot without them is
// published.
func (r *Registry) Forget(keepVIPs, keepBackends map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, id := range r.vipIDs {
		if !keepVIPs[k] {
			delete(r.vipIDs, k)
			r.freeVIP = append(r.freeVIP, id)
		}
	}
	now := r.now()
	for k, ref := range r.refs {
		if !keepBackends[k] {
			delete(r.refs, k)
			r.seq++
			h := release{k, ref, now, r.seq}
			r.held[k] = h
			r.free = append(r.free, h)
		}
	}
}

// Refs returns how many references have been handed out: the size of the
// arrays indexed by reference, less one.
func (r *Registry) Refs() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return int(r.nextRef) - 1
}
