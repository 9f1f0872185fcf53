package dataplane

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/vipd/vipd/dsr"
)

// The policy oracle: given the spec, a frame the pipeline received and the
// frames it transmitted, it says whether every transmission is one the
// configuration allows. It reads packets with gopacket and the spec
// directly, never with the pipeline's parser or classifier. A frame vipd
// transmits must be
//
//	(a) the input forwarded to a backend of a VIP the input matched by
//	    (address, protocol, port) — by (address, protocol) alone for a
//	    non-first fragment, when one VIP has that pair —, NAT'ed or
//	    encapsulated;
//	(b) a NAT reply from a backend of a VIP, whose new source is that VIP
//	    and port, to a destination that is not the box's; or an ICMP error
//	    about a client's packet to a NAT backend, translated for the client;
//	(c) an ICMP message vipd made back to the input's source (fragmentation
//	    needed, packet too big, echo reply to a VIP);
//	(d) an ICMP error to a VIP, steered to a backend of the VIP whose flow
//	    it quotes.
//
// Nothing else.

// ipInfo is what the oracle knows of an IP packet.
type ipInfo struct {
	src, dst     netip.Addr
	proto        uint8
	frag         bool   // any fragment
	later        bool   // a fragment after the first: no ports
	payload      []byte // after the IP header and any IPv6 extension headers
	sport, dport uint16
	hasPorts     bool
	icmpType     uint8
	isICMP       bool
	inner        *ipInfo    // IP in IP: the encapsulated packet
	hint         netip.Addr // GUE with a previous-owner hint: the one it names
	syn          bool       // TCP with SYN set
	quote        *ipInfo    // ICMP error: the quoted packet
	routed       bool       // a source route with addresses left (IPv6 Routing header, IPv4 LSRR/SSRR)
}

// ipOf reads the outermost IP packet of a decoded frame, and what it
// encapsulates or quotes.
func ipOf(p gopacket.Packet) (*ipInfo, error) {
	ls := p.Layers()
	for i, l := range ls {
		switch l.(type) {
		case *layers.IPv4, *layers.IPv6:
			return ipFrom(ls[i:], 0)
		}
	}
	return nil, fmt.Errorf("no IP layer")
}

func ipFrom(ls []gopacket.Layer, depth int) (*ipInfo, error) {
	var in ipInfo
	rest := ls[1:]
	switch ip := ls[0].(type) {
	case *layers.IPv4:
		in.src, in.dst, in.proto = addrOf(ip.SrcIP), addrOf(ip.DstIP), uint8(ip.Protocol)
		for _, o := range ip.Options {
			if (o.OptionType == 131 || o.OptionType == 137) && len(o.OptionData) > 0 && o.OptionData[0] <= o.OptionLength {
				in.routed = true // LSRR or SSRR with an address left
			}
		}
		in.frag = ip.Flags&layers.IPv4MoreFragments != 0 || ip.FragOffset != 0
		in.later = ip.FragOffset != 0
		in.payload = ip.Payload
	case *layers.IPv6:
		in.src, in.dst, in.proto = netip.AddrFrom16([16]byte(ip.SrcIP.To16())), netip.AddrFrom16([16]byte(ip.DstIP.To16())), uint8(ip.NextHeader)
		in.payload = ip.Payload
	ext:
		for len(rest) > 0 {
			switch x := rest[0].(type) {
			case *layers.IPv6HopByHop:
				in.proto, in.payload = uint8(x.NextHeader), x.Payload
			case *layers.IPv6Destination:
				in.proto, in.payload = uint8(x.NextHeader), x.Payload
			case *layers.IPv6Routing:
				in.proto, in.payload = uint8(x.NextHeader), x.Payload
				in.routed = in.routed || x.SegmentsLeft != 0
			case *layers.IPv6Fragment:
				in.proto, in.payload = uint8(x.NextHeader), x.Payload
				in.frag = x.MoreFragments || x.FragmentOffset != 0
				in.later = x.FragmentOffset != 0
			default:
				break ext
			}
			rest = rest[1:]
		}
	default:
		return nil, fmt.Errorf("not IP")
	}
	if in.later {
		return &in, nil
	}
	switch in.proto {
	case 6, 17:
		if len(in.payload) >= 4 {
			in.sport, in.dport, in.hasPorts = binary.BigEndian.Uint16(in.payload), binary.BigEndian.Uint16(in.payload[2:]), true
		}
		if in.proto == 6 && !in.later && len(in.payload) >= 14 {
			in.syn = in.payload[13]&0x02 != 0
		}
		if in.proto == 17 && depth == 0 && in.dport == dsr.DefaultGUEPort && len(in.payload) > 8 && !in.frag {
			// GUE variant 1 (the specs here use the default port): the
			// client's packet follows the UDP header; variant 0 with a
			// previous-owner hint (dsr.GUEHint4): after the hint.
			g := in.payload[8:]
			if g[0]>>6 == 0 {
				n := 4 + 4*int(g[0]&0x1f)
				if g[0] != 2 && g[0] != 5 || len(g) <= n || g[4] != 'v' || g[5] != 'p' || g[6] != 1 {
					return nil, fmt.Errorf("GUE variant 0 but not a hint: % x", g[:min(len(g), 8)])
				}
				in.hint, _ = netip.AddrFromSlice(g[8:n])
				g = g[n:]
			}
			first := layers.LayerTypeIPv4
			if g[0]>>4 == 6 {
				first = layers.LayerTypeIPv6
			}
			p := gopacket.NewPacket(g, first, gopacket.Default)
			inner, err := ipFrom(p.Layers(), depth+1)
			if err != nil {
				return nil, fmt.Errorf("in GUE: %w", err)
			}
			in.inner = inner
		}
	case 1, 58:
		if len(in.payload) >= 8 {
			in.isICMP, in.icmpType = true, in.payload[0]
			if depth == 0 && isFlowError(in.proto, in.icmpType) {
				in.quote = quoteOf(in.proto, in.payload[8:])
			}
		}
	case 4, 41:
		if depth == 0 && len(rest) > 0 {
			inner, err := ipFrom(rest, depth+1)
			if err != nil {
				return nil, fmt.Errorf("encapsulated: %w", err)
			}
			in.inner = inner
		}
	}
	return &in, nil
}

func isFlowError(proto, t uint8) bool {
	if proto == 1 {
		return t == 3 || t == 11 || t == 12
	}
	return t >= 1 && t <= 4
}

// quoteOf reads the packet an ICMP error quotes, by hand: gopacket will
// not decode a cut-short packet. Only the fixed headers and ports are
// needed.
func quoteOf(proto uint8, q []byte) *ipInfo {
	var in ipInfo
	off := 0
	if proto == 1 {
		if len(q) < 20 || q[0]>>4 != 4 {
			return nil
		}
		off = int(q[0]&0x0f) * 4
		in.src, in.dst, in.proto = netip.AddrFrom4([4]byte(q[12:16])), netip.AddrFrom4([4]byte(q[16:20])), q[9]
		in.later = binary.BigEndian.Uint16(q[6:])&0x1fff != 0
	} else {
		if len(q) < 40 || q[0]>>4 != 6 {
			return nil
		}
		off = 40
		in.src, in.dst, in.proto = netip.AddrFrom16([16]byte(q[8:24])), netip.AddrFrom16([16]byte(q[24:40])), q[6]
	}
	if !in.later && (in.proto == 6 || in.proto == 17) && len(q) >= off+4 {
		in.sport, in.dport, in.hasPorts = binary.BigEndian.Uint16(q[off:]), binary.BigEndian.Uint16(q[off+2:]), true
	}
	return &in
}

// vipsMatching returns the VIPs a packet to dst of proto and port (hasPort
// false for a non-first fragment) is for.
func vipsMatching(spec *Spec, dst netip.Addr, proto uint8, port uint16, hasPort bool) []*VIPSpec {
	var exact, any, byAddr []*VIPSpec
	for i := range spec.VIPs {
		v := &spec.VIPs[i]
		if v.Addr != dst || v.Proto != proto {
			continue
		}
		byAddr = append(byAddr, v)
		switch {
		case hasPort && v.Port == port:
			exact = append(exact, v)
		case hasPort && v.Port == 0:
			any = append(any, v)
		}
	}
	switch {
	case !hasPort && len(byAddr) == 1:
		return byAddr
	case !hasPort:
		return nil
	case len(exact) > 0:
		return exact
	}
	return any
}

// replyPort is the port a NAT backend's replies come from.
func replyPort(v *VIPSpec, b *BackendSpec) uint16 {
	if b.Port != 0 {
		return b.Port
	}
	return v.Port
}

// natVIPsOfReply returns the NAT VIPs that (src, proto, sport) is a reply
// source of (hasPort false: a non-first fragment, by address alone).
func natVIPsOfReply(spec *Spec, src netip.Addr, proto uint8, sport uint16, hasPort bool) []*VIPSpec {
	var out []*VIPSpec
	for i := range spec.VIPs {
		v := &spec.VIPs[i]
		if v.Mode != ModeNAT || v.Proto != proto {
			continue
		}
		for j := range v.Backends {
			b := &v.Backends[j]
			if b.Addr == src && (!hasPort || replyPort(v, b) == 0 || replyPort(v, b) == sport) {
				out = append(out, v)
				break
			}
		}
	}
	if !hasPort && len(out) > 1 {
		return nil // ambiguous: the pipeline must drop
	}
	return out
}

func isBackend(v *VIPSpec, a netip.Addr) *BackendSpec {
	for j := range v.Backends {
		if v.Backends[j].Addr == a {
			return &v.Backends[j]
		}
	}
	return nil
}

func isLocalAddr(spec *Spec, a netip.Addr) bool {
	for _, l := range spec.localAddrs() {
		if l.Unmap() == a.Unmap() {
			return true
		}
	}
	return false
}

// checkPolicy returns an error when out, a frame the pipeline transmitted
// for in, is none of what the configuration allows.
func checkPolicy(spec *Spec, in, out []byte) error {
	pin := gopacket.NewPacket(in, layers.LayerTypeEthernet, gopacket.Default)
	pout := gopacket.NewPacket(out, layers.LayerTypeEthernet, gopacket.Default)
	i, err := ipOf(pin)
	if err != nil {
		return fmt.Errorf("transmitted something for an input gopacket reads no IP in: %v", err)
	}
	o, err := ipOf(pout)
	if err != nil {
		return fmt.Errorf("output: %v", err)
	}
	var why []string
	// (a) forwarded to a backend, unless the VIP is a waypoint of a
	// source route.
	for _, v := range vipsMatching(spec, i.dst, i.proto, i.dport, !i.later && i.hasPorts) {
		if i.routed {
			why = append(why, "forward: a source route with addresses left")
			break
		}
		if err := forwarded(v, i, o); err == nil {
			return nil
		} else {
			why = append(why, "forward: "+err.Error())
		}
	}
	// (b) a NAT reply, or an ICMP error on its way to a NAT client.
	if !isLocalAddr(spec, i.dst) {
		for _, v := range natVIPsOfReply(spec, i.src, i.proto, i.sport, !i.later && i.hasPorts) {
			if o.src == v.Addr && o.dst == i.dst && o.proto == i.proto &&
				(o.later || !o.hasPorts || ((v.Port == 0 || o.sport == v.Port) && o.dport == i.dport)) {
				return nil
			}
			why = append(why, "reply: not translated to the VIP")
		}
		if q := i.quote; q != nil && q.hasPorts && o.quote != nil && o.dst == i.dst {
			for _, v := range natVIPsOfReply(spec, q.dst, q.proto, q.dport, true) {
				if o.quote.dst == v.Addr && o.quote.src == q.src && (o.src == i.src || (o.src == v.Addr && isBackend(v, i.src) != nil)) {
					return nil
				}
			}
		}
	}
	// (c) vipd's own ICMP back to the input's source.
	if o.isICMP && o.dst == i.src {
		switch {
		case o.proto == 1 && o.icmpType == 3, o.proto == 58 && o.icmpType == 2:
			if o.quote != nil && o.quote.src == i.src && o.quote.dst == i.dst {
				return nil
			}
			why = append(why, "too big: quote is not the input")
		case (o.proto == 1 && o.icmpType == 0) || (o.proto == 58 && o.icmpType == 129):
			for _, v := range spec.VIPs {
				if v.Addr == i.dst && o.src == i.dst && i.isICMP && (i.icmpType == 8 || i.icmpType == 128) {
					return nil
				}
			}
			why = append(why, "echo reply: not from a VIP to its pinger")
		}
	}
	// (d) an ICMP error to a VIP, steered to a backend of the VIP whose
	// flow it quotes.
	if q := i.quote; q != nil && q.hasPorts && q.src == i.dst {
		for _, v := range vipsMatching(spec, q.src, q.proto, q.sport, true) {
			switch {
			case v.Mode == ModeDSR && o.inner != nil && isBackend(v, o.dst) != nil && o.inner.src == i.src && o.inner.dst == i.dst:
				return nil
			case v.Mode == ModeNAT && isBackend(v, o.dst) != nil && o.quote != nil && o.quote.src == o.dst && o.quote.dst == q.dst:
				return nil
			}
			why = append(why, "steered error: not to a backend of "+v.Name)
		}
	}
	return fmt.Errorf("transmitted %v→%v proto %d (%d→%d) for input %v→%v proto %d (%d→%d): allowed by nothing %v",
		o.src, o.dst, o.proto, o.sport, o.dport, i.src, i.dst, i.proto, i.sport, i.dport, why)
}

// forwarded checks that o is the input i sent to a backend of v.
func forwarded(v *VIPSpec, i, o *ipInfo) error {
	b := isBackend(v, o.dst)
	if b == nil {
		return fmt.Errorf("%v is not a backend of %s", o.dst, v.Name)
	}
	if v.Mode == ModeDSR {
		if o.inner == nil || o.inner.src != i.src || o.inner.dst != i.dst || o.inner.proto != i.proto {
			return fmt.Errorf("DSR: not the input encapsulated")
		}
		if o.inner.hasPorts && i.hasPorts && (o.inner.sport != i.sport || o.inner.dport != i.dport) {
			return fmt.Errorf("DSR: inner ports changed")
		}
		if o.hint.IsValid() {
			// A hint names a member of the VIP's previous table other
			// than the backend the packet goes to, on a packet that does
			// not start a TCP connection.
			known := false
			for _, pb := range v.Previous {
				known = known || pb.Addr == o.hint
			}
			if !known || o.hint == o.dst || (i.proto == 6 && i.syn) {
				return fmt.Errorf("DSR: hint %v (previous %v, to %v, SYN %v)", o.hint, v.Previous, o.dst, i.syn)
			}
		}
		return nil
	}
	if o.src != i.src || o.proto != i.proto {
		return fmt.Errorf("NAT: source or protocol changed")
	}
	if o.hasPorts && !o.later {
		want := b.Port
		if want == 0 {
			want = i.dport
		}
		if o.sport != i.sport || o.dport != want {
			return fmt.Errorf("NAT: ports %d→%d, want %d→%d", o.sport, o.dport, i.sport, want)
		}
	}
	return nil
}
