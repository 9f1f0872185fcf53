package dataplane

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"

	"github.com/google/gopacket/layers"
)

// backendAddr returns the address of backend ref in spec.
func backendAddr(t testing.TB, spec *Spec, ref uint32) netip.Addr {
	for _, v := range spec.VIPs {
		for _, b := range v.Backends {
			if b.Ref == ref {
				return b.Addr
			}
		}
	}
	t.Fatalf("no backend %d", ref)
	return netip.Addr{}
}

// refOf returns the ref of the backend with address a in VIP id.
func refOf(t testing.TB, spec *Spec, id uint16, a netip.Addr) uint32 {
	for _, v := range spec.VIPs {
		if v.ID != id {
			continue
		}
		for _, b := range v.Backends {
			if b.Addr == a {
				return b.Ref
			}
		}
	}
	t.Fatalf("VIP %d has no backend %v", id, a)
	return 0
}

func TestNATForward(t *testing.T) {
	tests := []struct {
		name      string
		p         pk
		vipID     uint16
		dport     uint16 // expected destination port after NAT
		wantProto layers.IPProtocol
	}{
		{"tcp4 syn", pk{src: client4, dst: vipNAT4, sport: 40001, dport: 80, flags: "S"}, idNAT4, 8080, layers.IPProtocolTCP},
		{"tcp4 data", pk{src: client4, dst: vipNAT4, sport: 40002, dport: 80, flags: "PA", payload: []byte("GET / HTTP/1.1\r\n\r\n")}, idNAT4, 8080, layers.IPProtocolTCP},
		{"udp4", pk{src: client4, dst: vipUDP4, sport: 5000, dport: 7000, proto: layers.IPProtocolUDP, payload: []byte("query")}, idUDP4, 7001, layers.IPProtocolUDP},
		{"udp4 no checksum", pk{src: client4, dst: vipUDP4, sport: 5001, dport: 7000, proto: layers.IPProtocolUDP, payload: []byte("q"), udpNoCsum: true}, idUDP4, 7001, layers.IPProtocolUDP},
		{"every-port VIP keeps port", pk{src: client4, dst: vipAll4, sport: 5002, dport: 4443, flags: "S"}, idAll4, 4443, layers.IPProtocolTCP},
		{"tcp6", pk{src: client6, dst: vipNAT6, sport: 40003, dport: 80, flags: "S", payload: []byte("x")}, idNAT6, 8080, layers.IPProtocolTCP},
		{"vlan tagged", pk{src: client4, dst: vipNAT4, sport: 40004, dport: 80, flags: "S", vlan: 42}, idNAT4, 8080, layers.IPProtocolTCP},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := testSpec()
			h := newHarness(t, spec)
			in := build(t, tt.p)
			d := h.run(in)[0]
			if d.Verdict != VerdictTX || d.Port != PortEgress {
				t.Fatalf("verdict %v port %d reason %v, want tx on egress", d.Verdict, d.Port, d.Reason)
			}
			out := decode(t, d.frame())
			eth := layerOf[*layers.Ethernet](t, out, 0)
			var dst netip.Addr
			var ttl uint8
			if tt.p.src.Is4() {
				ip := layerOf[*layers.IPv4](t, out, 0)
				dst, ttl = addrOf(ip.DstIP), ip.TTL
				if addrOf(ip.SrcIP) != tt.p.src {
					t.Errorf("source %v changed", ip.SrcIP)
				}
				if ip.Id != 0x4242 || ip.Flags&layers.IPv4DontFragment == 0 {
					t.Errorf("id/flags changed: %#x %v", ip.Id, ip.Flags)
				}
			} else {
				ip := layerOf[*layers.IPv6](t, out, 0)
				dst, ttl = addrOf(ip.DstIP), ip.HopLimit
			}
			if ttl != 63 {
				t.Errorf("TTL %d, want 63 (decremented)", ttl)
			}
			ref := refOf(t, spec, tt.vipID, dst)
			if mac(eth.DstMAC) != macOf(ref) || mac(eth.SrcMAC) != macEgress {
				t.Errorf("MACs %v -> %v, want %x -> %x", eth.SrcMAC, eth.DstMAC, macEgress, macOf(ref))
			}
			if tt.p.vlan != 0 {
				if q := layerOf[*layers.Dot1Q](t, out, 0); q.VLANIdentifier != tt.p.vlan {
					t.Errorf("VLAN %d, want %d", q.VLANIdentifier, tt.p.vlan)
				}
			}
			var sport, dport uint16
			var payload []byte
			switch tt.wantProto {
			case layers.IPProtocolTCP:
				tcp := layerOf[*layers.TCP](t, out, 0)
				sport, dport, payload = uint16(tcp.SrcPort), uint16(tcp.DstPort), tcp.Payload
			case layers.IPProtocolUDP:
				udp := layerOf[*layers.UDP](t, out, 0)
				sport, dport, payload = uint16(udp.SrcPort), uint16(udp.DstPort), udp.Payload
				if tt.p.udpNoCsum && udp.Checksum != 0 {
					t.Errorf("UDP checksum %#x, want 0 kept (no checksum)", udp.Checksum)
				}
			}
			if sport != tt.p.sport || dport != tt.dport {
				t.Errorf("ports %d -> %d, want %d -> %d", sport, dport, tt.p.sport, tt.dport)
			}
			if !bytes.Equal(payload, tt.p.payload) && len(tt.p.payload) > 0 {
				t.Errorf("payload changed")
			}
			c := h.w.Counters()
			if c.VIPs[tt.vipID].NewFlows != 1 || c.Backends[ref].Packets != 1 {
				t.Errorf("counters: vip new flows %d, backend packets %d", c.VIPs[tt.vipID].NewFlows, c.Backends[ref].Packets)
			}
		})
	}
}

// TestFlowSticksToBackend sends many packets of several flows and checks
// each flow stays on one backend and that flows spread over all backends.
func TestFlowSticksToBackend(t *testing.T) {
	spec := testSpec()
	h := newHarness(t, spec)
	seen := map[netip.Addr]bool{}
	for port := uint16(1000); port < 1100; port++ {
		var first netip.Addr
		for i, flags := range []string{"S", "A", "PA", "FA"} {
			d := h.run(build(t, pk{src: client4, dst: vipNAT4, sport: port, dport: 80, flags: flags}))[0]
			ip := layerOf[*layers.IPv4](t, decode(t, d.frame()), 0)
			if i == 0 {
				first = addrOf(ip.DstIP)
				seen[first] = true
			} else if addrOf(ip.DstIP) != first {
				t.Fatalf("flow %d moved from %v to %v", port, first, ip.DstIP)
			}
		}
	}
	if len(seen) != 3 {
		t.Errorf("100 flows reached %d backends, want 3", len(seen))
	}
	c := h.w.Counters()
	if c.FlowMisses != 100 || c.FlowHits != 300 {
		t.Errorf("conntrack misses %d hits %d, want 100 and 300", c.FlowMisses, c.FlowHits)
	}
}

func TestNATReply(t *testing.T) {
	tests := []struct {
		name  string
		p     pk
		vip   netip.Addr
		sport uint16
	}{
		{"tcp4", pk{src: netip.MustParseAddr("198.18.1.12"), dst: client4, sport: 8080, dport: 40001, flags: "SA", payload: []byte("hello")}, vipNAT4, 80},
		{"udp4", pk{src: netip.MustParseAddr("198.18.1.31"), dst: client4, sport: 7001, dport: 5000, proto: layers.IPProtocolUDP, payload: []byte("answer")}, vipUDP4, 7000},
		{"every-port VIP", pk{src: netip.MustParseAddr("198.18.1.42"), dst: client4, sport: 4443, dport: 5002, flags: "A"}, vipAll4, 4443},
		{"tcp6", pk{src: netip.MustParseAddr("2001:2:1::13"), dst: client6, sport: 8080, dport: 40003, flags: "SA"}, vipNAT6, 80},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, testSpec())
			tt.p.srcMAC = macOf(1)
			d := h.runOn(PortEgress, build(t, tt.p))
			if d.Verdict != VerdictTX || d.Port != PortIngress {
				t.Fatalf("verdict %v port %d reason %v, want tx on ingress", d.Verdict, d.Port, d.Reason)
			}
			out := decode(t, d.frame())
			eth := layerOf[*layers.Ethernet](t, out, 0)
			if mac(eth.DstMAC) != macGateway || mac(eth.SrcMAC) != macIngress {
				t.Errorf("MACs %v -> %v, want ingress -> gateway", eth.SrcMAC, eth.DstMAC)
			}
			var src, dst netip.Addr
			if tt.vip.Is4() {
				ip := layerOf[*layers.IPv4](t, out, 0)
				src, dst = addrOf(ip.SrcIP), addrOf(ip.DstIP)
			} else {
				ip := layerOf[*layers.IPv6](t, out, 0)
				src, dst = addrOf(ip.SrcIP), addrOf(ip.DstIP)
			}
			if src != tt.vip || dst != tt.p.dst {
				t.Errorf("%v -> %v, want %v -> %v", src, dst, tt.vip, tt.p.dst)
			}
			var sport, dport uint16
			if tt.p.proto == layers.IPProtocolUDP {
				u := layerOf[*layers.UDP](t, out, 0)
				sport, dport = uint16(u.SrcPort), uint16(u.DstPort)
			} else {
				c := layerOf[*layers.TCP](t, out, 0)
				sport, dport = uint16(c.SrcPort), uint16(c.DstPort)
			}
			if sport != tt.sport || dport != tt.p.dport {
				t.Errorf("ports %d -> %d, want %d -> %d", sport, dport, tt.sport, tt.p.dport)
			}
			if h.w.Counters().Replies != 1 {
				t.Errorf("replies counter %d", h.w.Counters().Replies)
			}
		})
	}
}

func TestNATReplyOnLinkClient(t *testing.T) {
	spec := testSpec()
	spec.ClientOnLink = []netip.Prefix{netip.MustParsePrefix("198.18.0.0/24")}
	spec.Neighbors = map[netip.Addr][6]byte{client4: macClient}
	h := newHarness(t, spec)
	p := pk{src: netip.MustParseAddr("198.18.1.11"), dst: client4, sport: 8080, dport: 40001, flags: "A", srcMAC: macOf(1)}
	d := h.runOn(PortEgress, build(t, p))
	if d.Verdict != VerdictTX {
		t.Fatalf("verdict %v %v", d.Verdict, d.Reason)
	}
	if eth := layerOf[*layers.Ethernet](t, decode(t, d.frame()), 0); mac(eth.DstMAC) != macClient {
		t.Errorf("dst MAC %v, want the on-link client's", eth.DstMAC)
	}
	p.dst = netip.MustParseAddr("198.18.0.77") // on-link, MAC unknown
	if d := h.runOn(PortEgress, build(t, p)); d.Verdict != VerdictDrop || d.Reason != DropNoNeighbor {
		t.Errorf("unknown on-link client: %v %v, want drop no_neighbor", d.Verdict, d.Reason)
	}
}

func TestDSREncap(t *testing.T) {
	tests := []struct {
		name string
		p    pk
		id   uint16
	}{
		{"ipv4 in ipv4", pk{src: client4, dst: vipDSR4, sport: 40001, dport: 80, flags: "S", payload: []byte("hi")}, idDSR4},
		{"ipv4 vlan", pk{src: client4, dst: vipDSR4, sport: 40002, dport: 80, flags: "A", vlan: 7}, idDSR4},
		{"ipv6 in ipv6", pk{src: client6, dst: vipDSR6, sport: 40003, dport: 80, flags: "S", payload: []byte("hi")}, idDSR6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := testSpec()
			h := newHarness(t, spec)
			in := build(t, tt.p)
			l3 := 14
			if tt.p.vlan != 0 {
				l3 = 18
			}
			inner := append([]byte(nil), in[l3:l3+ipLen(in[l3:])]...) // without Ethernet padding
			d := h.run(in)[0]
			if d.Verdict != VerdictTX || d.Port != PortEgress {
				t.Fatalf("verdict %v port %d reason %v", d.Verdict, d.Port, d.Reason)
			}
			out := decode(t, d.frame())
			eth := layerOf[*layers.Ethernet](t, out, 0)
			var outerDst netip.Addr
			var got []byte
			if tt.p.src.Is4() {
				o := layerOf[*layers.IPv4](t, out, 0)
				if o.Protocol != layers.IPProtocolIPv4 || o.TTL != 64 || o.Flags&layers.IPv4DontFragment == 0 || addrOf(o.SrcIP) != encap4 {
					t.Errorf("outer header: proto %v ttl %d flags %v src %v", o.Protocol, o.TTL, o.Flags, o.SrcIP)
				}
				outerDst, got = addrOf(o.DstIP), o.Payload
			} else {
				o := layerOf[*layers.IPv6](t, out, 0)
				if o.NextHeader != layers.IPProtocolIPv6 || o.HopLimit != 64 || addrOf(o.SrcIP) != encap6 {
					t.Errorf("outer header: next %v hop %d src %v", o.NextHeader, o.HopLimit, o.SrcIP)
				}
				outerDst, got = addrOf(o.DstIP), o.Payload
			}
			if !bytes.Equal(got, inner) {
				t.Errorf("inner packet changed by encapsulation")
			}
			ref := refOf(t, spec, tt.id, outerDst)
			if mac(eth.DstMAC) != macOf(ref) || mac(eth.SrcMAC) != macEgress {
				t.Errorf("MACs %v -> %v", eth.SrcMAC, eth.DstMAC)
			}
			if tt.p.vlan != 0 && layerOf[*layers.Dot1Q](t, out, 0).VLANIdentifier != tt.p.vlan {
				t.Errorf("VLAN tag not passed through")
			}
		})
	}
}

// ipLen returns the length of the IP packet at the start of b, from its
// header (Ethernet padding may follow).
func ipLen(b []byte) int {
	if b[0]>>4 == 4 {
		return int(b[2])<<8 | int(b[3])
	}
	return 40 + (int(b[4])<<8 | int(b[5]))
}

// TestWhere: the control plane's "where would this flow go?" agrees with
// the pipeline for new flows, for 5-tuple and source-affinity VIPs.
func TestWhere(t *testing.T) {
	spec := testSpec()
	h := newHarness(t, spec)
	for _, tc := range []struct {
		vip   netip.Addr
		port  uint16
		id    uint16
		dport uint16
	}{{vipNAT4, 80, idNAT4, 80}, {vipAll4, 0, idAll4, 4443}, {vipDSR6, 80, idDSR6, 80}} {
		client := client4
		if tc.vip.Is6() {
			client = client6
		}
		for sport := uint16(100); sport < 140; sport++ {
			d := h.run(build(t, pk{src: client, dst: tc.vip, sport: sport, dport: tc.dport, flags: "S"}))[0]
			got := refOf(t, spec, tc.id, outerDst(t, decode(t, d.frame()), ModeNAT))
			want, ok := h.snap.Where(tc.vip, 6, tc.dport, netip.AddrPortFrom(client, sport))
			if !ok || want != got {
				t.Fatalf("%v:%d from port %d: pipeline chose ref %d, Where says %d (%v)", tc.vip, tc.dport, sport, got, want, ok)
			}
		}
	}
	if _, ok := h.snap.Where(vipNAT4, 6, 443, netip.AddrPortFrom(client4, 1)); ok {
		t.Errorf("Where answered for a port no VIP serves")
	}
}

// TestDSREncapVariants sends flows to the DSR VIPs under each
// encapsulation — IP in IP from the fixed source, IP in IP from a per-flow
// source of a prefix, GUE — and checks every output with gopacket
// (decode verifies checksums and lengths): the outer protocol and source,
// GUE's ports, the inner packet byte for byte, and that a flow's packets
// keep their outer source and port while different flows spread.
func TestDSREncapVariants(t *testing.T) {
	pf4, pf6 := netip.MustParsePrefix("198.18.1.0/24"), netip.MustParsePrefix("2001:2:1::/112")
	for _, tc := range []struct {
		name  string
		set   func(vs *VIPSpec)
		gue   bool
		flows bool // per-flow outer source
	}{
		{"ipip", func(vs *VIPSpec) {}, false, false},
		{"ipip prefix", func(vs *VIPSpec) {
			vs.EncapSrcPrefix = map[bool]netip.Prefix{false: pf4, true: pf6}[vs.Addr.Is6()]
		}, false, true},
		{"gue", func(vs *VIPSpec) { vs.Encap = EncapGUE }, true, false},
		{"gue port", func(vs *VIPSpec) { vs.Encap, vs.GUEPort = EncapGUE, 7777 }, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := testSpec()
			for i := range spec.VIPs {
				if spec.VIPs[i].Mode == ModeDSR {
					tc.set(&spec.VIPs[i])
				}
			}
			wantPort := uint16(0)
			if tc.gue {
				wantPort = spec.VIPs[1].GUEPort
				if wantPort == 0 {
					wantPort = 6080
				}
			}
			h := newHarness(t, spec)
			for _, fam := range []struct {
				client, vip, src netip.Addr
				pf               netip.Prefix
			}{{client4, vipDSR4, encap4, pf4}, {client6, vipDSR6, encap6, pf6}} {
				type outer struct {
					src   netip.Addr
					sport uint16
				}
				seen := map[uint16]outer{} // by client port
				distinct := map[outer]bool{}
				for round := 0; round < 2; round++ {
					for fl := uint16(0); fl < 32; fl++ {
						p := pk{src: fam.client, dst: fam.vip, sport: 41000 + fl, dport: 80, flags: "A", payload: []byte("data")}
						in := build(t, p)
						inner := append([]byte(nil), in[14:14+ipLen(in[14:])]...)
						d := h.run(in)[0]
						if d.Verdict != VerdictTX {
							t.Fatalf("%v: verdict %v %v", p, d.Verdict, d.Reason)
						}
						out := decode(t, d.frame())
						var o outer
						var payload []byte
						if fam.vip.Is4() {
							ip := layerOf[*layers.IPv4](t, out, 0)
							want := layers.IPProtocolIPv4
							if tc.gue {
								want = layers.IPProtocolUDP
							}
							if ip.Protocol != want || ip.TTL != 64 || ip.Flags&layers.IPv4DontFragment == 0 {
								t.Fatalf("outer IPv4: proto %v ttl %d flags %v", ip.Protocol, ip.TTL, ip.Flags)
							}
							o.src, payload = addrOf(ip.SrcIP), ip.Payload
						} else {
							ip := layerOf[*layers.IPv6](t, out, 0)
							want := layers.IPProtocolIPv6
							if tc.gue {
								want = layers.IPProtocolUDP
							}
							if ip.NextHeader != want || ip.HopLimit != 64 {
								t.Fatalf("outer IPv6: next %v hop limit %d", ip.NextHeader, ip.HopLimit)
							}
							o.src, payload = addrOf(ip.SrcIP), ip.Payload
						}
						if tc.gue {
							udp := layerOf[*layers.UDP](t, out, 0)
							if uint16(udp.DstPort) != wantPort || udp.SrcPort < 49152 || int(udp.Length) != len(inner)+8 {
								t.Fatalf("UDP %d -> %d length %d", udp.SrcPort, udp.DstPort, udp.Length)
							}
							if fam.vip.Is4() && udp.Checksum != 0 {
								t.Errorf("UDP checksum %#04x over IPv4, want 0", udp.Checksum)
							}
							o.sport, payload = uint16(udp.SrcPort), udp.Payload
						}
						if !bytes.Equal(payload, inner) {
							t.Fatalf("the inner packet changed")
						}
						if tc.flows {
							if !fam.pf.Contains(o.src) {
								t.Fatalf("outer source %v outside %v", o.src, fam.pf)
							}
						} else if o.src != fam.src {
							t.Fatalf("outer source %v, want %v", o.src, fam.src)
						}
						if prev, ok := seen[p.sport]; ok && prev != o {
							t.Fatalf("flow %d: outer %+v, then %+v", p.sport, prev, o)
						}
						seen[p.sport] = o
						distinct[o] = true
					}
				}
				if want := 1; tc.flows || tc.gue {
					if len(distinct) < 16 {
						t.Errorf("%v: 32 flows had %d distinct outer sources/ports, want spread", fam.vip, len(distinct))
					}
				} else if len(distinct) != want {
					t.Errorf("%v: %d distinct outer sources/ports, want %d", fam.vip, len(distinct), want)
				}
			}
		})
	}
}

// TestEncapSpecErrors: the encapsulation settings a snapshot refuses.
func TestEncapSpecErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(vs *VIPSpec)
	}{
		{"prefix without the source", func(vs *VIPSpec) { vs.EncapSrcPrefix = netip.MustParsePrefix("198.18.7.0/24") }},
		{"prefix of the other family", func(vs *VIPSpec) { vs.EncapSrcPrefix = netip.MustParsePrefix("2001:2:1::/64") }},
		{"prefix with GUE", func(vs *VIPSpec) {
			vs.Encap, vs.EncapSrcPrefix = EncapGUE, netip.MustParsePrefix("198.18.1.0/24")
		}},
		{"unknown encapsulation", func(vs *VIPSpec) { vs.Encap = 9 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := testSpec()
			tc.set(&spec.VIPs[1]) // dsr4
			if _, err := NewSnapshot(spec); !errors.Is(err, ErrSpec) {
				t.Errorf("NewSnapshot: %v, want ErrSpec", err)
			}
		})
	}
}
