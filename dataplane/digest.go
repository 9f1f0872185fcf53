package dataplane

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"net/netip"
)

// TableDigests returns, by VIP name, a digest (sha256, hex) of what
// decides a new flow's backend on a miss: the flow-hash seed, whether the
// VIP hashes the source alone, and its Maglev table slot by slot, each
// slot as its backend's address and port. Two boxes whose digests agree
// place every new flow of the VIP on the same backend; backend
// references, which each box numbers itself, do not enter it. For the
// fleet's status, not the packet path.
func (s *Snapshot) TableDigests() map[string]string {
	out := make(map[string]string, len(s.vips))
	var buf [8]byte
	for i := range s.vips {
		v := &s.vips[i]
		h := sha256.New()
		binary.BigEndian.PutUint64(buf[:], s.seed)
		h.Write(buf[:])
		if v.srcHash {
			h.Write([]byte{1})
		} else {
			h.Write([]byte{0})
		}
		if v.table != nil {
			n := v.table.Size()
			binary.BigEndian.PutUint32(buf[:4], n)
			h.Write(buf[:4])
			for slot := range n {
				s.digestSlot(h, v, v.table.At(slot))
			}
		}
		out[v.name] = hex.EncodeToString(h.Sum(nil))
	}
	return out
}

// digestSlot writes the backend at Maglev index idx of v into h, as its
// address and port; an empty slot (a table of no backends) as a zero
// byte.
func (s *Snapshot) digestSlot(h hash.Hash, v *vip, idx int) {
	if idx < 0 || idx >= len(v.refs) || int(v.refs[idx]) >= len(s.backends) {
		h.Write([]byte{0})
		return
	}
	b := &s.backends[v.refs[idx]]
	ap := netip.AddrPortFrom(netip.AddrFrom4(b.addr4), b.port)
	if b.addr6 != ([16]byte{}) {
		ap = netip.AddrPortFrom(netip.AddrFrom16(b.addr6), b.port)
	}
	bs, _ := ap.MarshalBinary()
	h.Write([]byte{byte(len(bs))})
	h.Write(bs)
}
