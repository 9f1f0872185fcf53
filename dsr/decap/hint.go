package decap

import (
	"encoding/binary"
	"net/netip"

	"github.com/vipd/vipd/dsr"
	"github.com/vipd/vipd/packet"
)

// A previous-owner hint travels in a GUE variant 0 header
// (draft-ietf-intarea-gue, section 3) whose optional data holds no
// flag-indicated fields, only "private data" in vipd's format:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|0|0|C|  Hlen   |  Proto/ctype  |             Flags             |  GUE header
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   0x76 'v'    |   0x70 'p'    |   kind = 1    |  hint flags   |  private data,
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+  Hlen words
//	|   previous owner: 4 bytes (inner IPv4) or 16 bytes (IPv6)     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   the inner IP packet ...
//
// C is 0 (a data message); Proto/ctype is 4 for an inner IPv4 packet, 41
// for IPv6; Flags is 0 (no extension fields); Hlen is the length of the
// private data in 32-bit words: 2 with an IPv4 owner, 5 with IPv6. The
// owner's family is the inner packet's. Of the hint flags only
// HintChained is defined; a hint with any other bit set is refused.
//
// The encoder is vipd's, package dsr (GUEHint4, GUEHint6); the
// constants of the format are its, used here (TestHintFromEncap runs its
// packets through this parser).
const (
	gueVariant0   = 0
	gueHeaderLen  = 4    // the fixed GUE header, before the optional data
	gueCBit       = 0x20 // in byte 0: a control message
	gueHlenMask   = 0x1f // in byte 0: the optional data's length in words
	gueProtoIPv4  = packet.ProtoIPIP
	gueProtoIPv6  = packet.ProtoIPv6
	hintKindOwner = dsr.HintKindPrevious
	hintFlagsOff  = 3 // offset of the hint flags in the private data
	hintAddrOff   = 4 // offset of the previous owner's address
	hintLen4      = 4 * dsr.HintWords4
	hintLen6      = 4 * dsr.HintWords6

	// HintChained in the hint flags marks a packet that a backend has
	// already re-encapsulated to the previous owner: it is delivered
	// where it arrives and never chained again.
	HintChained = dsr.HintChained
)

// hint is what stripGUE found in a GUE variant 0 header: the previous
// owner of the flow (the zero Addr when the datagram carried no hint, as
// in variant 1) and whether a backend chained it already.
type hint struct {
	prev    netip.Addr
	chained bool
}

func (h hint) present() bool { return h.prev.IsValid() }

// noDrop is parseHint's "no drop" result.
const noDrop = NumReasons

// parseHint checks payload, a GUE datagram whose first two bits are 00,
// as vipd's previous-owner hint and returns the hint and the length of
// the GUE header and private data, the offset of the inner packet. A
// header that is not exactly vipd's (a control message, flags, an unknown
// Proto/ctype, the wrong Hlen for it, a truncated datagram, an inner
// packet of another version) is DropGUEHeader; private data that is not
// a previous-owner hint of vipd's (magic, kind, unknown hint flags, an
// owner address that cannot be a backend) is DropHint. It does not
// allocate.
func parseHint(payload []byte) (h hint, n int, r Reason) {
	if len(payload) < gueHeaderLen || payload[0]&gueCBit != 0 || binary.BigEndian.Uint16(payload[2:]) != 0 {
		return h, 0, DropGUEHeader
	}
	hlen := int(payload[0]&gueHlenMask) * 4
	var version byte
	switch {
	case payload[1] == gueProtoIPv4 && hlen == hintLen4:
		version = 4
	case payload[1] == gueProtoIPv6 && hlen == hintLen6:
		version = 6
	default:
		return h, 0, DropGUEHeader
	}
	n = gueHeaderLen + hlen
	if len(payload) <= n || payload[n]>>4 != version {
		return h, 0, DropGUEHeader
	}
	priv := payload[gueHeaderLen:n]
	if binary.BigEndian.Uint16(priv) != dsr.HintMagic || priv[2] != hintKindOwner || priv[hintFlagsOff]&^HintChained != 0 {
		return h, 0, DropHint
	}
	if version == 4 {
		h.prev = netip.AddrFrom4([4]byte(priv[hintAddrOff:]))
	} else {
		h.prev = netip.AddrFrom16([16]byte(priv[hintAddrOff:]))
	}
	if !h.prev.IsGlobalUnicast() || h.prev.Is4In6() {
		// Unspecified, loopback, multicast, link-local, broadcast, or an
		// IPv4 address in IPv6 clothing: not a backend a packet can be
		// chained to over this family.
		return hint{}, 0, DropHint
	}
	h.chained = priv[hintFlagsOff]&HintChained != 0
	return h, n, noDrop
}

// setChained sets HintChained in payload, a datagram parseHint accepted.
func setChained(payload []byte) { payload[gueHeaderLen+hintFlagsOff] |= HintChained }

// flowKey is a flow as this host's sockets see it: the inner packet's
// destination is the local end, its source the remote one.
type flowKey struct {
	proto         uint8
	local, remote netip.AddrPort
}

// flowOf returns the flow of inner, an inner packet inner4 or inner6
// accepted, and whether it is a connection start (TCP SYN without ACK).
// ok is false when the packet has no ports to look up: neither TCP nor
// UDP, a fragment, IPv6 extension headers, or a truncated transport
// header. It does not allocate.
func flowOf(inner []byte) (k flowKey, syn, ok bool) {
	var l4 []byte
	var src, dst netip.Addr
	switch inner[0] >> 4 {
	case 4:
		in := packet.IPv4(inner)
		if in.IsFragment() {
			return k, false, false
		}
		k.proto = in.Protocol()
		src, dst = netip.AddrFrom4(in.SourceAddress()), netip.AddrFrom4(in.DestinationAddress())
		l4 = inner[in.HeaderLength():]
	case 6:
		in := packet.IPv6(inner)
		k.proto = in.NextHeader()
		src, dst = netip.AddrFrom16(*in.SourceAddress()), netip.AddrFrom16(*in.DestinationAddress())
		l4 = inner[packet.IPv6Size:]
	default:
		return k, false, false
	}
	switch {
	case k.proto == packet.ProtoTCP && len(l4) >= packet.TCPMinSize:
		const flagsOff, synFlag, ackFlag = 13, 0x02, 0x10
		syn = l4[flagsOff]&(synFlag|ackFlag) == synFlag
	case k.proto == packet.ProtoUDP && len(l4) >= packet.UDPSize:
	default:
		return k, false, false
	}
	k.remote = netip.AddrPortFrom(src, binary.BigEndian.Uint16(l4[0:]))
	k.local = netip.AddrPortFrom(dst, binary.BigEndian.Uint16(l4[2:]))
	return k, syn, true
}
