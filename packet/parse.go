package packet

import (
	"encoding/binary"
	"errors"
)

// Errors returned by Parse and the Validate methods. They are fixed values,
// so a caller can count drops by reason by comparing with ==, with no
// allocation.
var (
	// ErrTruncated: a header runs past the end of the captured bytes.
	ErrTruncated = errors.New("packet: truncated header")
	// ErrBadVersion: the IP version field does not match the EtherType.
	ErrBadVersion = errors.New("packet: bad IP version")
	// ErrBadIHL: an IPv4 header length below 20 bytes.
	ErrBadIHL = errors.New("packet: bad IPv4 header length")
	// ErrBadLength: an IP length field smaller than the header or larger
	// than the captured bytes.
	ErrBadLength = errors.New("packet: bad IP length")
	// ErrTooManyExtHeaders: more than MaxIPv6ExtHeaders extension headers.
	ErrTooManyExtHeaders = errors.New("packet: too many IPv6 extension headers")
	// ErrBadExtHeader: an extension header where RFC 8200 forbids it.
	ErrBadExtHeader = errors.New("packet: misplaced IPv6 extension header")
	// ErrBadFragment: an IPv4 TCP fragment at offset 8, which can rewrite
	// the TCP flags of the first one (RFC 1858 §4).
	ErrBadFragment = errors.New("packet: bad fragment")
	// ErrBadTCPOffset: a TCP data offset below 20 or past the segment.
	ErrBadTCPOffset = errors.New("packet: bad TCP data offset")
	// ErrBadUDPLength: a UDP length below 8 or past the IP payload.
	ErrBadUDPLength = errors.New("packet: bad UDP length")
	// ErrUDPZeroChecksum: UDP over IPv6 without a checksum (RFC 8200 §8.1).
	ErrUDPZeroChecksum = errors.New("packet: zero UDP checksum over IPv6")
)

// Frame is what Parse learns about one Ethernet frame: where the headers
// are and what they are. It is meant to live on the caller's stack and be
// refilled for every frame. Offsets are from the start of the frame.
type Frame struct {
	// L3Off is where the network header starts: 14, or 18 with a tag.
	L3Off int
	// L4Off is where the upper-layer header starts (after IPv4 options
	// and IPv6 extension headers). In a non-first fragment it is where the
	// fragment's data starts, and no header is there.
	L4Off int
	// L3Len is the IP packet length: IPv4 Total Length, or 40 + IPv6
	// Payload Length. L3Off+L3Len <= len(frame); bytes after it are
	// Ethernet padding and belong to no view.
	L3Len int
	// EtherType is the type after an optional 802.1Q tag. For types other
	// than IPv4 and IPv6 only L3Off and VLAN are set besides.
	EtherType uint16
	// VLAN reports an 802.1Q tag, passed through untouched.
	VLAN bool
	// Proto is the upper-layer protocol: the IPv4 Protocol, or the first
	// IPv6 Next Header that is not an extension header this package skips
	// (see IPv6.ExtHeaders).
	Proto uint8
	// Frag reports an IP fragment (IPv4: MF or an offset; IPv6: a
	// Fragment header with M or an offset).
	Frag bool
	// FirstFrag reports a fragment at offset 0, the one that carries the
	// upper-layer header. It implies Frag.
	FirstFrag bool
	// FragHdrOff is the offset of the IPv6 Fragment header, or 0 if there
	// is none (it is present, with Frag false, in an atomic fragment).
	FragHdrOff int
	// HasL4 reports that a TCP, UDP, ICMPv4 (over IPv4) or ICMPv6 (over
	// IPv6) header at L4Off passed its checks, so the view Frame.TCP (...)
	// returns may be used. It is false for non-first fragments and for
	// other protocols.
	HasL4 bool
	// Routed reports a source route with addresses left: an IPv6 Routing
	// header with Segments Left not 0 (IPv6ExtHeaders.Routed), or an IPv4
	// loose or strict source route option whose pointer is not past its
	// end (RFC 791 §3.1). The destination address is then not the
	// packet's last, and translating it would break the upper-layer
	// checksum, which covers the last.
	Routed bool
}

// Parse fills f from frame, an Ethernet frame without FCS. It does no
// allocation and keeps no reference to frame.
//
// For IPv4 and IPv6 it checks everything the views need: each header is
// whole, lengths agree with one another and with the captured bytes, the
// IPv6 extension chain is well formed and short, a TCP data offset is
// within the segment, a UDP length is within the payload (of an unfragmented
// datagram), an ICMP message has its 8-byte header. After a nil error every
// accessor of the views Frame returns is in bounds. It does not verify
// checksums.
//
// Other EtherTypes (ARP, LLDP, a second VLAN tag, ...) are not errors: Parse
// returns nil with EtherType and L3Off set, for the caller to hand them on.
func Parse(frame []byte, f *Frame) error {
	if ParseCommon(frame, f) {
		return nil
	}
	return parseGeneral(frame, f)
}

// parseGeneral is Parse for every frame.
func parseGeneral(frame []byte, f *Frame) error {
	*f = Frame{}
	if len(frame) < EthernetSize {
		return ErrTruncated
	}
	et := binary.BigEndian.Uint16(frame[ethType:])
	off := EthernetSize
	if et == EtherTypeVLAN {
		if len(frame) < EthernetSize+VLANTagSize {
			return ErrTruncated
		}
		et = binary.BigEndian.Uint16(frame[ethVLANTyp:])
		off += VLANTagSize
		f.VLAN = true
	}
	f.EtherType = et
	f.L3Off = off
	switch et {
	case EtherTypeIPv4:
		return parseIPv4(frame, f)
	case EtherTypeIPv6:
		return parseIPv6(frame, f)
	}
	return nil
}

// ParseCommon is Parse for the frame a load balancer sees most: untagged
// IPv4 without options, not a fragment, carrying a TCP or UDP header that
// passes Parse's checks. It fills f exactly as the general path would and
// reports true, or reports false, leaving f to the general path, for every
// other frame. One function with one store of f, where the general path
// makes four calls (TestParseCommonAgrees holds them equal).
func ParseCommon(frame []byte, f *Frame) bool {
	if len(frame) < EthernetSize+IPv4MinSize || binary.BigEndian.Uint16(frame[ethType:]) != EtherTypeIPv4 {
		return false
	}
	ip := frame[EthernetSize:]
	tl := int(binary.BigEndian.Uint16(ip[ipv4TotalLen:]))
	if ip[ipv4VersIHL] != 0x45 || tl > len(ip) || tl < IPv4MinSize ||
		binary.BigEndian.Uint16(ip[ipv4FlagsFrag:])&(ipv4FlagMF|ipv4FragOffMask) != 0 {
		return false
	}
	l4 := ip[IPv4MinSize:tl]
	switch proto := ip[ipv4Protocol]; proto {
	case ProtoTCP:
		if len(l4) < TCPMinSize {
			return false
		}
		if do := int(l4[tcpDataOff]>>4) * 4; do < TCPMinSize || do > len(l4) {
			return false
		}
	case ProtoUDP:
		if len(l4) < UDPSize {
			return false
		}
		if l := int(binary.BigEndian.Uint16(l4[4:])); l < UDPSize || l > len(l4) {
			return false
		}
	default:
		return false
	}
	// Field by field, not *f = Frame{...}: the compiler builds a literal
	// with variable fields on the stack and copies it in 16-byte moves,
	// whose loads then wait for the narrower stores of those fields to
	// reach the cache (a failed store-to-load forward, ~60% of this
	// function's time in perf).
	f.L3Off, f.L4Off, f.L3Len = EthernetSize, EthernetSize+IPv4MinSize, tl
	f.EtherType, f.VLAN, f.Proto = EtherTypeIPv4, false, ip[ipv4Protocol]
	f.Frag, f.FirstFrag, f.FragHdrOff, f.HasL4, f.Routed = false, false, 0, true, false
	return true
}

// IPv4 option types (RFC 791 §3.1) that sourceRouted4 reads.
const (
	ipv4OptEnd  = 0
	ipv4OptNOP  = 1
	ipv4OptLSRR = 131
	ipv4OptSSRR = 137
)

// sourceRouted4 reports whether the IPv4 options opts hold a loose or
// strict source route with an address left: its pointer (the 1-based
// offset of the next address in the option) not past the option's end. A
// malformed option ends the walk: the options are not checked otherwise,
// and a router would pass such a packet on.
func sourceRouted4(opts []byte) bool {
	for i := 0; i < len(opts); {
		t := opts[i]
		switch t {
		case ipv4OptEnd:
			return false
		case ipv4OptNOP:
			i++
			continue
		}
		if i+1 >= len(opts) {
			return false
		}
		l := int(opts[i+1])
		if l < 2 || i+l > len(opts) {
			return false
		}
		if (t == ipv4OptLSRR || t == ipv4OptSSRR) && l >= 3 && int(opts[i+2]) <= l {
			return true
		}
		i += l
	}
	return false
}

func parseIPv4(frame []byte, f *Frame) error {
	ip := IPv4(frame[f.L3Off:])
	hl, tl, err := ip.check()
	if err != nil {
		return err
	}
	f.L3Len = tl
	f.L4Off = f.L3Off + hl
	f.Proto = ip[ipv4Protocol]
	f.Routed = hl > IPv4MinSize && sourceRouted4(ip[IPv4MinSize:hl])
	ff := binary.BigEndian.Uint16(ip[ipv4FlagsFrag:])
	fo := ff & ipv4FragOffMask
	f.Frag = ff&(ipv4FlagMF|ipv4FragOffMask) != 0
	f.FirstFrag = f.Frag && fo == 0
	if fo != 0 {
		// Offset 1 is 8 bytes: such a fragment can overwrite the TCP
		// flags of the first one (RFC 1858 §4).
		if fo == 1 && f.Proto == ProtoTCP {
			return ErrBadFragment
		}
		return nil
	}
	return parseL4(frame[f.L4Off:f.L3Off+tl], f, ProtoICMPv4, false)
}

func parseIPv6(frame []byte, f *Frame) error {
	ip := IPv6(frame[f.L3Off:])
	if err := ip.Validate(); err != nil {
		return err
	}
	f.L3Len = IPv6Size + int(ip.PayloadLength())
	var x IPv6ExtHeaders
	if err := ip[:f.L3Len].ExtHeaders(&x); err != nil {
		return err
	}
	f.Proto = x.Proto
	f.L4Off = f.L3Off + x.Off
	f.Frag = x.Frag
	f.FirstFrag = x.Frag && x.FragOff == 0
	f.Routed = x.Routed
	if x.FragHdrOff != 0 {
		f.FragHdrOff = f.L3Off + x.FragHdrOff
	}
	if x.FragOff != 0 {
		return nil
	}
	return parseL4(frame[f.L4Off:f.L3Off+f.L3Len], f, ProtoICMPv6, true)
}

// parseL4 checks the upper-layer header in l4, which runs to the end of the
// IP packet. icmp is the ICMP protocol number of the IP family.
func parseL4(l4 []byte, f *Frame, icmp uint8, v6 bool) error {
	switch f.Proto {
	case ProtoTCP:
		if err := TCP(l4).Validate(); err != nil {
			return err
		}
	case ProtoUDP:
		u := UDP(l4)
		if err := u.Validate(f.Frag); err != nil {
			return err
		}
		if v6 && u.Checksum() == 0 {
			return ErrUDPZeroChecksum
		}
	case icmp:
		if len(l4) < ICMPSize {
			return ErrTruncated
		}
	default:
		return nil
	}
	f.HasL4 = true
	return nil
}

// The methods below cut views out of the frame Parse was given. Call them
// only after Parse returned nil, and those for an upper-layer header only
// when HasL4 is set and Proto matches.

// Ethernet returns the Ethernet header view.
func (f *Frame) Ethernet(frame []byte) Ethernet { return Ethernet(frame[:f.L3Off]) }

// L3 returns the IP packet, without Ethernet padding.
func (f *Frame) L3(frame []byte) []byte { return frame[f.L3Off : f.L3Off+f.L3Len] }

// L4 returns the IP payload from L4Off on: the upper-layer packet, or a
// non-first fragment's data.
func (f *Frame) L4(frame []byte) []byte { return frame[f.L4Off : f.L3Off+f.L3Len] }

// IPv4 returns the IPv4 view, cut at Total Length.
func (f *Frame) IPv4(frame []byte) IPv4 { return IPv4(f.L3(frame)) }

// IPv6 returns the IPv6 view, cut at 40 + Payload Length.
func (f *Frame) IPv6(frame []byte) IPv6 { return IPv6(f.L3(frame)) }

// TCP returns the TCP view.
func (f *Frame) TCP(frame []byte) TCP { return TCP(f.L4(frame)) }

// UDP returns the UDP view.
func (f *Frame) UDP(frame []byte) UDP { return UDP(f.L4(frame)) }

// ICMPv4 returns the ICMPv4 view.
func (f *Frame) ICMPv4(frame []byte) ICMPv4 { return ICMPv4(f.L4(frame)) }

// ICMPv6 returns the ICMPv6 view.
func (f *Frame) ICMPv6(frame []byte) ICMPv6 { return ICMPv6(f.L4(frame)) }

// IPv6Fragment returns the IPv6 Fragment header view; call it only when
// FragHdrOff is not 0.
func (f *Frame) IPv6Fragment(frame []byte) IPv6Fragment {
	return IPv6Fragment(frame[f.FragHdrOff : f.FragHdrOff+IPv6FragmentSize])
}
