package decap

import (
	"net/netip"

	"github.com/vipd/vipd/dsr"
)

// DefaultGUEPort is the UDP port vipd sends GUE to unless configured
// otherwise, the one Katran uses.
const DefaultGUEPort = dsr.DefaultGUEPort

// GUE variant 1 (draft-ietf-intarea-gue, section 4) carries an IP packet
// directly as the UDP payload, without a GUE header. The first two bits of
// the payload tell the variants apart, and in variant 1 they are the top
// of the inner IP version nibble:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|0|1|0|0|  IHL  | ...  the inner IPv4 header                    |   version 4
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|0|1|1|0| Traffic Class | ...  the inner IPv6 header            |   version 6
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// 00 is variant 0 (a GUE header follows), 10 and 11 are reserved.
const (
	gueVariantShift = 6 // the variant is payload[0] >> gueVariantShift
	gueVariant1     = 1
)

// stripGUE checks payload, the UDP payload of a GUE datagram sent from src
// to the GUE port, as a UDP socket returns it: the kernel has consumed the
// outer IP and UDP headers, verified the UDP checksum (when not zero) and
// reassembled fragments. It returns the inner packet (a subslice of
// payload) and the previous-owner hint of a variant 0 header (see
// parseHint; none for variant 1), or nil (and no meaningful hint) when it
// drops the datagram, counted by reason. payload may be modified (see
// completeChecksum).
//
// The outer source must be in the allowed sources; a source in the chain
// peers only is accepted for a packet whose hint says HintChained.
//
// The inner family must be the outer one (src's): vipd never sends 4-in-6
// or 6-in-4, though GUE allows both; the IPIP path refuses them too.
func (f *filter) stripGUE(payload []byte, src netip.Addr) ([]byte, hint) {
	allowed := f.sourceAllowed(src)
	if !allowed && !f.chainPeer(src) {
		return f.drop(DropSource), hint{}
	}
	if len(payload) == 0 {
		return f.drop(DropMalformed), hint{}
	}
	var h hint
	switch payload[0] >> gueVariantShift {
	case gueVariant1:
	case gueVariant0:
		var n int
		var r Reason
		if h, n, r = parseHint(payload); r != noDrop {
			return f.drop(r), hint{}
		}
		payload = payload[n:]
	default:
		return f.drop(DropGUEVariant), hint{}
	}
	if !allowed && !h.chained {
		return f.drop(DropSource), hint{}
	}
	switch v := payload[0] >> 4; {
	case v == 4 && src.Is4():
		return f.inner4(payload), h
	case v == 6 && src.Is6():
		return f.inner6(payload), h
	}
	return f.drop(DropInnerVersion), hint{}
}
