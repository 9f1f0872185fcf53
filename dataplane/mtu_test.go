package dataplane

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"sort"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

func payloadOf(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return b
}

// TestTooBigDF checks the ICMP answer to a packet that does not fit the
// egress MTU and must not be fragmented (RFC 792/1191, RFC 4443 §3.2).
func TestTooBigDF(t *testing.T) {
	tests := []struct {
		name    string
		p       pk
		mtu     int // egress MTU
		wantMTU int // advertised
		gue     bool
	}{
		{"dsr4 needs 20 bytes", pk{src: client4, dst: vipDSR4, sport: 1, dport: 80, flags: "A", payload: payloadOf(1400 - 20 - 40 + 1)}, 1400, 1380, false},
		{"nat4 smaller egress", pk{src: client4, dst: vipNAT4, sport: 2, dport: 80, flags: "A", payload: payloadOf(1400 - 40 + 1)}, 1400, 1400, false},
		{"dsr6 needs 40 bytes", pk{src: client6, dst: vipDSR6, sport: 3, dport: 80, flags: "A", payload: payloadOf(1400 - 40 - 60 + 1)}, 1400, 1360, false},
		{"nat6", pk{src: client6, dst: vipNAT6, sport: 4, dport: 80, flags: "A", payload: payloadOf(1400 - 60 + 1)}, 1400, 1400, false},
		{"dsr4 gue needs 28 bytes", pk{src: client4, dst: vipDSR4, sport: 5, dport: 80, flags: "A", payload: payloadOf(1400 - 28 - 40 + 1)}, 1400, 1372, true},
		{"dsr6 gue needs 48 bytes", pk{src: client6, dst: vipDSR6, sport: 6, dport: 80, flags: "A", payload: payloadOf(1400 - 48 - 60 + 1)}, 1400, 1352, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := testSpec()
			spec.MTU[PortEgress] = tt.mtu
			for i := range spec.VIPs {
				if tt.gue && spec.VIPs[i].Mode == ModeDSR {
					spec.VIPs[i].Encap = EncapGUE
				}
			}
			h := newHarness(t, spec)
			in := build(t, tt.p)
			orig := append([]byte(nil), in[14:]...)
			d := h.run(in)[0]
			if d.Verdict != VerdictReply || d.Port != PortIngress {
				t.Fatalf("verdict %v port %d reason %v, want reply on ingress", d.Verdict, d.Port, d.Reason)
			}
			out := decode(t, d.frame())
			eth := layerOf[*layers.Ethernet](t, out, 0)
			if mac(eth.DstMAC) != macClient || mac(eth.SrcMAC) != macIngress {
				t.Errorf("MACs %v -> %v, want back to the sender", eth.SrcMAC, eth.DstMAC)
			}
			var quote []byte
			if tt.p.src.Is4() {
				ip := layerOf[*layers.IPv4](t, out, 0)
				if addrOf(ip.SrcIP) != tt.p.dst || addrOf(ip.DstIP) != tt.p.src || ip.Protocol != layers.IPProtocolICMPv4 || ip.TTL != 64 {
					t.Errorf("reply header %v -> %v proto %v ttl %d", ip.SrcIP, ip.DstIP, ip.Protocol, ip.TTL)
				}
				if ip.Length > 576 {
					t.Errorf("ICMPv4 error of %d bytes, RFC 1812 allows 576", ip.Length)
				}
				if ip.Id == 0 && ip.Flags&layers.IPv4DontFragment == 0 {
					t.Errorf("ID 0 without DF: only an atomic datagram may repeat its ID (RFC 6864 §4.1)")
				}
				ic := layerOf[*layers.ICMPv4](t, out, 0)
				if ic.TypeCode != layers.CreateICMPv4TypeCode(3, 4) {
					t.Errorf("type/code %v, want 3/4", ic.TypeCode)
				}
				if int(ic.Seq) != tt.wantMTU { // gopacket names the next-hop MTU field Seq
					t.Errorf("advertised MTU %d, want %d", ic.Seq, tt.wantMTU)
				}
				quote = ic.Payload
			} else {
				ip := layerOf[*layers.IPv6](t, out, 0)
				if addrOf(ip.SrcIP) != tt.p.dst || addrOf(ip.DstIP) != tt.p.src || ip.NextHeader != layers.IPProtocolICMPv6 {
					t.Errorf("reply header %v -> %v next %v", ip.SrcIP, ip.DstIP, ip.NextHeader)
				}
				if 40+int(ip.Length) > 1280 {
					t.Errorf("ICMPv6 error of %d bytes exceeds the minimum MTU", 40+int(ip.Length))
				}
				ic := layerOf[*layers.ICMPv6](t, out, 0)
				if ic.TypeCode != layers.CreateICMPv6TypeCode(2, 0) {
					t.Errorf("type/code %v, want 2/0", ic.TypeCode)
				}
				if m := binary.BigEndian.Uint32(ic.Payload[:4]); int(m) != tt.wantMTU {
					t.Errorf("advertised MTU %d, want %d", m, tt.wantMTU)
				}
				quote = ic.Payload[4:]
			}
			if len(quote) < 28 || !bytes.Equal(quote, orig[:len(quote)]) {
				t.Errorf("the quote is not the start of the offending packet (%d bytes)", len(quote))
			}
			c := h.w.Counters()
			if c.ICMPSent != 1 || c.Drops[DropTooBig] != 1 {
				t.Errorf("icmp sent %d, too_big drops %d", c.ICMPSent, c.Drops[DropTooBig])
			}
		})
	}
}

func TestTooBigRateLimited(t *testing.T) {
	spec := testSpec()
	spec.MTU[PortEgress] = 1300
	h := newHarness(t, spec)
	var frames [][]byte
	for i := 0; i < 60; i++ {
		frames = append(frames, build(t, pk{src: client4, dst: vipDSR4, sport: uint16(i + 1), dport: 80, flags: "A", payload: payloadOf(1300)}))
	}
	replies := 0
	for _, d := range h.run(frames...) {
		if d.Verdict == VerdictReply {
			replies++
		} else if d.Reason != DropTooBig {
			t.Fatalf("unexpected verdict %v %v", d.Verdict, d.Reason)
		}
	}
	if replies != 50 || h.w.Counters().ICMPRateLimited != 10 {
		t.Errorf("%d replies and %d rate-limited, want the burst of 50 and 10", replies, h.w.Counters().ICMPRateLimited)
	}
	h.now += 1e9 // a second later the bucket has refilled
	if d := h.run(frames[0])[0]; d.Verdict != VerdictReply {
		t.Errorf("after a second: %v", d.Verdict)
	}
}

// reassemble4 puts IPv4 fragments back together and returns the header of
// the first and the datagram's data, checking offsets, MF and sizes.
func reassemble4(t *testing.T, frags []*layers.IPv4, maxTotal int) (*layers.IPv4, []byte) {
	t.Helper()
	sort.Slice(frags, func(i, j int) bool { return frags[i].FragOffset < frags[j].FragOffset })
	var data []byte
	for i, f := range frags {
		if int(f.Length) > maxTotal {
			t.Errorf("fragment %d is %d bytes, over %d", i, f.Length, maxTotal)
		}
		if f.Flags&layers.IPv4DontFragment != 0 {
			t.Errorf("fragment %d has DF", i)
		}
		last := i == len(frags)-1
		if (f.Flags&layers.IPv4MoreFragments != 0) == last {
			t.Errorf("fragment %d: MF %v, last %v", i, f.Flags&layers.IPv4MoreFragments != 0, last)
		}
		if int(f.FragOffset)*8 != len(data) {
			t.Fatalf("fragment %d at offset %d, want %d (hole or overlap)", i, int(f.FragOffset)*8, len(data))
		}
		if !last && len(f.Payload)%8 != 0 {
			t.Errorf("fragment %d carries %d bytes, not a multiple of 8", i, len(f.Payload))
		}
		if f.Id != frags[0].Id || !f.SrcIP.Equal(frags[0].SrcIP) || !f.DstIP.Equal(frags[0].DstIP) || f.Protocol != frags[0].Protocol {
			t.Errorf("fragment %d does not belong to the datagram", i)
		}
		data = append(data, f.Payload...)
	}
	return frags[0], data
}

// outputs returns d's frame and the emitted ones, checked by decode.
func outputs(t *testing.T, h *harness, d *Desc) []gopacket.Packet {
	t.Helper()
	if d.Verdict != VerdictTX {
		t.Fatalf("verdict %v %v", d.Verdict, d.Reason)
	}
	ps := []gopacket.Packet{decode(t, d.frame())}
	for _, e := range h.emit.frames {
		if e.port != d.Port {
			t.Errorf("fragment emitted on port %d, the packet on %d", e.port, d.Port)
		}
		ps = append(ps, decode(t, e.data))
	}
	return ps
}

func TestFragmentDSR(t *testing.T) {
	for _, tc := range []struct {
		name  string
		gue   bool
		piece int // inner fragment size: the MTU less the encapsulation
	}{{"ipip", false, 1380}, {"gue", true, 1372}} {
		t.Run(tc.name, func(t *testing.T) {
			spec := testSpec()
			spec.MTU[PortEgress] = 1400
			if tc.gue {
				spec.VIPs[1].Encap = EncapGUE // dsr4
			}
			h := newHarness(t, spec)
			p := pk{src: client4, dst: vipDSR4, sport: 7, dport: 80, flags: "PA", payload: payloadOf(4000), noDF: true}
			in := build(t, p)
			orig := gopacket.NewPacket(in, layers.LayerTypeEthernet, gopacket.Default)
			origIP := layerOf[*layers.IPv4](t, orig, 0)
			d := h.run(in)[0]
			var inner []*layers.IPv4
			var backend netip.Addr
			var sport layers.UDPPort
			for i, pkt := range outputs(t, h, d) {
				outer := layerOf[*layers.IPv4](t, pkt, 0)
				want := layers.IPProtocolIPv4
				if tc.gue {
					want = layers.IPProtocolUDP
				}
				if outer.Protocol != want || int(outer.Length) > 1400 || outer.Flags&layers.IPv4DontFragment == 0 {
					t.Errorf("frame %d: outer proto %v length %d flags %v", i, outer.Protocol, outer.Length, outer.Flags)
				}
				if i == 0 {
					backend = addrOf(outer.DstIP)
				} else if addrOf(outer.DstIP) != backend {
					t.Errorf("fragments went to %v and %v", backend, outer.DstIP)
				}
				if !tc.gue {
					inner = append(inner, layerOf[*layers.IPv4](t, pkt, 1))
					continue
				}
				udp := layerOf[*layers.UDP](t, pkt, 0)
				if i == 0 {
					sport = udp.SrcPort
				} else if udp.SrcPort != sport {
					t.Errorf("fragments came from UDP ports %d and %d", sport, udp.SrcPort)
				}
				in := gopacket.NewPacket(udp.Payload, layers.LayerTypeIPv4, gopacket.Default)
				inner = append(inner, layerOf[*layers.IPv4](t, in, 0))
			}
			if len(inner) != 3 {
				t.Errorf("%d fragments, want 3 for 4040 bytes of data in %d-byte pieces", len(inner), tc.piece)
			}
			first, data := reassemble4(t, inner, tc.piece)
			if !bytes.Equal(data, origIP.Payload) {
				t.Errorf("reassembled data differs from the original")
			}
			if first.TTL != origIP.TTL || first.Id != origIP.Id {
				t.Errorf("inner header changed: ttl %d id %d", first.TTL, first.Id)
			}
			if h.w.Counters().FragmentsOut != 3 {
				t.Errorf("FragmentsOut %d", h.w.Counters().FragmentsOut)
			}
		})
	}
}

func TestFragmentNAT(t *testing.T) {
	spec := testSpec()
	spec.MTU[PortEgress] = 1000
	h := newHarness(t, spec)
	p := pk{src: client4, dst: vipNAT4, sport: 9, dport: 80, flags: "PA", payload: payloadOf(2500), noDF: true}
	d := h.run(build(t, p))[0]
	var frags []*layers.IPv4
	for _, pkt := range outputs(t, h, d) {
		frags = append(frags, layerOf[*layers.IPv4](t, pkt, 0))
	}
	first, data := reassemble4(t, frags, 1000)
	if first.TTL != 63 || addrOf(first.DstIP) != netip.AddrFrom4([4]byte(first.DstIP.To4())) {
		t.Errorf("first fragment: ttl %d", first.TTL)
	}
	// Rebuild the datagram and let gopacket check the translated segment.
	whole := &layers.IPv4{Version: 4, TTL: first.TTL, Protocol: first.Protocol, SrcIP: first.SrcIP, DstIP: first.DstIP, Id: first.Id}
	buf := serialize(t, &layers.Ethernet{SrcMAC: net.HardwareAddr(macClient[:]), DstMAC: net.HardwareAddr(macClient[:]), EthernetType: layers.EthernetTypeIPv4}, whole, gopacket.Payload(data))
	pkt := decode(t, buf) // verifies the reassembled TCP checksum
	tcp := layerOf[*layers.TCP](t, pkt, 0)
	if tcp.DstPort != 8080 || !bytes.Equal(tcp.Payload, p.payload) {
		t.Errorf("reassembled segment: port %d, payload intact %v", tcp.DstPort, bytes.Equal(tcp.Payload, p.payload))
	}
	if _, err := netip.ParseAddr(first.DstIP.String()); err != nil || !bytes.HasPrefix(first.DstIP.To4(), []byte{198, 18, 1}) {
		t.Errorf("not translated to a backend: %v", first.DstIP)
	}
}

func TestFragmentNoTxFrame(t *testing.T) {
	spec := testSpec()
	spec.MTU[PortEgress] = 1000
	h := newHarness(t, spec)
	h.emit.limit = 1
	d := h.run(build(t, pk{src: client4, dst: vipNAT4, sport: 9, dport: 80, flags: "PA", payload: payloadOf(2500), noDF: true}))[0]
	if d.Verdict != VerdictDrop || d.Reason != DropNoTxFrame {
		t.Errorf("verdict %v %v, want drop no_tx_frame", d.Verdict, d.Reason)
	}
}

// TestReplyTooBig: a NAT reply larger than the client-side MTU with DF
// set is answered toward the backend, from the box's own address.
func TestReplyTooBig(t *testing.T) {
	spec := testSpec()
	spec.MTU[PortIngress] = 1300
	h := newHarness(t, spec)
	p := pk{src: netip.MustParseAddr("198.18.1.11"), dst: client4, sport: 8080, dport: 40001, flags: "A", payload: payloadOf(1400), srcMAC: macOf(1)}
	d := h.runOn(PortEgress, build(t, p))
	if d.Verdict != VerdictReply || d.Port != PortEgress {
		t.Fatalf("verdict %v port %d %v", d.Verdict, d.Port, d.Reason)
	}
	out := decode(t, d.frame())
	ip := layerOf[*layers.IPv4](t, out, 0)
	if addrOf(ip.SrcIP) != encap4 || addrOf(ip.DstIP) != p.src { // the egress port's own address
		t.Errorf("frag-needed %v -> %v, want from the egress port to the backend", ip.SrcIP, ip.DstIP)
	}
	if ic := layerOf[*layers.ICMPv4](t, out, 0); ic.Seq != 1300 {
		t.Errorf("MTU %d, want 1300", ic.Seq)
	}
}

// TestFragmentReply: a NAT reply too big for the client-side MTU with DF
// clear is translated, then fragmented toward the client's next hop.
func TestFragmentReply(t *testing.T) {
	spec := testSpec()
	spec.MTU[PortIngress] = 1000
	h := newHarness(t, spec)
	p := pk{src: netip.MustParseAddr("198.18.1.11"), dst: client4, sport: 8080, dport: 40001, flags: "PA", payload: payloadOf(2500), noDF: true, srcMAC: macOf(1)}
	h.emit.frames = nil
	d := h.runOn(PortEgress, build(t, p))
	if d.Port != PortIngress {
		t.Fatalf("sent on port %d", d.Port)
	}
	var frags []*layers.IPv4
	for _, pkt := range outputs(t, h, d) {
		if eth := layerOf[*layers.Ethernet](t, pkt, 0); mac(eth.DstMAC) != macGateway {
			t.Errorf("fragment to %v, want the gateway", eth.DstMAC)
		}
		frags = append(frags, layerOf[*layers.IPv4](t, pkt, 0))
	}
	first, data := reassemble4(t, frags, 1000)
	if addrOf(first.SrcIP) != vipNAT4 || first.TTL != 63 {
		t.Errorf("reply fragments from %v ttl %d, want from the VIP, ttl 63", first.SrcIP, first.TTL)
	}
	whole := &layers.IPv4{Version: 4, TTL: first.TTL, Protocol: first.Protocol, SrcIP: first.SrcIP, DstIP: first.DstIP, Id: first.Id}
	pkt := decode(t, serialize(t, &layers.Ethernet{SrcMAC: net.HardwareAddr(macClient[:]), DstMAC: net.HardwareAddr(macClient[:]), EthernetType: layers.EthernetTypeIPv4}, whole, gopacket.Payload(data)))
	if tcp := layerOf[*layers.TCP](t, pkt, 0); tcp.SrcPort != 80 || !bytes.Equal(tcp.Payload, p.payload) {
		t.Errorf("reassembled reply: source port %d, payload intact %v", tcp.SrcPort, bytes.Equal(tcp.Payload, p.payload))
	}
}
