package packet

import (
	"bytes"
	"net"
	"testing"

	"github.com/google/gopacket/layers"
)

func TestIPv6View(t *testing.T) {
	frame := tcp6Frame(t)
	ip := IPv6(frame[14:])
	if err := ip.Validate(); err != nil {
		t.Fatal(err)
	}
	g := decode(t, frame).Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	checks := []struct {
		what      string
		got, want any
	}{
		{"Version", ip.Version(), g.Version},
		{"TrafficClass", ip.TrafficClass(), g.TrafficClass},
		{"FlowLabel", ip.FlowLabel(), g.FlowLabel},
		{"PayloadLength", ip.PayloadLength(), g.Length},
		{"NextHeader", ip.NextHeader(), uint8(g.NextHeader)},
		{"HopLimit", ip.HopLimit(), g.HopLimit},
		{"SourceAddress", net.IP(ip.SourceAddress()[:]).String(), g.SrcIP.String()},
		{"DestinationAddress", net.IP(ip.DestinationAddress()[:]).String(), g.DstIP.String()},
		{"Payload", len(ip.Payload()), len(g.Payload)},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, gopacket %v", c.what, c.got, c.want)
		}
	}
}

func TestIPv6Setters(t *testing.T) {
	frame := tcp6Frame(t)
	f := mustParse(t, frame)
	ip, tcp := f.IPv6(frame), f.TCP(frame)
	newDst := [16]byte(net.ParseIP("2001:2::7:9"))
	newSrc := [16]byte(net.ParseIP("2001:2:0:ffff::1"))

	// The old address is read through the aliasing pointer before the
	// write, as the pipeline will do.
	tcp.UpdatePseudoHeaderAddress6(ip.DestinationAddress(), &newDst)
	ip.SetDestinationAddress(&newDst)
	old := *ip.SourceAddress()
	ip.SetSourceAddress(&newSrc)
	tcp.UpdatePseudoHeaderAddress6(&old, &newSrc)
	if !ip.DecHopLimit() {
		t.Fatal("DecHopLimit refused 64")
	}
	g := checkChecksums(t, frame).Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	if !bytes.Equal(g.DstIP, newDst[:]) || !bytes.Equal(g.SrcIP, newSrc[:]) || g.HopLimit != 63 {
		t.Fatalf("gopacket reads %v -> %v hop limit %d", g.SrcIP, g.DstIP, g.HopLimit)
	}

	// The returned pointer aliases the packet.
	ip.DestinationAddress()[15] = 0x42
	if g := decode(t, frame).Layer(layers.LayerTypeIPv6).(*layers.IPv6); g.DstIP[15] != 0x42 {
		t.Errorf("write through DestinationAddress did not reach the packet")
	}

	for _, hl := range []uint8{1, 0} {
		ip.SetHopLimit(hl)
		if ip.DecHopLimit() || ip.HopLimit() != hl {
			t.Errorf("DecHopLimit at %d returned true or changed it", hl)
		}
	}
	ip.SetNextHeader(17)
	ip.SetPayloadLength(3)
	if ip.NextHeader() != 17 || ip.PayloadLength() != 3 {
		t.Errorf("raw setters: next header %d, payload length %d", ip.NextHeader(), ip.PayloadLength())
	}
}

func TestIPv6ExtHeadersFragment(t *testing.T) {
	cases := []struct {
		name   string
		frag   rawLayer
		off    uint16
		more   bool
		isFrag bool
	}{
		{"first", fragment6(6, 0, true, 0xcafef00d), 0, true, true},
		{"middle", fragment6(6, 1448, true, 0xcafef00d), 1448, true, true},
		{"last", fragment6(6, 2896, false, 0xcafef00d), 2896, false, true},
		{"atomic", fragment6(6, 0, false, 0xcafef00d), 0, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			frame := ip6Chain(t, 0, []rawLayer{hopByHop(44), c.frag}, payload)
			var x IPv6ExtHeaders
			if err := IPv6(frame[14:]).ExtHeaders(&x); err != nil {
				t.Fatal(err)
			}
			want := IPv6ExtHeaders{Proto: 6, Off: 56, FragHdrOff: 48, Frag: c.isFrag, FragOff: c.off, More: c.more, FragID: 0xcafef00d}
			if x != want {
				t.Fatalf("ExtHeaders:\n got %+v\nwant %+v", x, want)
			}
			g := decode(t, frame).Layer(layers.LayerTypeIPv6Fragment).(*layers.IPv6Fragment)
			fh := IPv6Fragment(frame[14+x.FragHdrOff:])
			if fh.NextHeader() != uint8(g.NextHeader) || fh.FragmentOffset() != g.FragmentOffset*8 ||
				fh.More() != g.MoreFragments || fh.Identification() != g.Identification {
				t.Errorf("fragment view %d %d %v %#x, gopacket %+v", fh.NextHeader(), fh.FragmentOffset(), fh.More(), fh.Identification(), g)
			}
			f := mustParse(t, frame)
			if fv := f.IPv6Fragment(frame); fv.Identification() != 0xcafef00d {
				t.Errorf("Frame.IPv6Fragment reads id %#x", fv.Identification())
			}
		})
	}
}

// TestIPv6ExtHeadersRouted: a Routing header with segments left makes the
// destination a waypoint (Routed), in any position of the chain; one with
// none left, the destination is the last address, and Routed is false.
func TestIPv6ExtHeadersRouted(t *testing.T) {
	left := func(r rawLayer, n uint8) rawLayer {
		r = append(rawLayer(nil), r...)
		r[3] = n
		return r
	}
	cases := []struct {
		name   string
		first  uint8
		ext    []rawLayer
		routed bool
	}{
		{"no routing header", 0, []rawLayer{hopByHop(6)}, false},
		{"segments left 0", 43, []rawLayer{routing0(6)}, false},
		{"segments left 1", 43, []rawLayer{left(routing0(6), 1)}, true},
		{"segments left 255, after options", 0, []rawLayer{hopByHop(60), dstOpts(43), left(routing0(6), 255)}, true},
		{"before a first fragment", 43, []rawLayer{left(routing0(44), 1), fragment6(6, 0, true, 7)}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			frame := ip6Chain(t, c.first, c.ext, payload)
			var x IPv6ExtHeaders
			if err := IPv6(frame[14:]).ExtHeaders(&x); err != nil {
				t.Fatal(err)
			}
			if x.Routed != c.routed || x.Proto != 6 {
				t.Errorf("ExtHeaders: Routed %v, Proto %d; want %v, 6", x.Routed, x.Proto, c.routed)
			}
			if f := mustParse(t, frame); f.Routed != c.routed {
				t.Errorf("Parse: Frame.Routed %v, want %v", f.Routed, c.routed)
			}
		})
	}
}
