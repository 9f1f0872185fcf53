package dataplane

import (
	"bytes"
	"net"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vipd/vipd/packet"
)

var router4 = netip.MustParseAddr("198.18.0.250")
var router6 = netip.MustParseAddr("2001:2::250")

// quotedTCP returns the whole IP packet a VIP would have sent to a client
// (the packet an ICMP error quotes), with valid checksums.
func quotedTCP(t testing.TB, vip, client netip.Addr, vport, cport uint16) []byte {
	f := build(t, pk{src: vip, dst: client, sport: vport, dport: cport, flags: "PA", payload: payloadOf(40)})
	return f[14 : 14+ipLen(f[14:])]
}

// icmpError builds an ICMP error from a router to dst quoting q.
func icmpError(t testing.TB, from, dst netip.Addr, q []byte) []byte {
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr(macClient[:]), DstMAC: net.HardwareAddr(macIngress[:]), EthernetType: layers.EthernetTypeIPv4}
	if from.Is4() {
		ip := &layers.IPv4{Version: 4, TTL: 60, Protocol: layers.IPProtocolICMPv4, SrcIP: net.IP(from.AsSlice()), DstIP: net.IP(dst.AsSlice())}
		ic := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(3, 4), Seq: 1300}
		return serialize(t, eth, ip, ic, gopacket.Payload(q))
	}
	eth.EthernetType = layers.EthernetTypeIPv6
	ip := &layers.IPv6{Version: 6, HopLimit: 60, NextHeader: layers.IPProtocolICMPv6, SrcIP: net.IP(from.AsSlice()), DstIP: net.IP(dst.AsSlice())}
	ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(2, 0)}
	ic.SetNetworkLayerForChecksum(ip)
	return serialize(t, eth, ip, ic, gopacket.Payload(append([]byte{0, 0, 0x05, 0x14}, q...)))
}

func TestICMPSteering(t *testing.T) {
	tests := []struct {
		name     string
		vip      netip.Addr
		id       uint16
		client   netip.Addr
		router   netip.Addr
		mode     Mode
		pinFirst bool // send the flow's SYN first (conntrack hit) or not (Maglev)
	}{
		{"dsr4 pinned", vipDSR4, idDSR4, client4, router4, ModeDSR, true},
		{"dsr4 unpinned", vipDSR4, idDSR4, client4, router4, ModeDSR, false},
		{"nat4 pinned", vipNAT4, idNAT4, client4, router4, ModeNAT, true},
		{"nat4 unpinned", vipNAT4, idNAT4, client4, router4, ModeNAT, false},
		{"dsr6 pinned", vipDSR6, idDSR6, client6, router6, ModeDSR, true},
		{"nat6 pinned", vipNAT6, idNAT6, client6, router6, ModeNAT, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := testSpec()
			h := newHarness(t, spec)
			// Where does the flow go? Ask a second worker that saw the SYN.
			probe := newHarness(t, spec)
			syn := probe.run(build(t, pk{src: tt.client, dst: tt.vip, sport: 40001, dport: 80, flags: "S"}))[0]
			want := outerDst(t, decode(t, syn.frame()), tt.mode)
			if tt.pinFirst {
				h.run(build(t, pk{src: tt.client, dst: tt.vip, sport: 40001, dport: 80, flags: "S"}))
			}
			q := quotedTCP(t, tt.vip, tt.client, 80, 40001)
			in := icmpError(t, tt.router, tt.vip, q)
			d := h.run(in)[0]
			if d.Verdict != VerdictTX || d.Port != PortEgress {
				t.Fatalf("verdict %v port %d reason %v", d.Verdict, d.Port, d.Reason)
			}
			out := decode(t, d.frame())
			if got := outerDst(t, out, tt.mode); got != want {
				t.Errorf("ICMP error steered to %v, the flow is on %v", got, want)
			}
			if h.w.Counters().ICMPSteered != 1 {
				t.Errorf("ICMPSteered %d", h.w.Counters().ICMPSteered)
			}
			if tt.mode == ModeDSR {
				inner := in[14 : 14+ipLen(in[14:])]
				var got []byte
				if tt.vip.Is4() {
					got = layerOf[*layers.IPv4](t, out, 0).Payload
				} else {
					got = layerOf[*layers.IPv6](t, out, 0).Payload
				}
				if !bytes.Equal(got, inner) {
					t.Errorf("DSR: the ICMP packet was not encapsulated untouched")
				}
				return
			}
			// NAT: the quote must now read backend:8080 -> client, with
			// valid IP and TCP checksums of its own.
			var quote []byte
			var ltype gopacket.LayerType
			if tt.vip.Is4() {
				quote, ltype = layerOf[*layers.ICMPv4](t, out, 0).Payload, layers.LayerTypeIPv4
			} else {
				quote, ltype = layerOf[*layers.ICMPv6](t, out, 0).Payload[4:], layers.LayerTypeIPv6
			}
			qp := gopacket.NewPacket(quote, ltype, gopacket.Default)
			var qsrc netip.Addr
			if tt.vip.Is4() {
				qip := layerOf[*layers.IPv4](t, qp, 0)
				if refSum(qip.Contents, 0) != 0xffff {
					t.Errorf("quoted IPv4 header checksum wrong")
				}
				qsrc = addrOf(qip.SrcIP)
			} else {
				qsrc = addrOf(layerOf[*layers.IPv6](t, qp, 0).SrcIP)
			}
			if qsrc != want {
				t.Errorf("quote source %v, want the backend %v", qsrc, want)
			}
			qtcp := layerOf[*layers.TCP](t, qp, 0)
			if qtcp.SrcPort != 8080 || qtcp.DstPort != 40001 {
				t.Errorf("quote ports %d -> %d, want 8080 -> 40001", qtcp.SrcPort, qtcp.DstPort)
			}
			b := append(append([]byte{}, qtcp.Contents...), qtcp.Payload...)
			if refSum(b, pseudo(firstIP(qp), 6, len(b))) != 0xffff {
				t.Errorf("quoted TCP checksum not translated")
			}
		})
	}
}

// firstIP returns the first IPv4 or IPv6 layer of p.
func firstIP(p gopacket.Packet) gopacket.Layer {
	for _, l := range p.Layers() {
		switch l.(type) {
		case *layers.IPv4, *layers.IPv6:
			return l
		}
	}
	return nil
}

// outerDst is the address a forwarded frame is delivered to: its first IP
// header's destination.
func outerDst(t *testing.T, p gopacket.Packet, _ Mode) netip.Addr {
	t.Helper()
	switch ip := firstIP(p).(type) {
	case *layers.IPv4:
		return addrOf(ip.DstIP)
	case *layers.IPv6:
		return addrOf(ip.DstIP)
	}
	t.Fatalf("no IP layer")
	return netip.Addr{}
}

// TestICMPSteeringFollowsPin proves the pinned entry, not Maglev, decides
// where an error goes: the flow is pinned, then the backend set changes so
// that Maglev would now choose differently for some flows.
func TestICMPSteeringFollowsPin(t *testing.T) {
	spec := testSpec()
	h := newHarness(t, spec)
	pinned := map[uint16]netip.Addr{}
	for port := uint16(2000); port < 2064; port++ {
		d := h.run(build(t, pk{src: client4, dst: vipDSR4, sport: port, dport: 80, flags: "S"}))[0]
		pinned[port] = outerDst(t, decode(t, d.frame()), ModeDSR)
	}
	spec2 := testSpec()
	spec2.VIPs[1].Backends = append(spec2.VIPs[1].Backends, BackendSpec{Ref: 30, Addr: netip.MustParseAddr("198.18.1.99"), Weight: 3, State: BackendUp, MAC: macOf(30)})
	h.setSpec(spec2)
	for port, want := range pinned {
		d := h.run(icmpError(t, router4, vipDSR4, quotedTCP(t, vipDSR4, client4, 80, port)))[0]
		if got := outerDst(t, decode(t, d.frame()), ModeDSR); got != want {
			t.Errorf("flow %d pinned to %v, its ICMP error went to %v", port, want, got)
		}
	}
}

func TestNATReplyICMP(t *testing.T) {
	for _, fromBackend := range []bool{true, false} {
		h := newHarness(t, testSpec())
		backend := netip.MustParseAddr("198.18.1.31")
		// The client's datagram as the backend received it, after NAT.
		f := build(t, pk{src: client4, dst: backend, sport: 5000, dport: 7001, proto: layers.IPProtocolUDP, payload: []byte("query")})
		q := f[14 : 14+ipLen(f[14:])]
		from := backend
		if !fromBackend {
			from = netip.MustParseAddr("198.18.1.254") // a router between vipd and the backend
		}
		in := icmpError(t, from, client4, q)
		d := h.runOn(PortEgress, in)
		if d.Verdict != VerdictTX || d.Port != PortIngress {
			t.Fatalf("from backend %v: verdict %v port %d %v", fromBackend, d.Verdict, d.Port, d.Reason)
		}
		out := decode(t, d.frame())
		ip := layerOf[*layers.IPv4](t, out, 0)
		wantSrc := from
		if fromBackend {
			wantSrc = vipUDP4
		}
		if addrOf(ip.SrcIP) != wantSrc || addrOf(ip.DstIP) != client4 {
			t.Errorf("from backend %v: outer %v -> %v, want %v -> client", fromBackend, ip.SrcIP, ip.DstIP, wantSrc)
		}
		qp := gopacket.NewPacket(layerOf[*layers.ICMPv4](t, out, 0).Payload, layers.LayerTypeIPv4, gopacket.Default)
		qip := layerOf[*layers.IPv4](t, qp, 0)
		qudp := layerOf[*layers.UDP](t, qp, 0)
		if addrOf(qip.DstIP) != vipUDP4 || qudp.DstPort != 7000 || refSum(qip.Contents, 0) != 0xffff {
			t.Errorf("quote not translated back to the VIP: %v:%d", qip.DstIP, qudp.DstPort)
		}
		b := append(append([]byte{}, qudp.Contents...), qudp.Payload...)
		if refSum(b, pseudo(qip, 17, len(b))) != 0xffff {
			t.Errorf("quoted UDP checksum wrong")
		}
	}
}

func TestEcho(t *testing.T) {
	for _, v := range []struct{ client, vip netip.Addr }{{client4, vipNAT4}, {client6, vipDSR6}} {
		h := newHarness(t, testSpec())
		eth := &layers.Ethernet{SrcMAC: net.HardwareAddr(macClient[:]), DstMAC: net.HardwareAddr(macIngress[:])}
		var in []byte
		if v.vip.Is4() {
			eth.EthernetType = layers.EthernetTypeIPv4
			in = serialize(t, eth, &layers.IPv4{Version: 4, TTL: 9, Protocol: layers.IPProtocolICMPv4, SrcIP: net.IP(v.client.AsSlice()), DstIP: net.IP(v.vip.AsSlice())},
				&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0), Id: 7, Seq: 3}, gopacket.Payload("ping"))
		} else {
			eth.EthernetType = layers.EthernetTypeIPv6
			ip := &layers.IPv6{Version: 6, HopLimit: 9, NextHeader: layers.IPProtocolICMPv6, SrcIP: net.IP(v.client.AsSlice()), DstIP: net.IP(v.vip.AsSlice())}
			ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(128, 0)}
			ic.SetNetworkLayerForChecksum(ip)
			in = serialize(t, eth, ip, ic, gopacket.Payload("\x00\x07\x00\x03ping"))
		}
		d := h.run(in)[0]
		if d.Verdict != VerdictReply || d.Port != PortIngress {
			t.Fatalf("%v: verdict %v %v", v.vip, d.Verdict, d.Reason)
		}
		out := decode(t, d.frame())
		if mac(layerOf[*layers.Ethernet](t, out, 0).DstMAC) != macClient {
			t.Errorf("echo reply not sent back to the sender's MAC")
		}
		if v.vip.Is4() {
			ip := layerOf[*layers.IPv4](t, out, 0)
			ic := layerOf[*layers.ICMPv4](t, out, 0)
			if addrOf(ip.SrcIP) != v.vip || addrOf(ip.DstIP) != v.client || ic.TypeCode.Type() != 0 || ic.Id != 7 || ip.TTL != 64 {
				t.Errorf("echo reply %v -> %v type %d id %d ttl %d", ip.SrcIP, ip.DstIP, ic.TypeCode.Type(), ic.Id, ip.TTL)
			}
		} else {
			ip := layerOf[*layers.IPv6](t, out, 0)
			ic := layerOf[*layers.ICMPv6](t, out, 0)
			if addrOf(ip.SrcIP) != v.vip || addrOf(ip.DstIP) != v.client || ic.TypeCode.Type() != 129 {
				t.Errorf("echo reply %v -> %v type %d", ip.SrcIP, ip.DstIP, ic.TypeCode.Type())
			}
		}
	}
}

// TestICMPErrorDrops covers every counted drop of an ICMP error about a
// VIP's flow, both ways and in both families: one steered to the flow's
// backend (NAT and DSR) and one translated back to a NAT client.
func TestICMPErrorDrops(t *testing.T) {
	backend6 := netip.MustParseAddr("2001:2:1::11") // nat6's first backend
	const fits = 40                                 // a quoted payload whose error fits every MTU
	tests := []struct {
		name   string
		toVIP  bool // steered to a backend (else translated to a client)
		vip    netip.Addr
		vi     int // the VIP's index in testSpec
		client netip.Addr
		// payload is the quoted packet's payload size, which sets the
		// error's size; ttl is the error's TTL or hop limit.
		payload int
		ttl     uint8
		edit    func(*Spec) // the condition under test
		want    DropReason
	}{
		{"nat4 no backend", true, vipNAT4, 0, client4, fits, 60, allDown(0), DropNoBackend},
		{"dsr4 no backend", true, vipDSR4, 1, client4, fits, 60, allDown(1), DropNoBackend},
		{"nat6 no backend", true, vipNAT6, 4, client6, fits, 60, allDown(4), DropNoBackend},
		{"dsr6 no backend", true, vipDSR6, 5, client6, fits, 60, allDown(5), DropNoBackend},
		{"nat4 no neighbor", true, vipNAT4, 0, client4, fits, 60, noMACs(0), DropNoNeighbor},
		{"dsr6 no neighbor", true, vipDSR6, 5, client6, fits, 60, noMACs(5), DropNoNeighbor},
		// 20 + 8 + 20 + 20 + 1450 = 1518 bytes: over the egress MTU.
		{"nat4 too big", true, vipNAT4, 0, client4, 1450, 60, nil, DropTooBig},
		// 1490 bytes fit the MTU, not with the tunnel's 20 on top.
		{"dsr4 too big for the tunnel", true, vipDSR4, 1, client4, 1422, 60, nil, DropTooBig},
		// 40 + 8 + 40 + 20 + 1382 = 1490 bytes; 1530 in the tunnel.
		{"dsr6 too big for the tunnel", true, vipDSR6, 5, client6, 1382, 60, nil, DropTooBig},
		{"nat6 too big", true, vipNAT6, 4, client6, 1450, 60, nil, DropTooBig},
		{"nat4 ttl", true, vipNAT4, 0, client4, fits, 1, nil, DropTTLExceeded},
		{"nat6 hop limit", true, vipNAT6, 4, client6, fits, 1, nil, DropTTLExceeded},
		{"reply4 no neighbor", false, vipUDP4, 2, client4, fits, 60, noGateway, DropNoNeighbor},
		{"reply6 no neighbor", false, vipNAT6, 4, client6, fits, 60, noGateway, DropNoNeighbor},
		{"reply4 too big", false, vipUDP4, 2, client4, 1450, 60, nil, DropTooBig},
		{"reply6 too big", false, vipNAT6, 4, client6, 1450, 60, nil, DropTooBig},
		{"reply4 ttl", false, vipUDP4, 2, client4, fits, 1, nil, DropTTLExceeded},
		{"reply6 hop limit", false, vipNAT6, 4, client6, fits, 1, nil, DropTTLExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := testSpec()
			if tt.edit != nil {
				tt.edit(spec)
			}
			h := newHarness(t, spec)
			var in []byte
			rx := PortIngress
			if tt.toVIP {
				f := build(t, pk{src: tt.vip, dst: tt.client, sport: 80, dport: 40001, flags: "PA", payload: payloadOf(tt.payload)})
				in = icmpError(t, routerOf(tt.client), tt.vip, f[14:14+ipLen(f[14:])])
			} else {
				// The client's packet as the first backend received it,
				// after NAT: TCP to nat6's port 8080, UDP to udp4's 7001.
				p := pk{src: tt.client, dst: backend6, sport: 5000, dport: 8080, flags: "PA", payload: payloadOf(tt.payload)}
				if tt.vip.Is4() {
					p = pk{src: tt.client, dst: netip.MustParseAddr("198.18.1.31"), sport: 5000, dport: 7001, proto: layers.IPProtocolUDP, payload: payloadOf(tt.payload)}
				}
				f := build(t, p)
				in = icmpError(t, p.dst, tt.client, f[14:14+ipLen(f[14:])])
				rx = PortEgress
			}
			setTTL(in, tt.ttl)
			d := h.runOn(rx, in)
			if d.Verdict != VerdictDrop || d.Reason != tt.want {
				t.Fatalf("verdict %v reason %v, want a %v drop", d.Verdict, d.Reason, tt.want)
			}
			if c := h.w.Counters(); c.Drops[tt.want] != 1 || c.ICMPSteered != 0 {
				t.Errorf("%v drops %d, ICMP steered %d", tt.want, c.Drops[tt.want], c.ICMPSteered)
			}
		})
	}
}

// allDown returns a Spec edit that takes every backend of VIP vi down.
func allDown(vi int) func(*Spec) {
	return func(s *Spec) {
		for i := range s.VIPs[vi].Backends {
			s.VIPs[vi].Backends[i].State = BackendDown
		}
	}
}

// noMACs returns a Spec edit that forgets the MACs of VIP vi's backends.
func noMACs(vi int) func(*Spec) {
	return func(s *Spec) {
		for i := range s.VIPs[vi].Backends {
			s.VIPs[vi].Backends[i].MAC = [6]byte{}
		}
	}
}

// noGateway forgets the clients' gateway MACs: no client can be reached.
func noGateway(s *Spec) { s.ClientGateway4, s.ClientGateway6 = [6]byte{}, [6]byte{} }

// routerOf returns the test router of client's family.
func routerOf(client netip.Addr) netip.Addr {
	if client.Is4() {
		return router4
	}
	return router6
}

// setTTL sets the TTL (and header checksum) or the hop limit of frame's
// untagged IP packet.
func setTTL(frame []byte, ttl uint8) {
	if frame[14]>>4 == 6 {
		frame[14+7] = ttl
		return
	}
	ip := packet.IPv4(frame[14:34])
	ip.SetTTL(ttl)
	ip.SetChecksum(0)
	ip.SetChecksum(ip.ComputeChecksum())
}

// TestICMPSteeredCountsSent: a DSR error that the encapsulation drops
// (here for want of headroom) is a drop, not also a steered error.
func TestICMPSteeredCountsSent(t *testing.T) {
	h := newHarness(t, testSpec())
	in := icmpError(t, router4, vipDSR4, quotedTCP(t, vipDSR4, client4, 80, 40001))
	d := &Desc{Buf: append([]byte(nil), in...), Len: len(in), RxPort: PortIngress} // no headroom
	h.w.Begin(h.snap, h.now, h.emit)
	h.w.Process(d)
	h.w.End(1)
	if d.Verdict != VerdictDrop || d.Reason != DropNoHeadroom {
		t.Fatalf("verdict %v reason %v, want a no_headroom drop", d.Verdict, d.Reason)
	}
	if c := h.w.Counters(); c.ICMPSteered != 0 || c.Drops[DropNoHeadroom] != 1 {
		t.Errorf("steered %d, no_headroom drops %d; want 0 and 1", c.ICMPSteered, c.Drops[DropNoHeadroom])
	}
}
