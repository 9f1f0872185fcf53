package dsr

import (
	"encoding/binary"

	"github.com/vipd/vipd/packet"
)

// Previous-owner hints, so that a change of the Maglev table does not
// reset connections that move. A packet that reaches vipd mid-flow with
// no connection-table entry, when its VIP's Maglev table changed lately
// and the table from before the change picks another backend, goes to
// the current owner with the previous owner's address attached, so that
// the backend's agent (vipd-decap) can hand it on when the connection
// is not its own. GUE variant 1 has no room for that; the hinted packet
// is sent in GUE variant 0 (draft-ietf-intarea-gue §3.1) with no
// extension fields and the hint as private data (§3.3.6: the optional
// bytes after the flag-indicated fields):
//
//	byte 0      00 (version 0) | C = 0 | Hlen: words of optional data,
//	            HintWords4 (IPv4 inner) or HintWords6 (IPv6 inner)
//	byte 1      Proto/ctype: 4 (IPv4 inner) or 41 (IPv6 inner)
//	bytes 2-3   flags 0
//	bytes 4-5   HintMagic ("vp")
//	byte 6      HintKindPrevious
//	byte 7      flags: HintChained when a backend re-sent the packet to
//	            the previous owner (which then never sends it on again)
//	bytes 8-    the previous owner's address, of the inner family
//	            (4 or 16 bytes)
//
// then the inner packet, untouched.
const (
	HintMagic        = 0x7670 // "vp"
	HintKindPrevious = 1
	HintChained      = 0x01
	HintWords4       = 2 // 4 bytes of magic, kind, flags + an IPv4 address
	HintWords6       = 5 // + an IPv6 address
	// HintSize4 and HintSize6 are the GUE header and its private data.
	HintSize4 = 4 + 4*HintWords4
	HintSize6 = 4 + 4*HintWords6
	// OverheadHint4 and OverheadHint6 are what a hinted packet carries in
	// front of the inner one.
	OverheadHint4 = OverheadGUE4 + HintSize4
	OverheadHint6 = OverheadGUE6 + HintSize6
)

// GUEHint4 is GUE4 with a previous-owner hint: the IPv4 packet
// buf[at:at+n] is preceded by a GUE variant 0 header carrying prev (and
// flags, HintChained or 0), in the OverheadHint4 bytes before it. It
// returns the offset of the outer header.
func GUEHint4(buf []byte, at, n int, src, dst [4]byte, sport, dport uint16, prev [4]byte, flags uint8) int {
	g := buf[at-HintSize4 : at]
	putHint(g, HintWords4, packet.ProtoIPIP, flags)
	copy(g[8:12], prev[:])
	return gue4(buf, at, at-HintSize4, n+HintSize4, src, dst, sport, dport)
}

// GUEHint6 is GUE6 with a previous-owner hint, as GUEHint4.
func GUEHint6(buf []byte, at, n int, src, dst *[16]byte, flowLabel uint32, sport, dport uint16, prev *[16]byte, flags uint8) int {
	g := buf[at-HintSize6 : at]
	putHint(g, HintWords6, packet.ProtoIPv6, flags)
	copy(g[8:24], prev[:])
	return gue6(buf, at, at-HintSize6, n+HintSize6, src, dst, flowLabel, sport, dport)
}

func putHint(g []byte, words int, proto uint8, flags uint8) {
	g[0] = uint8(words) // version 0, C 0
	g[1] = proto
	g[2], g[3] = 0, 0
	binary.BigEndian.PutUint16(g[4:], HintMagic)
	g[6] = HintKindPrevious
	g[7] = flags
}
