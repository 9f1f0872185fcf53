package tunprobe

import (
	"encoding/binary"
	"net/netip"

	"github.com/vipd/vipd/dsr"
	"github.com/vipd/vipd/packet"
)

// Encap is the encapsulation of a Path, as dataplane.Encap.
type Encap uint8

const (
	// IPIP is IPv4 in IPv4 (protocol 4) or IPv6 in IPv6 (next header 41):
	// dsr.Encap4, dsr.Encap6.
	IPIP Encap = iota
	// GUE is GUE variant 1, the IP packet in UDP: dsr.GUE4, dsr.GUE6.
	GUE
)

// String returns the configuration name of e.
func (e Encap) String() string {
	if e == GUE {
		return "gue"
	}
	return "ipip"
}

// Path is how probe packets reach one backend: what the data plane would
// send that backend's share of a DSR VIP's flows through. It is
// comparable, so a health target holding one stays comparable.
type Path struct {
	// Backend is the outer destination: the backend's own address.
	Backend netip.Addr
	// Source is the outer source: the VIP's encapsulation source (the
	// address the backend's decapsulator accepts, vipd's encap_source).
	// Unset, it is the prober's source address of the family, which is
	// what the data plane uses when encap_source is unset: the egress
	// interface's address.
	Source netip.Addr
	Encap  Encap
	// GUEPort is the UDP destination port of GUE (0:
	// dsr.DefaultGUEPort).
	GUEPort uint16
}

// headroom is the most bytes wrap writes before the inner packet.
const headroom = dsr.OverheadGUE6

// portHash spreads probe flows as the data plane spreads client flows:
// GUE's UDP source port and IPv6's outer flow label come from it. The
// data plane hashes the flow with its seed; a probe has no client flow to
// agree with, so any mixing of the probe's local port does.
func portHash(port uint16) uint64 { return uint64(port) * 0x9e3779b97f4a7c15 >> 16 }

// wrap encapsulates the IP packet buf[at:at+n] (at >= headroom, its
// version that of p's addresses) for p, in place before it, as the data
// plane would, and returns the offset of the outer header. The outer
// source is p.Source itself: a probe does not take the per-flow sources
// of encap_source_prefix, whose first address (Source) a decapsulator
// that accepts the prefix accepts too.
func wrap(buf []byte, at, n int, p *Path, port uint16) int {
	h := portHash(port)
	dport := p.GUEPort
	if dport == 0 {
		dport = dsr.DefaultGUEPort
	}
	if p.Backend.Is4() {
		src, dst := p.Source.As4(), p.Backend.As4()
		if p.Encap == GUE {
			return dsr.GUE4(buf, at, n, src, dst, dsr.SourcePort(h), dport)
		}
		return dsr.Encap4(buf, at, n, src, dst)
	}
	src, dst := p.Source.As16(), p.Backend.As16()
	if p.Encap == GUE {
		return dsr.GUE6(buf, at, n, &src, &dst, uint32(h), dsr.SourcePort(h), dport)
	}
	return dsr.Encap6(buf, at, n, &src, &dst, uint32(h))
}

// key identifies a probe connection by what the TUN shows of it: the
// family and the local (source) port. The probe source address is one
// per family, so the port alone tells connections apart.
type key struct {
	v6   bool
	port uint16
}

// parse returns the key of the IP packet pkt read from the TUN: a TCP
// segment from a probe socket. ok is false for anything else (the
// kernel's own IPv6 chatter, truncated packets), which is dropped.
func parse(pkt []byte) (k key, ok bool) {
	if len(pkt) < 1 {
		return k, false
	}
	switch pkt[0] >> 4 {
	case 4:
		if len(pkt) < packet.IPv4MinSize {
			return k, false
		}
		ihl := int(pkt[0]&0x0f) * 4
		// A fragment cannot come from a probe (TCP sockets send DF
		// segments no larger than the path MTU).
		if pkt[9] != packet.ProtoTCP || ihl < packet.IPv4MinSize || len(pkt) < ihl+4 ||
			binary.BigEndian.Uint16(pkt[6:])&0x3fff != 0 {
			return k, false
		}
		return key{port: binary.BigEndian.Uint16(pkt[ihl:])}, true
	case 6:
		// TCP sockets send no extension headers.
		if len(pkt) < packet.IPv6Size+4 || pkt[6] != packet.ProtoTCP {
			return k, false
		}
		return key{v6: true, port: binary.BigEndian.Uint16(pkt[packet.IPv6Size:])}, true
	}
	return k, false
}
