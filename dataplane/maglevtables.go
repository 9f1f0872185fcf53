package dataplane

import (
	"net/netip"
	"slices"

	"github.com/vipd/vipd/hashing"
)

// maglevSpares bounds Snapshot.spares: each holds a table of TableSize
// two-byte entries (128 KiB at the default size).
const maglevSpares = 32

// maglevTable is a Maglev table with the inputs it was built from.
type maglevTable struct {
	vip     uint16 // the VIP ID it was built for
	size    uint32 // M
	members []member
	table   *hashing.Maglev
}

// member is a backend in a Maglev table: its ID is the address and port,
// and members are given to NewMaglev in this order.
type member struct {
	addr   netip.Addr
	port   uint16
	weight uint32
}

// tableFor returns the Maglev table of VIP id with size m over members:
// one prev holds (findTable), else a new one.
func (prev *Snapshot) tableFor(id uint16, m uint32, members []member) (*maglevTable, error) {
	if t := prev.findTable(id, m, members); t != nil {
		return t, nil
	}
	hm := make([]hashing.Backend, len(members))
	for k, mb := range members {
		hm[k] = hashing.Backend{ID: netip.AddrPortFrom(mb.addr, mb.port).String(), Weight: mb.weight}
	}
	t, err := hashing.NewMaglev(hm, m)
	if err != nil {
		return nil, err
	}
	return &maglevTable{vip: id, size: m, members: members, table: t}, nil
}

// findTable returns a table of prev (nil: none) built for VIP id with size
// m over exactly members — its current table, its previous one
// (VIPSpec.Previous), or a spare — or nil.
func (prev *Snapshot) findTable(id uint16, m uint32, members []member) *maglevTable {
	if prev == nil {
		return nil
	}
	match := func(t *maglevTable) bool {
		return t != nil && t.vip == id && t.size == m && slices.Equal(t.members, members)
	}
	if t := prev.tableOf(id); match(t) {
		return t
	}
	if i, ok := prev.byID[id]; ok && match(prev.build[i].prev) {
		return prev.build[i].prev
	}
	for _, t := range prev.spares {
		if match(t) {
			return t
		}
	}
	return nil
}

// tableOf returns the Maglev table of VIP id in prev, nil if none.
func (prev *Snapshot) tableOf(id uint16) *maglevTable {
	if prev == nil {
		return nil
	}
	if i, ok := prev.byID[id]; ok {
		return prev.build[i].table
	}
	return nil
}

// sparesFor returns the spare tables a snapshot built after prev starts
// with.
func (prev *Snapshot) sparesFor(*Spec) []*maglevTable {
	if prev == nil {
		return nil
	}
	return prev.spares
}

// addSpare returns spares with t in front, at most maglevSpares long. It
// never modifies spares, which an older snapshot may share.
func addSpare(spares []*maglevTable, t *maglevTable) []*maglevTable {
	out := make([]*maglevTable, 0, maglevSpares)
	out = append(out, t)
	for _, o := range spares {
		if len(out) == maglevSpares {
			break
		}
		if o != t {
			out = append(out, o)
		}
	}
	return out
}
