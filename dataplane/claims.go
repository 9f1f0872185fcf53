package dataplane

import (
	"encoding/binary"

	"github.com/vipd/vipd/packet"
)

// The steering rule decides which frames are vipd's: with AF_XDP, the XDP
// program (package xdpprog) redirects exactly those to vipd's sockets and
// passes the rest to the kernel; with AF_PACKET, the pipeline gives the rest
// the kernel verdict. The rule is written twice, in BPF assembly and in Go
// (Claims, below); a differential test runs one corpus through both and
// through Worker.Process, and FuzzProcess checks that Process gives the
// kernel verdict exactly to the frames Claims rejects. The values both
// sides compare against come from package packet.
//
// The rule reads only the raw frame, up to its last byte (not IP Total
// Length: the XDP program cannot trust it before the pipeline checked it),
// and nothing past the headers a BPF program can parse cheaply:
//
//  1. Ethernet with at most one 802.1Q tag; anything but IPv4 and IPv6
//     is not vipd's.
//  2. IPv4: version 4, IHL >= 5, 20 bytes present. IPv6: version 6, 40
//     bytes present, neither address IPv4-mapped; an ICMPv6 neighbour
//     discovery message directly after the fixed header is not vipd's,
//     whatever its destination (vipd answers NDP for its VIPs from an
//     AF_PACKET socket, which sees only what XDP passes).
//  3. Destination a VIP address: vipd's, every protocol and port (the
//     pipeline drops and counts what no VIP serves).
//  4. Destination one of the box's own addresses: the kernel's.
//  5. A NAT reply: vipd's. It is one of
//     - TCP or UDP, not a fragment or a first fragment (IPv4 offset 0;
//     IPv6 offset 0 with a Fragment header directly after the fixed
//     header), with 4 bytes of transport header present, whose (source,
//     protocol, source port) or (source, protocol, 0) is a reply key;
//     - a TCP or UDP non-first fragment (IPv6: Fragment header directly
//     after the fixed header) whose (source, protocol) is a reply host;
//     - an ICMP error vipd relays (packet.ICMPv4FlowErrors, ICMPv6 1–4),
//     not itself fragmented (IPv6: directly after the fixed header),
//     quoting an IPv4 header (version 4, IHL >= 5, offset 0) or an IPv6
//     header (quoted next header TCP or UDP directly, destination not
//     IPv4-mapped) and 4 bytes of TCP or UDP, whose (quoted destination,
//     protocol, quoted destination port) or (..., 0) is a reply key.
//  6. Everything else is the kernel's.
//
// The pipeline checks much more once a frame is claimed (lengths,
// checksums, the whole quote); a claimed frame that fails is dropped and
// counted, never handed to the kernel.

// Claims reports whether the steering rule gives frame, an Ethernet frame,
// to vipd. It is the Go statement of the rule; Process runs an equivalent
// over the parsed frame, and this function only when Parse fails. It does
// not allocate.
func (s *Snapshot) Claims(frame []byte) bool {
	if len(frame) < packet.EthernetSize {
		return false
	}
	et := binary.BigEndian.Uint16(frame[12:])
	off := packet.EthernetSize
	if et == packet.EtherTypeVLAN {
		if len(frame) < packet.EthernetSize+packet.VLANTagSize {
			return false
		}
		et = binary.BigEndian.Uint16(frame[16:])
		off += packet.VLANTagSize
	}
	switch et {
	case packet.EtherTypeIPv4:
		return s.claims4(frame[off:])
	case packet.EtherTypeIPv6:
		return s.claims6(frame[off:])
	}
	return false
}

// replyKind says how a packet could be a NAT reply.
type replyKind uint8

const (
	replyNone  replyKind = iota // it cannot be one
	replyPorts                  // look up (address, protocol, port), then port 0
	replyHost                   // a non-first fragment: look up (address, protocol)
)

// claims4 is Claims for the IPv4 packet p, which runs to the end of the
// frame.
func (s *Snapshot) claims4(p []byte) bool {
	if len(p) < packet.IPv4MinSize || p[0]>>4 != 4 || p[0]&0x0f < 5 {
		return false
	}
	dst := binary.BigEndian.Uint32(p[16:])
	if s.cls4.addr4.get(key4(dst, 0, 0)) >= 0 {
		return true
	}
	var key uint64
	kind := replyNone
	ihl := int(p[0]&0x0f) * 4
	proto := p[9]
	fo := binary.BigEndian.Uint16(p[6:]) & 0x3fff // MF and the offset
	switch {
	case fo&0x1fff != 0: // a non-first fragment
		if proto == packet.ProtoTCP || proto == packet.ProtoUDP {
			key, kind = key4(binary.BigEndian.Uint32(p[12:]), proto, 0), replyHost
		}
	case proto == packet.ProtoICMPv4:
		if fo == 0 {
			key, kind = icmpReplyKey4(p, ihl)
		}
	case proto == packet.ProtoTCP || proto == packet.ProtoUDP:
		if len(p) >= ihl+4 {
			key, kind = key4(binary.BigEndian.Uint32(p[12:]), proto, binary.BigEndian.Uint16(p[ihl:])), replyPorts
		}
	}
	return s.isReply4(dst, key, kind)
}

// icmpReplyKey4 returns the reply key of an ICMPv4 error whose IPv4 header
// (ihl bytes) starts p, and replyPorts, if the rule can read one: a relayed
// type, a quoted IPv4 header, not a non-first fragment, of TCP or UDP, and
// its ports. The quote is read up to the end of p.
func icmpReplyKey4(p []byte, ihl int) (uint64, replyKind) {
	if len(p) < ihl+packet.ICMPSize+packet.IPv4MinSize || !packet.IsICMPv4FlowError(p[ihl]) {
		return 0, replyNone
	}
	q := p[ihl+packet.ICMPSize:]
	qihl := int(q[0]&0x0f) * 4
	if q[0]>>4 != 4 || qihl < packet.IPv4MinSize || binary.BigEndian.Uint16(q[6:])&0x1fff != 0 {
		return 0, replyNone
	}
	proto := q[9]
	if (proto != packet.ProtoTCP && proto != packet.ProtoUDP) || len(q) < qihl+4 {
		return 0, replyNone
	}
	return key4(binary.BigEndian.Uint32(q[16:]), proto, binary.BigEndian.Uint16(q[qihl+2:])), replyPorts
}

// isReply4 finishes the rule for an IPv4 packet to dst that is not for a
// VIP address: the box's own traffic is the kernel's, the rest is vipd's
// when key is a reply key (or host).
func (s *Snapshot) isReply4(dst uint32, key uint64, kind replyKind) bool {
	if kind == replyNone || s.isLocal4(dst) {
		return false
	}
	if kind == replyHost {
		return s.cls4.replyAddr4.get(key) != empty
	}
	return s.cls4.reply4.get(key) != empty || (key&0xffff != 0 && s.cls4.reply4.get(key&^0xffff) != empty)
}

// claims6 is Claims for the IPv6 packet p, which runs to the end of the
// frame.
func (s *Snapshot) claims6(p []byte) bool {
	if len(p) < packet.IPv6Size || p[0]>>4 != 6 || mapped(p[8:24]) || mapped(p[24:40]) {
		return false
	}
	var key key6
	kind := replyNone
	src := (*[16]byte)(p[8:24])
	switch nh := p[6]; nh {
	case packet.ProtoFragment:
		if len(p) < packet.IPv6Size+packet.IPv6FragmentSize {
			break
		}
		proto := p[packet.IPv6Size]
		if binary.BigEndian.Uint16(p[packet.IPv6Size+2:])&0xfff8 != 0 { // a non-first fragment
			if proto == packet.ProtoTCP || proto == packet.ProtoUDP {
				key, kind = mkKey6(src, proto, 0), replyHost
			}
			break
		}
		key, kind = portsKey6(p, src, proto, packet.IPv6Size+packet.IPv6FragmentSize)
	case packet.ProtoICMPv6:
		if len(p) > packet.IPv6Size {
			if t := p[packet.IPv6Size]; t >= packet.ICMPv6NDPFirst && t <= packet.ICMPv6NDPLast {
				return false
			}
		}
		key, kind = icmpReplyKey6(p)
	default:
		key, kind = portsKey6(p, src, nh, packet.IPv6Size)
	}
	dst := (*[16]byte)(p[24:40])
	if s.cls6.addr6.get(mkKey6(dst, 0, 0)) >= 0 {
		return true
	}
	return s.isReply6(dst, key, kind)
}

// portsKey6 returns the reply key of a TCP or UDP header at off in p.
func portsKey6(p []byte, src *[16]byte, proto uint8, off int) (key6, replyKind) {
	if (proto != packet.ProtoTCP && proto != packet.ProtoUDP) || len(p) < off+4 {
		return key6{}, replyNone
	}
	return mkKey6(src, proto, binary.BigEndian.Uint16(p[off:])), replyPorts
}

// icmpReplyKey6 is icmpReplyKey4 for the IPv6 packet p, whose next header
// is ICMPv6.
func icmpReplyKey6(p []byte) (key6, replyKind) {
	const q = packet.IPv6Size + packet.ICMPSize // the quoted header
	if len(p) < q+packet.IPv6Size || !packet.IsICMPv6FlowError(p[packet.IPv6Size]) {
		return key6{}, replyNone
	}
	proto := p[q+6]
	if (proto != packet.ProtoTCP && proto != packet.ProtoUDP) || mapped(p[q+24:q+40]) || len(p) < q+packet.IPv6Size+4 {
		return key6{}, replyNone
	}
	return mkKey6((*[16]byte)(p[q+24:q+40]), proto, binary.BigEndian.Uint16(p[q+packet.IPv6Size+2:])), replyPorts
}

// isReply6 is isReply4 for IPv6.
func (s *Snapshot) isReply6(dst *[16]byte, key key6, kind replyKind) bool {
	if kind == replyNone || s.isLocal6(dst) {
		return false
	}
	if kind == replyHost {
		return s.cls6.replyAddr6.get(key) != empty
	}
	if s.cls6.reply6.get(key) != empty {
		return true
	}
	if key.pp&0xffff == 0 {
		return false
	}
	key.pp &^= 0xffff
	return s.cls6.reply6.get(key) != empty
}

// mapped reports whether the 16 bytes of a are an IPv4-mapped IPv6 address
// (::ffff:0:0/96), which must not appear on the wire (RFC 4291 §2.5.5.2);
// the rule leaves such packets to the kernel.
func mapped(a []byte) bool {
	// Native-order loads compared with the swapped constant: ::ffff:0:0/96
	// is bytes 0-9 zero and bytes 10-11 0xff.
	return binary.LittleEndian.Uint64(a) == 0 && binary.LittleEndian.Uint32(a[8:]) == 0xffff0000
}
