package packet

import "encoding/binary"

// IPv6 extension headers (RFC 8200 §4). Hop-by-Hop Options (§4.3), Routing
// (§4.4) and Destination Options (§4.6) share one layout, with a length in
// 8-byte units not counting the first 8 bytes:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Next Header  |  Hdr Ext Len  |                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+                               +
//	.              type-specific data, 6 + 8 × Hdr Ext Len bytes    .
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// The Fragment header (§4.5) is always 8 bytes; its offset counts 8-byte
// units:
//
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Next Header  |   Reserved    |      Fragment Offset    |Res|M|
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                         Identification                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
const (
	extNextHeader = 0
	extLen        = 1
	extUnit       = 8 // also the minimum length of any extension header

	routingSegmentsLeft = 3 // in a Routing header

	fragNextHeader = 0
	fragOffM       = 2
	fragID         = 4

	// IPv6FragmentSize is the length of the Fragment header.
	IPv6FragmentSize = 8

	// MaxIPv6ExtHeaders bounds the extension headers ExtHeaders walks
	// before it gives up with ErrTooManyExtHeaders, so a hostile chain
	// costs a bounded amount of work. RFC 8200 §4.1 recommends at most one
	// of each kind (two Destination Options), six in all with AH and ESP;
	// 8 leaves room.
	MaxIPv6ExtHeaders = 8
)

// IPv6Fragment is a view of an IPv6 Fragment header. It is 8 bytes; the
// caller checks the length (ExtHeaders does).
type IPv6Fragment []byte

// NextHeader returns the type of the first header of the fragmentable part.
func (f IPv6Fragment) NextHeader() uint8 { return f[fragNextHeader] }

// FragmentOffset returns the offset of this fragment's data in bytes (the
// field × 8).
func (f IPv6Fragment) FragmentOffset() uint16 {
	return binary.BigEndian.Uint16(f[fragOffM:]) &^ 0x7
}

// More reports whether the M (more fragments) flag is set.
func (f IPv6Fragment) More() bool { return f[fragOffM+1]&1 != 0 }

// Identification returns the 32-bit fragment identification.
func (f IPv6Fragment) Identification() uint32 { return binary.BigEndian.Uint32(f[fragID:]) }

// IPv6ExtHeaders is what ExtHeaders learns from the extension header chain.
// Offsets are from the start of the IPv6 header.
type IPv6ExtHeaders struct {
	// Proto is the upper-layer protocol, or, after the Fragment header of
	// a non-first fragment, the Next Header that header names (the rest is
	// not parsed: it continues the first fragment's data).
	Proto uint8
	// Off is where the Proto header starts; it may equal the packet length
	// (ProtoNoNext, or an empty non-first fragment).
	Off int
	// FragHdrOff is the offset of the Fragment header, or 0 if none.
	FragHdrOff int
	// Frag reports a real fragment: a nonzero offset or M set. An atomic
	// fragment (offset 0, M clear) is a whole packet (RFC 6946 §4).
	Frag bool
	// FragOff (in bytes), More and FragID are copied from the Fragment
	// header when there is one.
	FragOff uint16
	More    bool
	FragID  uint32
	// Routed reports a Routing header whose Segments Left is not 0: the
	// destination address is a waypoint, not the packet's last, and the
	// upper-layer checksum covers the last one (RFC 8200 §4.4, §8.1).
	Routed bool
}

// ExtHeaders walks the extension header chain of b, which must be valid
// and cut at 40 + Payload Length (as Frame.IPv6 does) because the walk stops
// at len(b). It skips Hop-by-Hop, Routing, Destination Options and Fragment
// headers and stops at anything else: AH, ESP and No Next Header are
// reported as Proto, not skipped, since what follows them is not a plain
// chain. It returns
//
//   - ErrTruncated if a header runs past len(b) (including a first
//     fragment too short to hold the chain, RFC 7112 §5);
//   - ErrTooManyExtHeaders after MaxIPv6ExtHeaders headers;
//   - ErrBadExtHeader for a Hop-by-Hop header not directly after the fixed
//     header (RFC 8200 §4.3) or a second Fragment header.
func (b IPv6) ExtHeaders(x *IPv6ExtHeaders) error {
	*x = IPv6ExtHeaders{}
	next := b[ipv6NextHeader]
	off := IPv6Size
	for n := 0; ; n++ {
		switch next {
		case ProtoHopByHop, ProtoRouting, ProtoDstOpts, ProtoFragment:
		default:
			x.Proto, x.Off = next, off
			return nil
		}
		if n == MaxIPv6ExtHeaders {
			return ErrTooManyExtHeaders
		}
		if off+extUnit > len(b) {
			return ErrTruncated
		}
		switch next {
		case ProtoHopByHop:
			if n != 0 {
				return ErrBadExtHeader
			}
		case ProtoRouting:
			x.Routed = x.Routed || b[off+routingSegmentsLeft] != 0
		case ProtoFragment:
			if x.FragHdrOff != 0 {
				return ErrBadExtHeader
			}
			f := IPv6Fragment(b[off : off+IPv6FragmentSize])
			x.FragHdrOff = off
			x.FragOff = f.FragmentOffset()
			x.More = f.More()
			x.FragID = f.Identification()
			x.Frag = x.FragOff != 0 || x.More
			next = f.NextHeader()
			off += IPv6FragmentSize
			if x.FragOff != 0 {
				x.Proto, x.Off = next, off
				return nil
			}
			continue
		}
		l := (int(b[off+extLen]) + 1) * extUnit
		if off+l > len(b) {
			return ErrTruncated
		}
		next = b[off+extNextHeader]
		off += l
	}
}
