package dsr

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// TestGUEHint wraps packets of both families with a previous-owner hint
// and decodes the result with gopacket: the outer header (TOS or traffic
// class from the inner packet, not from the GUE header in front of it),
// UDP ports, length and checksum, then the GUE variant 0 header and
// private data field by field, and the inner packet byte for byte.
func TestGUEHint(t *testing.T) {
	for _, tc := range []struct {
		name     string
		client   net.IP
		vip      net.IP
		src, dst net.IP
		prev     net.IP
		flags    uint8
	}{
		{"v4", net.ParseIP("198.18.0.1").To4(), net.ParseIP("198.18.1.10").To4(), net.ParseIP("198.18.2.1").To4(), net.ParseIP("198.18.3.7").To4(), net.ParseIP("198.18.3.9").To4(), 0},
		{"v4 chained", net.ParseIP("198.18.0.1").To4(), net.ParseIP("198.18.1.10").To4(), net.ParseIP("198.18.2.1").To4(), net.ParseIP("198.18.3.7").To4(), net.ParseIP("198.18.3.9").To4(), HintChained},
		{"v6", net.ParseIP("2001:db8::1"), net.ParseIP("2001:db8:1::10"), net.ParseIP("2001:db8:2::1"), net.ParseIP("2001:db8:3::7"), net.ParseIP("2001:db8:3::9"), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := inner(t, tc.client, tc.vip, 77)
			const head = 128
			buf := make([]byte, head+len(in))
			copy(buf[head:], in)
			sport, dport := SourcePort(0x1234), uint16(DefaultGUEPort)
			var o, over, hs int
			var first gopacket.Decoder
			var wantProto uint8
			if v4 := tc.src.To4(); v4 != nil {
				o = GUEHint4(buf, head, len(in), [4]byte(v4), [4]byte(tc.dst.To4()), sport, dport, [4]byte(tc.prev.To4()), tc.flags)
				over, hs, first, wantProto = OverheadHint4, HintSize4, layers.LayerTypeIPv4, 4
			} else {
				o = GUEHint6(buf, head, len(in), (*[16]byte)(tc.src.To16()), (*[16]byte)(tc.dst.To16()), 7, sport, dport, (*[16]byte)(tc.prev.To16()), tc.flags)
				over, hs, first, wantProto = OverheadHint6, HintSize6, layers.LayerTypeIPv6, 41
			}
			if o != head-over {
				t.Fatalf("outer header at %d, want %d", o, head-over)
			}
			out := buf[o:]
			p := gopacket.NewPacket(out, first, gopacket.DecodeOptions{})
			udp, _ := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
			if udp == nil {
				t.Fatalf("no UDP layer:\n%s", p.Dump())
			}
			if uint16(udp.SrcPort) != sport || uint16(udp.DstPort) != dport || int(udp.Length) != 8+hs+len(in) {
				t.Errorf("UDP %d -> %d length %d", udp.SrcPort, udp.DstPort, udp.Length)
			}
			if ip4, ok := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4); ok {
				if !ip4.DstIP.Equal(tc.dst) || ip4.TOS != 0xb8 || int(ip4.Length) != len(out) || ip4.Protocol != layers.IPProtocolUDP {
					t.Errorf("outer IPv4 %+v", ip4)
				}
				if err := verify4(out[:20]); err != nil {
					t.Error(err)
				}
			}
			if ip6, ok := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6); ok {
				if !ip6.DstIP.Equal(tc.dst) || ip6.TrafficClass != 0xb8 || int(ip6.Length) != 8+hs+len(in) || ip6.FlowLabel != 7 {
					t.Errorf("outer IPv6 %+v", ip6)
				}
				u := &layers.UDP{SrcPort: udp.SrcPort, DstPort: udp.DstPort}
				if err := u.SetNetworkLayerForChecksum(ip6); err != nil {
					t.Fatal(err)
				}
				sb := gopacket.NewSerializeBuffer()
				if err := gopacket.SerializeLayers(sb, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, u, gopacket.Payload(udp.Payload)); err != nil {
					t.Fatal(err)
				}
				if got := binary.BigEndian.Uint16(sb.Bytes()[6:]); got != udp.Checksum {
					t.Errorf("UDP checksum %#04x, gopacket computes %#04x", udp.Checksum, got)
				}
			}
			g := udp.Payload
			if g[0]>>6 != 0 || g[0]&0x20 != 0 || int(g[0]&0x1f)*4+4 != hs || g[1] != wantProto || g[2] != 0 || g[3] != 0 {
				t.Errorf("GUE header % x", g[:4])
			}
			if binary.BigEndian.Uint16(g[4:]) != HintMagic || g[6] != HintKindPrevious || g[7] != tc.flags {
				t.Errorf("private data % x", g[4:8])
			}
			if prev := net.IP(g[8:hs]); !prev.Equal(tc.prev) {
				t.Errorf("previous owner %v, want %v", prev, tc.prev)
			}
			if !bytes.Equal(g[hs:], in) {
				t.Error("the inner packet changed")
			}
		})
	}
}

func TestGUEHintAllocs(t *testing.T) {
	buf := make([]byte, 2048)
	var s, d, pr [16]byte
	buf[128] = 0x60
	if n := testing.AllocsPerRun(100, func() {
		GUEHint4(buf, 128, 1000, [4]byte{198, 18, 0, 1}, [4]byte{198, 18, 0, 2}, 50000, 6080, [4]byte{198, 18, 0, 3}, 0)
		GUEHint6(buf, 128, 1000, &s, &d, 1, 50000, 6080, &pr, 0)
	}); n != 0 {
		t.Errorf("%v allocations", n)
	}
}
