package tunprobe

import (
	"bytes"
	"net"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

func ip(a netip.Addr) net.IP { return net.IP(a.AsSlice()) }

// segment returns a TCP SYN src:sport → dst:80 as a probe socket sends it.
func segment(t *testing.T, src, dst netip.Addr, sport uint16) []byte {
	t.Helper()
	l4 := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: 80, Seq: 7, SYN: true, Window: 64240}
	var l3 gopacket.SerializableLayer
	if src.Is4() {
		v4 := &layers.IPv4{Version: 4, TTL: 64, Flags: layers.IPv4DontFragment, Protocol: layers.IPProtocolTCP, SrcIP: ip(src), DstIP: ip(dst)}
		l4.SetNetworkLayerForChecksum(v4)
		l3 = v4
	} else {
		v6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolTCP, SrcIP: ip(src), DstIP: ip(dst)}
		l4.SetNetworkLayerForChecksum(v6)
		l3 = v6
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, l3, l4); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// TestWrap checks wrap's output with gopacket: the outer header from the
// path's source to its backend, of the path's encapsulation, GUE to its
// port from a dynamic source port, and the probe's packet untouched after
// it; and parse finds the probe's port in the inner packet.
func TestWrap(t *testing.T) {
	src4, vip4, be4, es4 := netip.MustParseAddr("198.18.1.1"), netip.MustParseAddr("198.18.0.101"), netip.MustParseAddr("198.18.1.11"), netip.MustParseAddr("198.18.1.5")
	src6, vip6, be6 := netip.MustParseAddr("2001:2:0:1::1"), netip.MustParseAddr("2001:2::101"), netip.MustParseAddr("2001:2:0:1::11")
	tests := []struct {
		name     string
		src, vip netip.Addr
		path     Path
		dport    uint16 // GUE's UDP destination port; 0: IPIP
	}{
		{"IPIP over IPv4", src4, vip4, Path{Backend: be4, Source: es4}, 0},
		{"GUE over IPv4, default port", src4, vip4, Path{Backend: be4, Source: es4, Encap: GUE}, 6080},
		{"IPIP over IPv6", src6, vip6, Path{Backend: be6, Source: src6}, 0},
		{"GUE over IPv6", src6, vip6, Path{Backend: be6, Source: src6, Encap: GUE, GUEPort: 7777}, 7777},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inner := segment(t, tt.src, tt.vip, 40000)
			k, ok := parse(inner)
			if !ok || k.port != 40000 || k.v6 != tt.src.Is6() {
				t.Fatalf("parse: %+v %v", k, ok)
			}
			buf := make([]byte, headroom+len(inner))
			copy(buf[headroom:], inner)
			o := wrap(buf, headroom, len(inner), &tt.path, k.port)
			out := buf[o:]
			first := layers.LayerTypeIPv4
			if tt.src.Is6() {
				first = layers.LayerTypeIPv6
			}
			pkt := gopacket.NewPacket(out, first, gopacket.Default)
			var osrc, odst net.IP
			var payload []byte
			switch l := pkt.Layers()[0].(type) {
			case *layers.IPv4:
				osrc, odst, payload = l.SrcIP, l.DstIP, l.Payload
				want := layers.IPProtocolIPv4
				if tt.dport != 0 {
					want = layers.IPProtocolUDP
				}
				if l.Protocol != want || l.Flags&layers.IPv4DontFragment == 0 || int(l.Length) != len(out) {
					t.Errorf("outer IPv4 %+v", l)
				}
			case *layers.IPv6:
				osrc, odst, payload = l.SrcIP, l.DstIP, l.Payload
				want := layers.IPProtocolIPv6
				if tt.dport != 0 {
					want = layers.IPProtocolUDP
				}
				if l.NextHeader != want || int(l.Length) != len(out)-40 {
					t.Errorf("outer IPv6 %+v", l)
				}
			}
			if !osrc.Equal(ip(tt.path.Source)) || !odst.Equal(ip(tt.path.Backend)) {
				t.Errorf("outer %v → %v, want %v → %v", osrc, odst, tt.path.Source, tt.path.Backend)
			}
			if tt.dport != 0 {
				u, _ := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
				if u == nil || uint16(u.DstPort) != tt.dport || u.SrcPort < 49152 {
					t.Fatalf("UDP %+v, want to %d from a dynamic port", u, tt.dport)
				}
				payload = u.Payload
			}
			if !bytes.Equal(payload, inner) {
				t.Errorf("inner packet changed:\n%x\nwant\n%x", payload, inner)
			}
		})
	}
}

// TestParseRejects: what a probe socket does not send is not looked up.
func TestParseRejects(t *testing.T) {
	syn := segment(t, netip.MustParseAddr("198.18.1.1"), netip.MustParseAddr("198.18.0.101"), 40000)
	frag := append([]byte(nil), syn...)
	frag[6] |= 0x20 // more fragments
	udp := append([]byte(nil), syn...)
	udp[9] = 17
	tests := []struct {
		name string
		pkt  []byte
	}{
		{"empty", nil},
		{"truncated IPv4", syn[:22]},
		{"fragment", frag},
		{"UDP", udp},
		{"not IP", []byte{0x10, 0, 0, 0}},
		{"IPv6 ICMP (router solicitation)", append([]byte{0x60, 0, 0, 0, 0, 8, 58, 255}, make([]byte, 40)...)},
	}
	for _, tt := range tests {
		if k, ok := parse(tt.pkt); ok {
			t.Errorf("%s: parsed as %+v", tt.name, k)
		}
	}
}
