package dataplane

import (
	"net"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// TestVerdicts covers malformed and hostile input and traffic that is not
// vipd's: every case has one verdict and, for drops, one counted reason.
func TestVerdicts(t *testing.T) {
	tcp := func(t *testing.T, p pk) []byte { return build(t, p) }
	arp := func(t *testing.T) []byte {
		return serialize(t, &layers.Ethernet{SrcMAC: net.HardwareAddr(macClient[:]), DstMAC: layers.EthernetBroadcast, EthernetType: layers.EthernetTypeARP},
			&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4, Operation: 1,
				SourceHwAddress: macClient[:], SourceProtAddress: client4.AsSlice(), DstHwAddress: make([]byte, 6), DstProtAddress: vipNAT4.AsSlice()})
	}
	tests := []struct {
		name    string
		frame   func(t *testing.T) []byte
		verdict Verdict
		reason  DropReason
	}{
		// Malformed frames are vipd's, and dropped, only when the steering
		// rule (which reads no more than it needs) gives them to vipd.
		{"truncated ethernet", func(t *testing.T) []byte { return []byte{1, 2, 3} }, VerdictKernel, DropNone},
		{"truncated ip", func(t *testing.T) []byte {
			return tcp(t, pk{src: client4, dst: vipNAT4, sport: 1, dport: 80, flags: "S"})[:30]
		}, VerdictKernel, DropNone},
		{"truncated tcp to a VIP", func(t *testing.T) []byte {
			return tcp(t, pk{src: client4, dst: vipNAT4, sport: 1, dport: 80, flags: "S"})[:14+20+10]
		}, VerdictDrop, DropBadIPHeader}, // Total Length past the frame
		{"truncated tcp to another host", func(t *testing.T) []byte {
			return tcp(t, pk{src: client4, dst: netip.MustParseAddr("198.18.0.9"), sport: 1, dport: 80, flags: "S"})[:14+20+10]
		}, VerdictKernel, DropNone},
		{"bad IHL", func(t *testing.T) []byte {
			f := tcp(t, pk{src: client4, dst: vipNAT4, sport: 1, dport: 80, flags: "S"})
			f[14] = 0x43
			return f
		}, VerdictKernel, DropNone},
		{"IHL past the frame, to a VIP", func(t *testing.T) []byte {
			f := tcp(t, pk{src: client4, dst: vipNAT4, sport: 1, dport: 80, flags: "S"})[:14+24]
			f[14] = 0x4f
			return f
		}, VerdictDrop, DropTruncated},
		{"total length past frame", func(t *testing.T) []byte {
			f := tcp(t, pk{src: client4, dst: vipNAT4, sport: 1, dport: 80, flags: "S"})
			f[16], f[17] = 0x05, 0xdc
			return f
		}, VerdictDrop, DropBadIPHeader},
		{"bad TCP offset", func(t *testing.T) []byte {
			f := tcp(t, pk{src: client4, dst: vipNAT4, sport: 1, dport: 80, flags: "S"})
			f[14+20+12] = 0x20
			return f
		}, VerdictDrop, DropBadL4},
		{"bad header checksum", func(t *testing.T) []byte {
			f := tcp(t, pk{src: client4, dst: vipNAT4, sport: 1, dport: 80, flags: "S"})
			f[24] ^= 0xff
			return f
		}, VerdictDrop, DropBadIPChecksum},
		{"TTL 1 to a NAT VIP", func(t *testing.T) []byte {
			return tcp(t, pk{src: client4, dst: vipNAT4, sport: 1, dport: 80, flags: "S", ttl: 1})
		}, VerdictDrop, DropTTLExceeded},
		{"TTL 1 to a DSR VIP travels", func(t *testing.T) []byte {
			return tcp(t, pk{src: client4, dst: vipDSR4, sport: 1, dport: 80, flags: "S", ttl: 1})
		}, VerdictTX, DropNone},
		{"hop limit 1 to a NAT6 VIP", func(t *testing.T) []byte {
			return tcp(t, pk{src: client6, dst: vipNAT6, sport: 1, dport: 80, flags: "S", ttl: 1})
		}, VerdictDrop, DropTTLExceeded},
		{"VIP as source", func(t *testing.T) []byte {
			return tcp(t, pk{src: vipDSR4, dst: vipNAT4, sport: 1, dport: 80, flags: "S"})
		}, VerdictDrop, DropSrcIsVIP},
		{"VIP6 as source", func(t *testing.T) []byte {
			return tcp(t, pk{src: vipDSR6, dst: vipNAT6, sport: 1, dport: 80, flags: "S"})
		}, VerdictDrop, DropSrcIsVIP},
		{"port no VIP serves", func(t *testing.T) []byte {
			return tcp(t, pk{src: client4, dst: vipNAT4, sport: 1, dport: 443, flags: "S"})
		}, VerdictDrop, DropVIPPort},
		{"UDP to a TCP VIP", func(t *testing.T) []byte {
			return tcp(t, pk{src: client4, dst: vipNAT4, sport: 1, dport: 80, proto: layers.IPProtocolUDP})
		}, VerdictDrop, DropVIPPort},
		{"GRE to a VIP", func(t *testing.T) []byte {
			return tcp(t, pk{src: client4, dst: vipNAT4, proto: layers.IPProtocolGRE, payload: []byte{0, 0, 8, 0}})
		}, VerdictDrop, DropVIPProto},
		{"ICMP timestamp to a VIP", func(t *testing.T) []byte {
			return serialize(t, &layers.Ethernet{SrcMAC: net.HardwareAddr(macClient[:]), DstMAC: net.HardwareAddr(macIngress[:]), EthernetType: layers.EthernetTypeIPv4},
				&layers.IPv4{Version: 4, TTL: 9, Protocol: layers.IPProtocolICMPv4, SrcIP: net.IP(client4.AsSlice()), DstIP: net.IP(vipNAT4.AsSlice())},
				&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(13, 0)}, gopacket.Payload(make([]byte, 12)))
		}, VerdictDrop, DropICMPType},
		{"ICMP error with a foreign quote", func(t *testing.T) []byte {
			return icmpError(t, router4, vipNAT4, quotedTCP(t, client4, vipNAT4, 1234, 80))
		}, VerdictDrop, DropICMPUnmatched},
		{"ICMP error with a short quote", func(t *testing.T) []byte {
			return icmpError(t, router4, vipNAT4, quotedTCP(t, vipNAT4, client4, 80, 1234)[:12])
		}, VerdictDrop, DropICMPUnmatched},
		{"ARP", arp, VerdictKernel, DropNone},
		{"to another host", func(t *testing.T) []byte {
			return tcp(t, pk{src: client4, dst: netip.MustParseAddr("198.18.0.9"), sport: 1, dport: 22, flags: "S"})
		}, VerdictKernel, DropNone},
		{"to another host v6", func(t *testing.T) []byte {
			return tcp(t, pk{src: client6, dst: netip.MustParseAddr("2001:2::9"), sport: 1, dport: 22, flags: "S"})
		}, VerdictKernel, DropNone},
		{"neighbor solicitation to a VIP", func(t *testing.T) []byte {
			ip := &layers.IPv6{Version: 6, HopLimit: 255, NextHeader: layers.IPProtocolICMPv6, SrcIP: net.IP(client6.AsSlice()), DstIP: net.IP(vipNAT6.AsSlice())}
			ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(135, 0)}
			ic.SetNetworkLayerForChecksum(ip)
			return serialize(t, &layers.Ethernet{SrcMAC: net.HardwareAddr(macClient[:]), DstMAC: net.HardwareAddr(macIngress[:]), EthernetType: layers.EthernetTypeIPv6},
				ip, ic, gopacket.Payload(append(make([]byte, 4), vipNAT6.AsSlice()...)))
		}, VerdictKernel, DropNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, testSpec())
			d := h.run(tt.frame(t))[0]
			if d.Verdict != tt.verdict || (tt.verdict == VerdictDrop && d.Reason != tt.reason) {
				t.Fatalf("verdict %v reason %v, want %v %v", d.Verdict, d.Reason, tt.verdict, tt.reason)
			}
			c := h.w.Counters()
			if tt.verdict == VerdictDrop && c.Drops[tt.reason] != 1 {
				t.Errorf("drop counter %v = %d", tt.reason, c.Drops[tt.reason])
			}
			if c.Verdicts[tt.verdict] != 1 || c.RxFrames != 1 {
				t.Errorf("verdict counters %v, rx %d", c.Verdicts, c.RxFrames)
			}
		})
	}
}

func TestNoBackendAndNoNeighbor(t *testing.T) {
	spec := testSpec()
	for i := range spec.VIPs[0].Backends {
		spec.VIPs[0].Backends[i].State = BackendDown
	}
	spec.VIPs[1].Backends = spec.VIPs[1].Backends[:1]
	spec.VIPs[1].Backends[0].MAC = [6]byte{}
	h := newHarness(t, spec)
	ds := h.run(
		build(t, pk{src: client4, dst: vipNAT4, sport: 1, dport: 80, flags: "S"}),
		build(t, pk{src: client4, dst: vipDSR4, sport: 1, dport: 80, flags: "S"}),
	)
	if ds[0].Reason != DropNoBackend || ds[1].Reason != DropNoNeighbor {
		t.Errorf("reasons %v, %v; want no_backend, no_neighbor", ds[0].Reason, ds[1].Reason)
	}
}

// TestBackendChanges: a flow whose backend goes down is re-picked, a flow on
// a draining backend stays, and new flows avoid draining backends.
func TestBackendChanges(t *testing.T) {
	spec := testSpec()
	h := newHarness(t, spec)
	flows := map[uint16]netip.Addr{}
	for port := uint16(3000); port < 3060; port++ {
		d := h.run(build(t, pk{src: client4, dst: vipDSR4, sport: port, dport: 80, flags: "S"}))[0]
		flows[port] = outerDst(t, decode(t, d.frame()), ModeDSR)
	}
	down := spec.VIPs[1].Backends[0].Addr
	drain := spec.VIPs[1].Backends[1].Addr
	spec2 := testSpec()
	spec2.VIPs[1].Backends[0].State = BackendDown
	spec2.VIPs[1].Backends[1].State = BackendDraining
	h.setSpec(spec2)
	moved := 0
	for port, was := range flows {
		d := h.run(build(t, pk{src: client4, dst: vipDSR4, sport: port, dport: 80, flags: "A"}))[0]
		now := outerDst(t, decode(t, d.frame()), ModeDSR)
		switch {
		case was == down:
			if now == down || now == drain {
				t.Errorf("flow %d on a down backend went to %v", port, now)
			}
			moved++
		case now != was:
			t.Errorf("flow %d moved from %v to %v though its backend is up or draining", port, was, now)
		}
	}
	if moved == 0 || h.w.Counters().Repicked != uint64(moved) {
		t.Errorf("moved %d flows, Repicked %d", moved, h.w.Counters().Repicked)
	}
	for port := uint16(4000); port < 4100; port++ {
		d := h.run(build(t, pk{src: client4, dst: vipDSR4, sport: port, dport: 80, flags: "S"}))[0]
		if got := outerDst(t, decode(t, d.frame()), ModeDSR); got == down || got == drain {
			t.Fatalf("new flow %d went to %v, which takes no new flows", port, got)
		}
	}
	// A backend removed from the configuration altogether is like down.
	spec3 := testSpec()
	spec3.VIPs[1].Backends = spec3.VIPs[1].Backends[2:]
	h.setSpec(spec3)
	for port, was := range flows {
		d := h.run(build(t, pk{src: client4, dst: vipDSR4, sport: port, dport: 80, flags: "A"}))[0]
		if now := outerDst(t, decode(t, d.frame()), ModeDSR); now != spec3.VIPs[1].Backends[0].Addr {
			t.Errorf("flow %d (was %v) went to %v, not the only backend left", port, was, now)
		}
	}
}

// TestFragmentsTogether: every fragment of a datagram reaches the same
// backend, and fragments bypass conntrack.
func TestFragmentsTogether(t *testing.T) {
	h := newHarness(t, testSpec())
	for id := uint16(1); id <= 40; id++ {
		first := build(t, pk{src: client4, dst: vipUDP4, sport: 5000 + id, dport: 7000, proto: layers.IPProtocolUDP, payload: payloadOf(64), mf: true, noDF: true, id: id})
		// A non-first fragment: raw data at offset 72.
		rest := serialize(t, &layers.Ethernet{SrcMAC: net.HardwareAddr(macClient[:]), DstMAC: net.HardwareAddr(macIngress[:]), EthernetType: layers.EthernetTypeIPv4},
			&layers.IPv4{Version: 4, TTL: 64, Id: id, Protocol: layers.IPProtocolUDP, FragOffset: 9, SrcIP: net.IP(client4.AsSlice()), DstIP: net.IP(vipUDP4.AsSlice())},
			gopacket.Payload(payloadOf(100)))
		ds := h.run(first, rest)
		a := outerDst(t, decode(t, ds[0].frame()), ModeNAT)
		b := outerDst(t, decode(t, ds[1].frame()), ModeNAT)
		if a != b {
			t.Fatalf("datagram %d: fragments went to %v and %v", id, a, b)
		}
	}
	if c := h.w.Counters(); c.FlowMisses != 0 || c.Stateless != 80 {
		t.Errorf("conntrack misses %d, stateless %d; fragments must bypass conntrack", c.FlowMisses, c.Stateless)
	}
}

func TestFragmentAmbiguous(t *testing.T) {
	spec := testSpec()
	v := spec.VIPs[0]
	v.ID, v.Name, v.Port = 40, "nat4-443", 443
	v.Backends = backends("198.18.1.5", 20, 8443)
	spec.VIPs = append(spec.VIPs, v)
	h := newHarness(t, spec)
	rest := serialize(t, &layers.Ethernet{SrcMAC: net.HardwareAddr(macClient[:]), DstMAC: net.HardwareAddr(macIngress[:]), EthernetType: layers.EthernetTypeIPv4},
		&layers.IPv4{Version: 4, TTL: 64, Id: 1, Protocol: layers.IPProtocolTCP, FragOffset: 100, SrcIP: net.IP(client4.AsSlice()), DstIP: net.IP(vipNAT4.AsSlice())},
		gopacket.Payload(payloadOf(100)))
	if d := h.run(rest)[0]; d.Reason != DropFragAmbiguous {
		t.Errorf("verdict %v %v, want drop frag_ambiguous", d.Verdict, d.Reason)
	}
}
