package dataplane

import (
	"net/netip"

	"github.com/vipd/vipd/hashing"
)

// Where answers "where would this flow go?" without a packet (Katran's
// getRealForFlow): the backend reference Maglev picks for a new flow from
// client to the VIP (address, protocol, port) — the same hash the pipeline
// computes. A flow already pinned in a worker's connection table keeps its
// backend even if Maglev would now choose another. ok is false when no VIP
// matches or it has no backend up.
func (s *Snapshot) Where(vip netip.Addr, proto uint8, vport uint16, client netip.AddrPort) (uint32, bool) {
	vi, h := s.whereHash(vip, proto, vport, client)
	if vi < 0 {
		return 0, false
	}
	v := &s.vips[vi]
	i := v.table.Lookup(h)
	if i < 0 {
		return 0, false
	}
	return v.refs[i], true
}

// whereHash finds the VIP of a flow from client and the hash its backend
// is picked by.
func (s *Snapshot) whereHash(vip netip.Addr, proto uint8, vport uint16, client netip.AddrPort) (int32, uint64) {
	vi := int32(empty)
	var h uint64
	c := client.Addr()
	if vip.Is4() && c.Is4() {
		va, ca := u32(vip.As4()), u32(c.As4())
		if vi = s.cls4.exact4.get(key4(va, proto, vport)); vi < 0 {
			vi = s.cls4.exact4.get(key4(va, proto, 0))
		}
		h = hashing.Flow4(ca, va, client.Port(), vport, proto, s.seed)
		if vi >= 0 && s.vips[vi].srcHash {
			h = hashing.Src4(ca, s.seed)
		}
	} else if vip.Is6() && c.Is6() {
		va, ca := vip.As16(), c.As16()
		if vi = s.cls6.exact6.get(mkKey6(&va, proto, vport)); vi < 0 {
			vi = s.cls6.exact6.get(mkKey6(&va, proto, 0))
		}
		h = hashing.Flow6(&ca, &va, client.Port(), vport, proto, s.seed)
		if vi >= 0 && s.vips[vi].srcHash {
			h = hashing.Src6(&ca, s.seed)
		}
	}
	return vi, h
}

// WherePrevious is Where for the VIP's previous table (VIPSpec.Previous):
// the address its previous set gives a flow from client, if it has one.
func (s *Snapshot) WherePrevious(vip netip.Addr, proto uint8, vport uint16, client netip.AddrPort) (netip.Addr, bool) {
	vi, h := s.whereHash(vip, proto, vport, client)
	if vi < 0 || s.vips[vi].prev == nil {
		return netip.Addr{}, false
	}
	v := &s.vips[vi]
	i := v.prev.Lookup(h)
	switch {
	case i < 0:
		return netip.Addr{}, false
	case v.v6:
		return netip.AddrFrom16(v.prevAddr6[i]), true
	}
	return netip.AddrFrom4(v.prevAddr4[i]), true
}
