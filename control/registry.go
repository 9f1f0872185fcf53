package control

import (
	"fmt"
	"net/netip"
	"sync"

	"github.com/vipd/vipd/config"
)

// Registry assigns stable VIP IDs and backend references. It is safe for
// concurrent use.
type Registry struct {
	mu      sync.Mutex
	vipIDs  map[string]uint16
	nextVIP uint32
	freeVIP []uint16 // released by Forget, reused once nextVIP is exhausted
	refs    map[string]uint32
	nextRef uint32
}

// NewRegistry returns an empty registry. IDs and references start at 1 so
// that 0 never names anything.
func NewRegistry() *Registry {
	return &Registry{vipIDs: map[string]uint16{}, refs: map[string]uint32{}, nextVIP: 1, nextRef: 1}
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
		// had it; their backend references belong to that VIP, so the
		// dataplane re-picks them rather than misdirect them.
		id = r.freeVIP[0]
		r.freeVIP = r.freeVIP[1:]
	default:
		return 0, fmt.Errorf("control: all 65535 VIP IDs are in use")
	}
	r.vipIDs[key] = id
	return id, nil
}

// Ref returns the reference of the backend with identity key, assigning a
// new one on first sight.
func (r *Registry) Ref(key string) uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ref, ok := r.refs[key]; ok {
		return ref
	}
	ref := r.nextRef
	r.nextRef++
	r.refs[key] = ref
	return ref
}

// Forget drops the identities that are not in keep, so that a VIP that
// comes back after being removed gets fresh state. References are not
// reused either way.
func (r *Registry) Forget(keepVIPs, keepBackends map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, id := range r.vipIDs {
		if !keepVIPs[k] {
			delete(r.vipIDs, k)
			r.freeVIP = append(r.freeVIP, id)
		}
	}
	for k := range r.refs {
		if !keepBackends[k] {
			delete(r.refs, k)
		}
	}
}
