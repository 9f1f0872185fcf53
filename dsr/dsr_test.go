package dsr

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vipd/vipd/packet"
)

// inner builds a client's TCP packet of the family of src and dst, with
// valid checksums, serialized by gopacket.
func inner(t *testing.T, src, dst net.IP, payload int) []byte {
	t.Helper()
	tcp := &layers.TCP{SrcPort: 40000, DstPort: 80, ACK: true, Window: 1000, Seq: 7}
	var ip gopacket.NetworkLayer
	if src.To4() != nil {
		ip4 := &layers.IPv4{Version: 4, IHL: 5, TTL: 61, TOS: 0xb8, Protocol: layers.IPProtocolTCP, SrcIP: src, DstIP: dst}
		ip = ip4
	} else {
		ip6 := &layers.IPv6{Version: 6, HopLimit: 61, TrafficClass: 0xb8, NextHeader: layers.IPProtocolTCP, SrcIP: src, DstIP: dst}
		ip = ip6
	}
	if err := tcp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		ip.(gopacket.SerializableLayer), tcp, gopacket.Payload(bytes.Repeat([]byte{0x5a}, payload)))
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestGUE wraps packets of both families in GUE and decodes the result
// with gopacket: outer addresses, protocol, TTL, DF, lengths, the UDP
// ports and checksum (zero over IPv4, valid over IPv6), and the inner
// packet byte for byte.
func TestGUE(t *testing.T) {
	for _, tc := range []struct {
		name     string
		client   net.IP
		vip      net.IP
		src, dst net.IP
		payload  int
	}{
		{"v4", net.ParseIP("198.18.0.1").To4(), net.ParseIP("198.18.1.10").To4(), net.ParseIP("198.18.2.1").To4(), net.ParseIP("198.18.3.7").To4(), 100},
		{"v4 odd", net.ParseIP("198.18.0.1").To4(), net.ParseIP("198.18.1.10").To4(), net.ParseIP("198.18.2.1").To4(), net.ParseIP("198.18.3.7").To4(), 1},
		{"v6", net.ParseIP("2001:db8::1"), net.ParseIP("2001:db8:1::10"), net.ParseIP("2001:db8:2::1"), net.ParseIP("2001:db8:3::7"), 100},
		{"v6 odd", net.ParseIP("2001:db8::1"), net.ParseIP("2001:db8:1::10"), net.ParseIP("2001:db8:2::1"), net.ParseIP("2001:db8:3::7"), 333},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := inner(t, tc.client, tc.vip, tc.payload)
			const head = 64
			buf := make([]byte, head+len(in))
			copy(buf[head:], in)
			sport, dport := SourcePort(0xdeadbeefcafef00d), uint16(DefaultGUEPort)
			var o, over int
			var first gopacket.Decoder
			if v4 := tc.src.To4(); v4 != nil {
				o, over, first = GUE4(buf, head, len(in), [4]byte(v4), [4]byte(tc.dst.To4()), sport, dport), OverheadGUE4, layers.LayerTypeIPv4
			} else {
				o, over, first = GUE6(buf, head, len(in), (*[16]byte)(tc.src.To16()), (*[16]byte)(tc.dst.To16()), 0x12345, sport, dport), OverheadGUE6, layers.LayerTypeIPv6
			}
			if o != head-over {
				t.Fatalf("outer header at %d, want %d", o, head-over)
			}
			out := buf[o:]
			p := gopacket.NewPacket(out, first, gopacket.DecodeOptions{})
			if el := p.ErrorLayer(); el != nil {
				t.Fatalf("gopacket: %v", el.Error())
			}
			udp, _ := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
			if udp == nil {
				t.Fatalf("no UDP layer:\n%s", p.Dump())
			}
			if uint16(udp.SrcPort) != sport || uint16(udp.DstPort) != dport || int(udp.Length) != len(in)+8 {
				t.Errorf("UDP %d -> %d length %d, want %d -> %d length %d", udp.SrcPort, udp.DstPort, udp.Length, sport, dport, len(in)+8)
			}
			if !bytes.Equal(udp.Payload, in) {
				t.Error("the inner packet changed")
			}
			if ip4, ok := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4); ok && tc.src.To4() != nil {
				if !ip4.SrcIP.Equal(tc.src) || !ip4.DstIP.Equal(tc.dst) || ip4.Protocol != layers.IPProtocolUDP ||
					ip4.TTL != OuterTTL || ip4.Flags != layers.IPv4DontFragment || int(ip4.Length) != len(out) || ip4.TOS != 0xb8 {
					t.Errorf("outer IPv4 %+v", ip4)
				}
				if udp.Checksum != 0 {
					t.Errorf("UDP checksum %#04x over IPv4, want 0", udp.Checksum)
				}
				if err := verify4(out[:20]); err != nil {
					t.Error(err)
				}
			}
			if ip6, ok := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6); ok && tc.src.To4() == nil {
				if !ip6.SrcIP.Equal(tc.src) || !ip6.DstIP.Equal(tc.dst) || ip6.NextHeader != layers.IPProtocolUDP ||
					ip6.HopLimit != OuterTTL || ip6.FlowLabel != 0x12345 || int(ip6.Length) != len(in)+8 || ip6.TrafficClass != 0xb8 {
					t.Errorf("outer IPv6 %+v", ip6)
				}
				// gopacket recomputes the checksum from the layers; it
				// must equal what GUE6 wrote.
				want := udp.Checksum
				u := &layers.UDP{SrcPort: udp.SrcPort, DstPort: udp.DstPort}
				if err := u.SetNetworkLayerForChecksum(ip6); err != nil {
					t.Fatal(err)
				}
				sb := gopacket.NewSerializeBuffer()
				if err := gopacket.SerializeLayers(sb, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, u, gopacket.Payload(in)); err != nil {
					t.Fatal(err)
				}
				got := uint16(sb.Bytes()[6])<<8 | uint16(sb.Bytes()[7])
				if want == 0 || got != want {
					t.Errorf("UDP checksum %#04x, gopacket computes %#04x", want, got)
				}
			}
		})
	}
}

// verify4 checks an IPv4 header's checksum by summing it.
func verify4(h []byte) error {
	var s uint32
	for i := 0; i < len(h); i += 2 {
		s += uint32(h[i])<<8 | uint32(h[i+1])
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	if s != 0xffff {
		return &net.ParseError{Type: "IPv4 header checksum", Text: "does not verify"}
	}
	return nil
}

// TestSourcePort: the dynamic range, and spread over it.
func TestSourcePort(t *testing.T) {
	seen := map[uint16]bool{}
	for i := uint64(0); i < 1<<12; i++ {
		h := i * 0x9e3779b97f4a7c15 >> 7
		p := SourcePort(h)
		if p < 49152 {
			t.Fatalf("SourcePort(%#x) = %d, below the dynamic range", h, p)
		}
		seen[p] = true
	}
	if len(seen) < 3500 {
		t.Errorf("4096 hashes gave %d distinct ports", len(seen))
	}
	if SourcePort(^uint64(0)) != 65535 || SourcePort(0) != 49152 {
		t.Error("range ends")
	}
}

func TestGUEAllocs(t *testing.T) {
	buf := make([]byte, 2048)
	var s, d [16]byte
	if n := testing.AllocsPerRun(100, func() {
		GUE4(buf, 64, 1000, [4]byte{198, 18, 0, 1}, [4]byte{198, 18, 0, 2}, 50000, 6080)
		GUE6(buf, 64, 1000, &s, &d, 1, 50000, 6080)
	}); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

// TestOuter4Checksum: outer4 sums the header from the values it writes;
// the result must be the header's checksum as packet.IPv4 computes it
// from the bytes, over TOS, lengths, protocols and addresses that make
// every 16-bit word of the header vary, carries included.
func TestOuter4Checksum(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, 64)
	for n := 0; n < 100_000; n++ {
		tos := uint8(rng.Uint32())
		total := int(rng.Uint32N(65536))
		proto := uint8(rng.Uint32())
		var src, dst [4]byte
		binary.BigEndian.PutUint32(src[:], rng.Uint32())
		binary.BigEndian.PutUint32(dst[:], rng.Uint32())
		if n < 4 { // the extremes
			src, dst = [4]byte{0xff, 0xff, 0xff, 0xff}, [4]byte{0xff, 0xff, 0xff, 0xff}
			total, tos, proto = 0xffff, 0xff, 0xff
			if n%2 == 1 {
				src, dst, total, tos, proto = [4]byte{}, [4]byte{}, 0, 0, 0
			}
		}
		for i := range buf {
			buf[i] = 0xa5 // what the headroom held before
		}
		buf[30+1] = tos
		outer4(buf, 10, 30, total, proto, src, dst)
		h := packet.IPv4(buf[10:30])
		got := h.Checksum()
		h.SetChecksum(0)
		if want := h.ComputeChecksum(); got != want {
			t.Fatalf("tos %#x total %d proto %d %v → %v: checksum %#04x, want %#04x", tos, total, proto, src, dst, got, want)
		}
		h.SetChecksum(got)
		if h.TTL() != OuterTTL || h.Protocol() != proto || h.SourceAddress() != src || h.DestinationAddress() != dst || int(h.TotalLength()) != total || buf[11] != tos || buf[10] != 0x45 {
			t.Fatalf("header %x", buf[10:30])
		}
	}
}
