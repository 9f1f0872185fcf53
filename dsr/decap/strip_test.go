package decap

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vipd/vipd/packet"
)

// newFilter returns a filter as New builds it, without sockets: local
// holds the given addresses.
func newFilter(allowed []netip.Prefix, checkLocal bool, local ...netip.Addr) *filter {
	f := &filter{allowed: allowed, checkLocal: checkLocal, local: &localSet{}, stats: &counters{}}
	f.local.store(local)
	return f
}

// pass is the Reason-less expectation: the packet is delivered.
const pass = NumReasons

// checkOne checks that exactly the counter of want moved (none for pass).
func checkOne(t *testing.T, f *filter, want Reason) {
	t.Helper()
	s := f.stats.snapshot()
	for r := range NumReasons {
		n := uint64(0)
		if r == want {
			n = 1
		}
		if s.Dropped[r] != n {
			t.Errorf("Dropped[%v] = %d, want %d", r, s.Dropped[r], n)
		}
	}
}

// mutate returns a copy of b changed by f.
func mutate(b []byte, f func(b []byte)) []byte {
	c := bytes.Clone(b)
	f(c)
	return c
}

// fixIPv4Checksum recomputes the IPv4 header checksum of h.
func fixIPv4Checksum(h []byte) {
	ip := packet.IPv4(h)
	ip.SetChecksum(0)
	ip.SetChecksum(ip.ComputeChecksum())
}

func TestStrip4(t *testing.T) {
	syn := tcp4(t, client4, vip4, 40000, 80, true, false, 1, nil)
	data := tcp4(t, client4, vip4, 40000, 80, false, true, 2, bytes.Repeat([]byte("x"), 1000))
	allow := []netip.Prefix{netip.MustParsePrefix("198.18.1.0/28")}
	for _, tc := range []struct {
		name       string
		pkt        []byte
		allowed    []netip.Prefix
		checkLocal bool
		want       Reason
		inner      []byte // the expected inner packet when want is pass
	}{
		{name: "SYN", pkt: ipip(t, lbAddr4, beAddr4, syn), want: pass, inner: syn},
		{name: "data", pkt: ipip(t, lbAddr4, beAddr4, data), want: pass, inner: data},
		{name: "allowed source", pkt: ipip(t, lbAddr4, beAddr4, syn), allowed: allow, want: pass, inner: syn},
		{name: "local destination", pkt: ipip(t, lbAddr4, beAddr4, syn), checkLocal: true, want: pass, inner: syn},
		{
			// The raw socket never returns bytes past Total Length, but the
			// header, not the read, says where the packet ends.
			name: "bytes after the outer packet",
			pkt:  append(ipip(t, lbAddr4, beAddr4, syn), 0, 0, 0, 0),
			want: pass, inner: syn,
		},
		{
			name: "outer header with options",
			pkt: func() []byte {
				o := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolIPv4, SrcIP: ip(lbAddr4), DstIP: ip(beAddr4),
					Options: []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 0}}}
				return serialize(t, o, gopacket.Payload(syn))
			}(),
			want: pass, inner: syn,
		},
		{name: "empty", pkt: nil, want: DropMalformed},
		{name: "truncated outer header", pkt: ipip(t, lbAddr4, beAddr4, syn)[:12], want: DropMalformed},
		{
			name: "outer total length past the read",
			pkt:  ipip(t, lbAddr4, beAddr4, syn)[:50],
			want: DropMalformed,
		},
		{
			name: "outer protocol TCP",
			pkt:  mutate(ipip(t, lbAddr4, beAddr4, syn), func(b []byte) { b[9] = 6; fixIPv4Checksum(b[:20]) }),
			want: DropProtocol,
		},
		{name: "source not allowed", pkt: ipip(t, stranger, beAddr4, syn), allowed: allow, want: DropSource},
		{name: "no inner packet", pkt: ipip(t, lbAddr4, beAddr4, nil), want: DropInnerVersion},
		{name: "IPv6 inside IPIP", pkt: ipip(t, lbAddr4, beAddr4, tcp6(t, client6, vip6, 1, 80, true, false, 1, nil)), want: DropInnerVersion},
		{name: "inner header truncated", pkt: ipip(t, lbAddr4, beAddr4, syn[:12]), want: DropInnerLength},
		{
			name: "inner total length longer than what remains",
			pkt:  ipip(t, lbAddr4, beAddr4, syn[:len(syn)-4]),
			want: DropInnerLength,
		},
		{
			name: "inner total length shorter than what remains",
			pkt:  ipip(t, lbAddr4, beAddr4, append(bytes.Clone(syn), 0, 0)),
			want: DropInnerLength,
		},
		{
			name: "inner IHL past the inner packet",
			pkt:  ipip(t, lbAddr4, beAddr4, mutate(syn[:24], func(b []byte) { b[0] = 0x4f; binary.BigEndian.PutUint16(b[2:], 24) })),
			want: DropInnerLength,
		},
		{
			name: "inner header checksum",
			pkt:  ipip(t, lbAddr4, beAddr4, mutate(syn, func(b []byte) { b[8]-- })),
			want: DropInnerChecksum,
		},
		{
			name:       "inner destination not local",
			pkt:        ipip(t, lbAddr4, beAddr4, tcp4(t, client4, netip.MustParseAddr("198.18.0.102"), 40000, 80, true, false, 1, nil)),
			checkLocal: true,
			want:       DropNotLocal,
		},
		{
			name: "destination not checked without CheckLocal",
			pkt:  ipip(t, lbAddr4, beAddr4, tcp4(t, client4, netip.MustParseAddr("198.18.0.102"), 40000, 80, true, false, 1, nil)),
			want: pass, inner: tcp4(t, client4, netip.MustParseAddr("198.18.0.102"), 40000, 80, true, false, 1, nil),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFilter(tc.allowed, tc.checkLocal, vip4, beAddr4)
			got := f.strip4(bytes.Clone(tc.pkt))
			checkOne(t, f, tc.want)
			if tc.want != pass {
				if got != nil {
					t.Errorf("strip4 passed %d bytes, want a drop (%v)", len(got), tc.want)
				}
				return
			}
			if !bytes.Equal(got, tc.inner) {
				t.Fatalf("inner packet:\n got %x\nwant %x", got, tc.inner)
			}
			// The oracle agrees: gopacket finds the outer and inner layers.
			p := gopacket.NewPacket(tc.pkt, layers.LayerTypeIPv4, gopacket.Default)
			if ls := p.Layers(); len(ls) < 3 || ls[0].LayerType() != layers.LayerTypeIPv4 || ls[1].LayerType() != layers.LayerTypeIPv4 {
				t.Errorf("gopacket does not see IPv4 in IPv4: %v", p)
			}
		})
	}
}

func TestStrip6(t *testing.T) {
	syn := tcp6(t, client6, vip6, 40000, 80, true, false, 1, nil)
	allow := []netip.Prefix{netip.MustParsePrefix("2001:2:0:1::/124")}
	// payload is what the raw IPv6 socket returns: the outer header is
	// gone. Building the whole packet and cutting it keeps gopacket the
	// author of both.
	payload := func(outer []byte) []byte { return outer[packet.IPv6Size:] }
	for _, tc := range []struct {
		name       string
		inner      []byte
		src        netip.Addr
		allowed    []netip.Prefix
		checkLocal bool
		want       Reason
	}{
		{name: "SYN", inner: payload(ip6ip6(t, lbAddr6, beAddr6, syn)), src: lbAddr6, want: pass},
		{name: "allowed source", inner: syn, src: lbAddr6, allowed: allow, want: pass},
		{name: "local destination", inner: syn, src: lbAddr6, checkLocal: true, want: pass},
		{name: "source not allowed", inner: syn, src: stranger6, allowed: allow, want: DropSource},
		{name: "IPv4 source not allowed", inner: syn, src: lbAddr4, allowed: allow, want: DropSource},
		{name: "empty", inner: nil, src: lbAddr6, want: DropInnerVersion},
		{name: "IPv4 inside", inner: tcp4(t, client4, vip4, 40000, 80, true, false, 1, nil), src: lbAddr6, want: DropInnerVersion},
		{name: "truncated header", inner: syn[:30], src: lbAddr6, want: DropInnerLength},
		{name: "payload length longer than what remains", inner: syn[:len(syn)-1], src: lbAddr6, want: DropInnerLength},
		{name: "payload length shorter than what remains", inner: append(bytes.Clone(syn), 0), src: lbAddr6, want: DropInnerLength},
		{
			name:       "destination not local",
			inner:      tcp6(t, client6, netip.MustParseAddr("2001:2::102"), 40000, 80, true, false, 1, nil),
			src:        lbAddr6,
			checkLocal: true,
			want:       DropNotLocal,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFilter(tc.allowed, tc.checkLocal, vip6, beAddr6)
			got := f.strip6(bytes.Clone(tc.inner), tc.src)
			checkOne(t, f, tc.want)
			if tc.want != pass {
				if got != nil {
					t.Errorf("strip6 passed %d bytes, want a drop (%v)", len(got), tc.want)
				}
				return
			}
			if !bytes.Equal(got, tc.inner) {
				t.Fatalf("inner packet:\n got %x\nwant %x", got, tc.inner)
			}
		})
	}
}

// partial puts a segment in the state GRO leaves it: the checksum field of
// the transport header at l4 holds the folded pseudo-header sum.
func partial(tb testing.TB, pkt []byte) []byte {
	tb.Helper()
	c := bytes.Clone(pkt)
	var l4 []byte
	var proto uint8
	var pseudo uint16
	switch c[0] >> 4 {
	case 4:
		h := packet.IPv4(c)
		l4, proto = c[h.HeaderLength():], h.Protocol()
		pseudo = packet.PseudoHeaderSum4(h.SourceAddress(), h.DestinationAddress(), proto, uint16(len(l4)))
	case 6:
		h := packet.IPv6(c)
		l4, proto = c[packet.IPv6Size:], h.NextHeader()
		pseudo = packet.PseudoHeaderSum6(h.SourceAddress(), h.DestinationAddress(), proto, uint32(len(l4)))
	}
	off := 16 // TCP
	if proto == packet.ProtoUDP {
		off = 6
	}
	binary.BigEndian.PutUint16(l4[off:], pseudo)
	return c
}

func udpTo(tb testing.TB, src, dst netip.Addr, payload []byte) []byte {
	tb.Helper()
	u := &layers.UDP{SrcPort: 5555, DstPort: 7001}
	var l3 gopacket.NetworkLayer
	var sl gopacket.SerializableLayer
	if src.Is4() {
		h := &layers.IPv4{Version: 4, TTL: 63, Protocol: layers.IPProtocolUDP, SrcIP: ip(src), DstIP: ip(dst)}
		l3, sl = h, h
	} else {
		h := &layers.IPv6{Version: 6, HopLimit: 63, NextHeader: layers.IPProtocolUDP, SrcIP: ip(src), DstIP: ip(dst)}
		l3, sl = h, h
	}
	u.SetNetworkLayerForChecksum(l3)
	return serialize(tb, sl, u, gopacket.Payload(payload))
}

// checksumsOK reports whether gopacket, serializing the decoded packet
// again with checksums computed, reproduces it byte for byte.
func checksumsOK(tb testing.TB, pkt []byte) bool {
	tb.Helper()
	first := layers.LayerTypeIPv4
	if pkt[0]>>4 == 6 {
		first = layers.LayerTypeIPv6
	}
	p := gopacket.NewPacket(pkt, first, gopacket.Default)
	nl, _ := p.NetworkLayer().(gopacket.SerializableLayer)
	var tl gopacket.SerializableLayer
	switch l := p.TransportLayer().(type) {
	case *layers.TCP:
		l.SetNetworkLayerForChecksum(p.NetworkLayer())
		tl = l
	case *layers.UDP:
		l.SetNetworkLayerForChecksum(p.NetworkLayer())
		tl = l
	}
	if nl == nil || tl == nil {
		tb.Fatalf("no network or transport layer in %v", p)
	}
	return bytes.Equal(serialize(tb, nl, tl, gopacket.Payload(p.TransportLayer().LayerPayload())), pkt)
}

// TestMergedSegments covers what GRO hands the raw sockets (see
// completeChecksum): TCP checksums left partial are finished, merged UDP
// datagrams are dropped, and valid packets whose checksum happens to
// equal the pseudo-header sum pass untouched.
func TestMergedSegments(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 2500) // 40000 bytes, as 40 merged segments
	tcpBig4 := tcp4(t, client4, vip4, 40000, 80, false, true, 7, big)
	tcpBig6 := tcp6(t, client6, vip6, 40000, 80, false, true, 7, big)
	udpBig4 := udpTo(t, client4, vip4, big)
	udpBig6 := udpTo(t, client6, vip6, big)
	for _, tc := range []struct {
		name      string
		inner     []byte // as GRO leaves it
		want      Reason
		wantInner []byte // what must reach the TUN
		completed uint64
	}{
		{name: "TCP/IPv4 partial", inner: partial(t, tcpBig4), want: pass, wantInner: tcpBig4, completed: 1},
		{name: "TCP/IPv6 partial", inner: partial(t, tcpBig6), want: pass, wantInner: tcpBig6, completed: 1},
		{name: "TCP/IPv4 whole", inner: tcpBig4, want: pass, wantInner: tcpBig4},
		{name: "TCP/IPv4 valid, equal by chance", inner: coincidence(t, client4, vip4, packet.ProtoTCP), want: pass},
		{name: "UDP/IPv4 merged", inner: partial(t, udpBig4), want: DropMergedUDP},
		{name: "UDP/IPv6 merged", inner: partial(t, udpBig6), want: DropMergedUDP},
		{name: "UDP/IPv4 whole", inner: udpBig4, want: pass, wantInner: udpBig4},
		{name: "UDP/IPv4 valid, equal by chance", inner: coincidence(t, client4, vip4, packet.ProtoUDP), want: pass},
		{name: "UDP/IPv6 valid, equal by chance", inner: coincidence(t, client6, vip6, packet.ProtoUDP), want: pass},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.wantInner
			if want == nil && tc.want == pass {
				want = tc.inner // untouched
			}
			f := newFilter(nil, false)
			var got []byte
			if tc.inner[0]>>4 == 4 {
				got = f.strip4(ipip(t, lbAddr4, beAddr4, tc.inner))
			} else {
				got = f.strip6(bytes.Clone(tc.inner), lbAddr6)
			}
			checkOne(t, f, tc.want)
			if c := f.stats.completed.Load(); c != tc.completed {
				t.Errorf("completed = %d, want %d", c, tc.completed)
			}
			if tc.want != pass {
				if got != nil {
					t.Errorf("passed, want a drop (%v)", tc.want)
				}
				return
			}
			if !bytes.Equal(got, want) {
				t.Errorf("inner packet differs from the sender's (%d vs %d bytes)", len(got), len(want))
			}
			if !checksumsOK(t, got) {
				t.Errorf("gopacket: transport checksum wrong after decapsulation")
			}
		})
	}
}

// coincidence returns a valid TCP or UDP packet whose checksum equals its
// pseudo-header sum: the two payload bytes are chosen to make it so.
func coincidence(tb testing.TB, src, dst netip.Addr, proto uint8) []byte {
	tb.Helper()
	var pkt []byte
	if proto == packet.ProtoTCP {
		if src.Is4() {
			pkt = tcp4(tb, src, dst, 40000, 80, false, true, 9, []byte{0, 0})
		} else {
			pkt = tcp6(tb, src, dst, 40000, 80, false, true, 9, []byte{0, 0})
		}
	} else {
		pkt = udpTo(tb, src, dst, []byte{0, 0})
	}
	p := partial(tb, pkt)
	// In p the field holds the pseudo-header sum P and the last payload
	// word X is 0. The packet is valid when P (the pseudo-header) plus the
	// sum over l4 (field included) is 0xFFFF: with T that sum for X = 0,
	// X = ^T makes it so.
	hl := packet.IPv4MinSize
	if src.Is6() {
		hl = packet.IPv6Size
	}
	l4 := p[hl:]
	off := 16
	if proto == packet.ProtoUDP {
		off = 6
	}
	pseudo := binary.BigEndian.Uint16(l4[off:])
	binary.BigEndian.PutUint16(l4[len(l4)-2:], ^packet.Sum(l4, pseudo))
	if !checksumsOK(tb, p) {
		tb.Fatalf("coincidence: built an invalid packet")
	}
	return p
}
