package dataplane

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// The tests in this file pin the edges of the pipeline's policy: what is
// vipd's to forward, translate or relay, and what is not. Drop reasons
// are compared by name.

// frag6 inserts an IPv6 Fragment header (offset in bytes, M flag) directly
// after the fixed header of an untagged IPv6 frame. The rest of the packet
// stays: for a first fragment, its transport header.
func frag6(frame []byte, off uint16, more bool) []byte {
	out := append([]byte(nil), frame[:14+40]...)
	nh := out[14+6]
	out[14+6] = 44
	fo := off &^ 7
	if more {
		fo |= 1
	}
	out = append(out, nh, 0, byte(fo>>8), byte(fo), 0, 0, 0x42, 0x42)
	out = append(out, frame[14+40:]...)
	binary.BigEndian.PutUint16(out[14+4:], uint16(len(out)-14-40))
	return out
}

// routed6 inserts, after the fixed header of an IPv6 frame, a type 0
// Routing header with one address and left segments left (a type vipd
// does not look inside; any with segments left is a source route).
func routed6(frame []byte, left uint8) []byte {
	out := append([]byte(nil), frame[:14+40]...)
	nh := out[14+6]
	out[14+6] = 43
	out = append(out, nh, 2, 0, left, 0, 0, 0, 0)
	out = append(out, net.ParseIP("2001:2:ffff::1").To16()...)
	out = append(out, frame[14+40:]...)
	binary.BigEndian.PutUint16(out[14+4:], uint16(len(out)-14-40))
	return out
}

// sourceRouted4 inserts into an IPv4 frame without options a loose source
// route option (type 131, RFC 791) with one address and pointer ptr (4:
// the address is left; 8: the route is exhausted), and a NOP.
func sourceRouted4(frame []byte, ptr byte) []byte {
	out := append([]byte(nil), frame[:14+20]...)
	out = append(out, 131, 7, ptr, 198, 18, 99, 1, 1)
	out = append(out, frame[14+20:]...)
	out[14] = 0x47
	binary.BigEndian.PutUint16(out[14+2:], binary.BigEndian.Uint16(frame[14+2:])+8) // not len: the frame may be padded
	out[14+10], out[14+11] = 0, 0
	binary.BigEndian.PutUint16(out[14+10:], ^uint16(refSum(out[14:14+28], 0)))
	return out
}

// routedTo returns a TCP SYN from a client to vip carrying a source route:
// for IPv6 a Routing header with left segments left (routed6), for IPv4 a
// loose source route option with pointer left (sourceRouted4).
func routedTo(vip netip.Addr, left byte) func(t *testing.T) []byte {
	return func(t *testing.T) []byte {
		if vip.Is6() {
			return routed6(build(t, pk{src: client6, dst: vip, sport: 1000, dport: 80, flags: "S"}), left)
		}
		return sourceRouted4(build(t, pk{src: client4, dst: vip, sport: 1000, dport: 80, flags: "S"}), left)
	}
}

// icmpErrorOf builds an ICMP error of the given type and code from a
// router to dst quoting q (an IPv4 or IPv6 packet).
func icmpErrorOf(t testing.TB, from, dst netip.Addr, typ, code uint8, q []byte) []byte {
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr(macClient[:]), DstMAC: net.HardwareAddr(macIngress[:]), EthernetType: layers.EthernetTypeIPv4}
	if from.Is4() {
		ip := &layers.IPv4{Version: 4, TTL: 60, Protocol: layers.IPProtocolICMPv4, SrcIP: net.IP(from.AsSlice()), DstIP: net.IP(dst.AsSlice())}
		ic := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(typ, code)}
		return serialize(t, eth, ip, ic, gopacket.Payload(q))
	}
	eth.EthernetType = layers.EthernetTypeIPv6
	ip := &layers.IPv6{Version: 6, HopLimit: 60, NextHeader: layers.IPProtocolICMPv6, SrcIP: net.IP(from.AsSlice()), DstIP: net.IP(dst.AsSlice())}
	ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(typ, code)}
	ic.SetNetworkLayerForChecksum(ip)
	return serialize(t, eth, ip, ic, gopacket.Payload(append([]byte{0, 0, 0x05, 0x14}, q...)))
}

// quotedTo returns the IP packet a client sent to a NAT backend, as an ICMP
// error about it quotes it.
func quotedTo(t testing.TB, client, backend netip.Addr, cport, bport uint16, proto layers.IPProtocol) []byte {
	f := build(t, pk{src: client, dst: backend, sport: cport, dport: bport, proto: proto, flags: "PA", payload: payloadOf(40)})
	return f[14 : 14+ipLen(f[14:])]
}

// corruptICMP flips a bit of the ICMP payload's last byte (not covered by
// any header checksum vipd checks first).
func corruptICMP(f []byte) []byte {
	f[len(f)-1] ^= 0x10
	return f
}

var (
	nat4Backend = netip.MustParseAddr("198.18.1.11")  // of vipNAT4, TCP 8080
	udp4Backend = netip.MustParseAddr("198.18.1.31")  // of vipUDP4, UDP 7001
	nat6Backend = netip.MustParseAddr("2001:2:1::11") // of vipNAT6, TCP 8080
	own6In      = netip.MustParseAddr("2001:2::254")
)

func TestPolicy(t *testing.T) {
	udp := layers.IPProtocolUDP
	tests := []struct {
		name    string
		frame   func(t *testing.T) []byte
		verdict Verdict
		reason  string // for drops
		port    uint8  // for transmissions
	}{
		// A first fragment carries its ports: it is classified like a
		// whole packet. Only later fragments follow the 3-tuple policy.
		{"whole datagram to a port no VIP serves", func(t *testing.T) []byte {
			return build(t, pk{src: client4, dst: vipUDP4, sport: 1000, dport: 9999, proto: udp, payload: payloadOf(64)})
		}, VerdictDrop, "vip_port", 0},
		{"first fragment to a port no VIP serves", func(t *testing.T) []byte {
			return build(t, pk{src: client4, dst: vipUDP4, sport: 1000, dport: 9999, proto: udp, mf: true, noDF: true, payload: payloadOf(64)})
		}, VerdictDrop, "vip_port", 0},
		{"first fragment to the VIP's port", func(t *testing.T) []byte {
			return build(t, pk{src: client4, dst: vipUDP4, sport: 1000, dport: 7000, proto: udp, mf: true, noDF: true, payload: payloadOf(64)})
		}, VerdictTX, "", PortEgress},
		{"later fragment to the VIP's address and protocol", func(t *testing.T) []byte {
			return build(t, pk{src: client4, dst: vipUDP4, proto: udp, fragOff: 1480, noDF: true, payload: payloadOf(64)})
		}, VerdictTX, "", PortEgress},
		{"later fragment of protocol 0 to a VIP address", func(t *testing.T) []byte {
			// (address, 0, 0) is the classifier's key of the address
			// itself: found by FuzzProcess.
			f := build(t, pk{src: client4, dst: vipUDP4, proto: layers.IPProtocolUDP, fragOff: 1480, noDF: true, payload: payloadOf(64)})
			f[14+9] = 0
			f[14+10], f[14+11] = 0, 0
			binary.BigEndian.PutUint16(f[14+10:], ^uint16(refSum(f[14:14+20], 0)))
			return f
		}, VerdictDrop, "vip_proto", 0},
		{"v6 first fragment to a port no VIP serves", func(t *testing.T) []byte {
			return frag6(build(t, pk{src: client6, dst: vipNAT6, sport: 1000, dport: 443, flags: "PA", payload: payloadOf(64)}), 0, true)
		}, VerdictDrop, "vip_port", 0},
		{"v6 first fragment to the VIP's port", func(t *testing.T) []byte {
			return frag6(build(t, pk{src: client6, dst: vipNAT6, sport: 1000, dport: 80, flags: "PA", payload: payloadOf(64)}), 0, true)
		}, VerdictTX, "", PortEgress},

		// A source-routed packet with addresses left is never forwarded:
		// the VIP is a waypoint (RFC 791, RFC 8200 §4.4), NAT would break
		// its checksum, which covers the last address, and a DSR backend
		// would route it on. With no address left the VIP is the
		// destination.
		{"v6 to a NAT VIP, routing header, segments left", routedTo(vipNAT6, 1), VerdictDrop, "source_route", 0},
		{"v6 to a DSR VIP, routing header, segments left", routedTo(vipDSR6, 2), VerdictDrop, "source_route", 0},
		{"v6 first fragment to a NAT VIP, routing header, segments left", func(t *testing.T) []byte {
			return routed6(frag6(build(t, pk{src: client6, dst: vipNAT6, sport: 1000, dport: 80, flags: "PA", payload: payloadOf(64)}), 0, true), 1)
		}, VerdictDrop, "source_route", 0},
		{"v4 to a NAT VIP, loose source route, an address left", routedTo(vipNAT4, 4), VerdictDrop, "source_route", 0},
		{"v4 to a DSR VIP, loose source route, an address left", routedTo(vipDSR4, 4), VerdictDrop, "source_route", 0},
		{"v4 to a NAT VIP, loose source route, exhausted", routedTo(vipNAT4, 8), VerdictTX, "", PortEgress},
		{"v6 to a NAT VIP, routing header, no segment left", routedTo(vipNAT6, 0), VerdictTX, "", PortEgress},
		{"v6 to a DSR VIP, routing header, no segment left", routedTo(vipDSR6, 0), VerdictTX, "", PortEgress},

		// Replies: a first fragment from a backend's other port is not a
		// reply (it is the kernel's, like the whole packet).
		{"reply first fragment from another port", func(t *testing.T) []byte {
			return build(t, pk{src: nat4Backend, dst: client4, sport: 9999, dport: 1000, flags: "PA", mf: true, noDF: true, payload: payloadOf(64)})
		}, VerdictKernel, "", 0},
		{"reply first fragment from the backend's port", func(t *testing.T) []byte {
			return build(t, pk{src: nat4Backend, dst: client4, sport: 8080, dport: 1000, flags: "PA", mf: true, noDF: true, payload: payloadOf(64)})
		}, VerdictTX, "", PortIngress},

		// The box's own traffic is never a NAT reply: a health check's
		// answer from a NAT backend to the box.
		{"backend to the box's ingress address", func(t *testing.T) []byte {
			return build(t, pk{src: nat4Backend, dst: own4In, sport: 8080, dport: 40000, flags: "SA"})
		}, VerdictKernel, "", 0},
		{"backend to the box's egress address", func(t *testing.T) []byte {
			return build(t, pk{src: nat4Backend, dst: encap4, sport: 8080, dport: 40000, flags: "SA"})
		}, VerdictKernel, "", 0},
		{"UDP backend to the box", func(t *testing.T) []byte {
			return build(t, pk{src: udp4Backend, dst: own4In, sport: 7001, dport: 40000, proto: udp, payload: payloadOf(8)})
		}, VerdictKernel, "", 0},
		{"backend fragment to the box", func(t *testing.T) []byte {
			return build(t, pk{src: nat4Backend, dst: own4In, fragOff: 1480, noDF: true, payload: payloadOf(64)})
		}, VerdictKernel, "", 0},
		{"v6 backend to the box", func(t *testing.T) []byte {
			return build(t, pk{src: nat6Backend, dst: own6In, sport: 8080, dport: 40000, flags: "SA"})
		}, VerdictKernel, "", 0},
		{"unreachable from a router to the box about a backend", func(t *testing.T) []byte {
			return icmpErrorOf(t, router4, own4In, 3, 4, quotedTo(t, own4In, nat4Backend, 40000, 8080, layers.IPProtocolTCP))
		}, VerdictKernel, "", 0},

		// ICMP: only unreachable, time exceeded and parameter problem are
		// relayed; a corrupt one is dropped, not given a fresh checksum.
		{"source quench to a VIP", func(t *testing.T) []byte {
			return icmpErrorOf(t, router4, vipNAT4, 4, 0, quotedTCP(t, vipNAT4, client4, 80, 1000))
		}, VerdictDrop, "icmp_type", 0},
		{"redirect to a VIP", func(t *testing.T) []byte {
			return icmpErrorOf(t, router4, vipNAT4, 5, 1, quotedTCP(t, vipNAT4, client4, 80, 1000))
		}, VerdictDrop, "icmp_type", 0},
		{"time exceeded to a VIP", func(t *testing.T) []byte {
			return icmpErrorOf(t, router4, vipNAT4, 11, 0, quotedTCP(t, vipNAT4, client4, 80, 1000))
		}, VerdictTX, "", PortEgress},
		{"corrupt frag-needed to a NAT VIP", func(t *testing.T) []byte {
			return corruptICMP(icmpErrorOf(t, router4, vipNAT4, 3, 4, quotedTCP(t, vipNAT4, client4, 80, 1000)))
		}, VerdictDrop, "bad_icmp_checksum", 0},
		{"corrupt frag-needed to a DSR VIP", func(t *testing.T) []byte {
			return corruptICMP(icmpErrorOf(t, router4, vipDSR4, 3, 4, quotedTCP(t, vipDSR4, client4, 80, 1000)))
		}, VerdictDrop, "bad_icmp_checksum", 0},
		{"v6 type 5 to a VIP", func(t *testing.T) []byte {
			return icmpErrorOf(t, router6, vipNAT6, 5, 0, quotedTCP(t, vipNAT6, client6, 80, 1000))
		}, VerdictDrop, "icmp_type", 0},
		{"v6 type 127 to a VIP", func(t *testing.T) []byte {
			return icmpErrorOf(t, router6, vipNAT6, 127, 0, quotedTCP(t, vipNAT6, client6, 80, 1000))
		}, VerdictDrop, "icmp_type", 0},
		{"corrupt packet-too-big to a VIP", func(t *testing.T) []byte {
			return corruptICMP(icmpErrorOf(t, router6, vipNAT6, 2, 0, quotedTCP(t, vipNAT6, client6, 80, 1000)))
		}, VerdictDrop, "bad_icmp_checksum", 0},
		{"corrupt frag-needed toward a NAT client", func(t *testing.T) []byte {
			return corruptICMP(icmpErrorOf(t, router4, client4, 3, 4, quotedTo(t, client4, nat4Backend, 1000, 8080, layers.IPProtocolTCP)))
		}, VerdictDrop, "bad_icmp_checksum", 0},
		{"corrupt packet-too-big toward a NAT client", func(t *testing.T) []byte {
			return corruptICMP(icmpErrorOf(t, router6, client6, 2, 0, quotedTo(t, client6, nat6Backend, 1000, 8080, layers.IPProtocolTCP)))
		}, VerdictDrop, "bad_icmp_checksum", 0},
		{"redirect toward a NAT client", func(t *testing.T) []byte {
			return icmpErrorOf(t, router4, client4, 5, 1, quotedTo(t, client4, nat4Backend, 1000, 8080, layers.IPProtocolTCP))
		}, VerdictKernel, "", 0},
		{"frag-needed toward a NAT client", func(t *testing.T) []byte {
			return icmpErrorOf(t, router4, client4, 3, 4, quotedTo(t, client4, nat4Backend, 1000, 8080, layers.IPProtocolTCP))
		}, VerdictTX, "", PortIngress},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := testSpec()
			spec.Addr6 = [2]netip.Addr{own6In, {}}
			h := newHarness(t, spec)
			frame := tt.frame(t)
			d := h.runOn(PortIngress, frame)
			if d.Verdict != tt.verdict || (tt.verdict == VerdictDrop && d.Reason.String() != tt.reason) {
				t.Fatalf("verdict %v reason %v, want %v %s", d.Verdict, d.Reason, tt.verdict, tt.reason)
			}
			if tt.verdict == VerdictTX {
				if d.Port != tt.port {
					t.Errorf("sent on port %d, want %d", d.Port, tt.port)
				}
				decode(t, d.frame())
			}
		})
	}
}

// TestVIPIsLocal: a VIP that is one of the box's addresses is refused, the
// ports' own addresses included, with an error that names it.
func TestVIPIsLocal(t *testing.T) {
	for _, tt := range []struct {
		name string
		set  func(*Spec)
	}{
		{"listed in Local", func(s *Spec) { s.Local = []netip.Addr{netip.MustParseAddr("127.0.0.1"), vipNAT4} }},
		{"a port's address", func(s *Spec) { s.Addr4[PortEgress] = vipDSR4 }},
		{"IPv6", func(s *Spec) { s.Local = []netip.Addr{vipNAT6} }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			spec := testSpec()
			tt.set(spec)
			_, err := NewSnapshot(spec)
			if !errors.Is(err, ErrVIPIsLocal) || !errors.Is(err, ErrSpec) {
				t.Fatalf("NewSnapshot: %v, want ErrVIPIsLocal", err)
			}
		})
	}
	spec := testSpec()
	spec.Local = []netip.Addr{netip.MustParseAddr("198.18.9.1"), netip.MustParseAddr("::ffff:198.18.9.2")}
	if _, err := NewSnapshot(spec); err != nil {
		t.Fatalf("other local addresses: %v", err)
	}
	st := spec.Steering()
	want := []netip.Addr{netip.MustParseAddr("198.18.9.1"), netip.MustParseAddr("198.18.9.2"), own4In, encap4}
	if len(st.Local) != len(want) {
		t.Fatalf("Steering().Local = %v, want %v", st.Local, want)
	}
	for i := range want {
		if st.Local[i] != want[i] {
			t.Errorf("Steering().Local = %v, want %v", st.Local, want)
		}
	}
}
