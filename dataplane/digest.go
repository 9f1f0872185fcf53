package dataplane

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
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
			// Each backend's bytes once, then the slots in large writes:
			// a table has 65,537 slots and a handful of backends.
			enc := make([][]byte, len(v.refs))
			for idx := range v.refs {
				enc[idx] = s.slotBytes(v, idx)
			}
			w := make([]byte, 0, 8192)
			for slot := range n {
				idx := v.table.At(slot)
				if idx >= 0 && idx < len(enc) {
					w = append(w, enc[idx]...)
				} else {
					w = append(w, 0)
				}
				if len(w) > 8192-32 {
					h.Write(w)
					w = w[:0]
				}
			}
			h.Write(w)
		}
		out[v.name] = hex.EncodeToString(h.Sum(nil))
	}
	return out
}

// slotBytes is what a slot holding the backend at Maglev index idx of v
// adds to the digest: its address and port (netip.AddrPort's binary
// form) after their length; a zero byte when idx names no backend.
func (s *Snapshot) slotBytes(v *vip, idx int) []byte {
	if idx < 0 || idx >= len(v.refs) || int(v.refs[idx]) >= len(s.backends) {
		return []byte{0}
	}
	b := &s.backends[v.refs[idx]]
	ap := netip.AddrPortFrom(netip.AddrFrom4(b.addr4), b.port)
	if b.addr6 != ([16]byte{}) {
		ap = netip.AddrPortFrom(netip.AddrFrom16(b.addr6), b.port)
	}
	bs, _ := ap.MarshalBinary()
	return append([]byte{byte(len(bs))}, bs...)
}
