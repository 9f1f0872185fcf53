package nat

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/vipd/vipd/packet"
	"github.com/vipd/vipd/testing/csumref"
)

var refSum, pseudoSum = csumref.Sum, csumref.Pseudo

func ser(t *testing.T, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true, FixLengths: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// datagram builds a whole IP packet src:sport → dst:dport of proto with a
// valid transport checksum, or a zero one for UDP when zeroUDP.
func datagram(t *testing.T, src, dst netip.Addr, sport, dport uint16, proto layers.IPProtocol, zeroUDP bool) []byte {
	var nl gopacket.NetworkLayer
	var ipl gopacket.SerializableLayer
	if src.Is4() {
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: proto, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
		nl, ipl = ip, ip
	} else {
		ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: proto, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
		nl, ipl = ip, ip
	}
	var l4 gopacket.SerializableLayer
	if proto == layers.IPProtocolTCP {
		tcp := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: layers.TCPPort(dport), Seq: 7, ACK: true, Window: 100}
		tcp.SetNetworkLayerForChecksum(nl)
		l4 = tcp
	} else {
		udp := &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: layers.UDPPort(dport)}
		udp.SetNetworkLayerForChecksum(nl)
		l4 = udp
	}
	b := ser(t, ipl, l4, gopacket.Payload("quoted payload bytes"))
	if zeroUDP {
		hl := 20
		if src.Is6() {
			hl = 40
		}
		binary.BigEndian.PutUint16(b[hl+6:], 0)
	}
	return b
}

// icmpError builds an IP packet carrying an ICMP error from → to that quotes
// q whole.
func icmpError(t *testing.T, from, to netip.Addr, q []byte) []byte {
	if from.Is4() {
		ip := &layers.IPv4{Version: 4, TTL: 60, Protocol: layers.IPProtocolICMPv4, SrcIP: from.AsSlice(), DstIP: to.AsSlice()}
		return ser(t, ip, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(3, 4), Seq: 1400}, gopacket.Payload(q))
	}
	ip := &layers.IPv6{Version: 6, HopLimit: 60, NextHeader: layers.IPProtocolICMPv6, SrcIP: from.AsSlice(), DstIP: to.AsSlice()}
	ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(2, 0)}
	ic.SetNetworkLayerForChecksum(ip)
	return ser(t, ip, ic, gopacket.Payload(append([]byte{0, 0, 0x05, 0x00}, q...)))
}

// checkQuote verifies, with gopacket and refSum, the translated error: the
// outer header and ICMP checksum (valid iff wantValid), the quoted IP
// header checksum, and the quoted transport checksum (zero stays zero).
func checkQuote(t *testing.T, b []byte, v6, wantValid, zeroUDP bool, wantQSrc, wantQDst netip.Addr, wantSport, wantDport uint16) {
	t.Helper()
	first := layers.LayerTypeIPv4
	if v6 {
		first = layers.LayerTypeIPv6
	}
	p := gopacket.NewPacket(b, first, gopacket.Default)
	var icmpBytes []byte
	var init uint32
	switch ip := p.NetworkLayer().(type) {
	case *layers.IPv4:
		if refSum(ip.Contents, 0) != 0xffff {
			t.Errorf("outer IPv4 header checksum wrong")
		}
		icmpBytes = ip.Payload
	case *layers.IPv6:
		icmpBytes = ip.Payload
		init = pseudoSum(ip.SrcIP, ip.DstIP, 58, len(icmpBytes))
	}
	if valid := refSum(icmpBytes, init) == 0xffff; valid != wantValid {
		t.Errorf("ICMP checksum valid = %v, want %v", valid, wantValid)
	}
	q := icmpBytes[8:]
	qfirst := layers.LayerTypeIPv4
	if v6 {
		qfirst = layers.LayerTypeIPv6
	}
	qp := gopacket.NewPacket(q, qfirst, gopacket.Default)
	var src, dst net.IP
	switch ip := qp.NetworkLayer().(type) {
	case *layers.IPv4:
		if refSum(ip.Contents, 0) != 0xffff {
			t.Errorf("quoted IPv4 header checksum wrong")
		}
		src, dst = ip.SrcIP, ip.DstIP
	case *layers.IPv6:
		src, dst = ip.SrcIP, ip.DstIP
	}
	if a, _ := netip.AddrFromSlice(src); a.Unmap() != wantQSrc {
		t.Errorf("quoted source %v, want %v", a, wantQSrc)
	}
	if a, _ := netip.AddrFromSlice(dst); a.Unmap() != wantQDst {
		t.Errorf("quoted destination %v, want %v", a, wantQDst)
	}
	tl := qp.TransportLayer()
	if tl == nil {
		t.Fatalf("no quoted transport layer")
	}
	seg := append(append([]byte{}, tl.LayerContents()...), tl.LayerPayload()...)
	var sp, dp uint16
	switch x := tl.(type) {
	case *layers.TCP:
		sp, dp = uint16(x.SrcPort), uint16(x.DstPort)
		if refSum(seg, pseudoSum(src, dst, 6, len(seg))) != 0xffff {
			t.Errorf("quoted TCP checksum wrong")
		}
	case *layers.UDP:
		sp, dp = uint16(x.SrcPort), uint16(x.DstPort)
		switch {
		case zeroUDP && x.Checksum != 0:
			t.Errorf("quoted zero UDP checksum became %#04x", x.Checksum)
		case !zeroUDP && refSum(seg, pseudoSum(src, dst, 17, len(seg))) != 0xffff:
			t.Errorf("quoted UDP checksum wrong")
		}
	}
	if sp != wantSport || dp != wantDport {
		t.Errorf("quoted ports %d→%d, want %d→%d", sp, dp, wantSport, wantDport)
	}
}

// TestICMPErrorTranslation runs every translation over TCP, UDP and UDP
// without a checksum, from a valid and from a corrupt error: checksums
// stay valid when they were, a corrupt error stays corrupt (no fresh
// checksum), and a zero UDP checksum in a quote stays zero.
func TestICMPErrorTranslation(t *testing.T) {
	type fam struct {
		name                        string
		vip, client, backend, route netip.Addr
	}
	fams := []fam{
		{"v4", netip.MustParseAddr("198.18.0.100"), netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.1.11"), netip.MustParseAddr("198.18.0.250")},
		{"v6", netip.MustParseAddr("2001:2::100"), netip.MustParseAddr("2001:2::1"), netip.MustParseAddr("2001:2:1::11"), netip.MustParseAddr("2001:2::250")},
	}
	l4s := []struct {
		name  string
		proto layers.IPProtocol
		zero  bool
	}{{"tcp", layers.IPProtocolTCP, false}, {"udp", layers.IPProtocolUDP, false}, {"udp no checksum", layers.IPProtocolUDP, true}}
	for _, f := range fams {
		for _, l := range l4s {
			for _, corrupt := range []bool{false, true} {
				name := f.name + " " + l.name
				if corrupt {
					name += " corrupt"
				}
				t.Run(name+" dnat", func(t *testing.T) {
					// Router → VIP about VIP:80 → client:1000; to backend:8080.
					b := icmpError(t, f.route, f.vip, datagram(t, f.vip, f.client, 80, 1000, l.proto, l.zero))
					if corrupt {
						corruptRest(b, f.vip.Is6())
					}
					translate(t, b, f.vip.Is6(), true, f.backend, 8080, false)
					checkQuote(t, b, f.vip.Is6(), !corrupt, l.zero, f.backend, f.client, 8080, 1000)
				})
				t.Run(name+" snat", func(t *testing.T) {
					// Backend → client about client:1000 → backend:8080; from VIP:80.
					b := icmpError(t, f.backend, f.client, datagram(t, f.client, f.backend, 1000, 8080, l.proto, l.zero))
					if corrupt {
						corruptRest(b, f.vip.Is6())
					}
					translate(t, b, f.vip.Is6(), false, f.vip, 80, true)
					checkQuote(t, b, f.vip.Is6(), !corrupt, l.zero, f.client, f.vip, 1000, 80)
				})
			}
		}
	}
}

// corruptRest flips a bit in the ICMP header's last four bytes (unused, or
// the MTU), which only the ICMP checksum covers.
func corruptRest(b []byte, v6 bool) {
	if v6 {
		b[packet.IPv6Size+5] ^= 0x40
	} else {
		b[packet.IPv4(b).HeaderLength()+5] ^= 0x40
	}
}

// translate applies ICMPErrorDNAT (dnat) or ICMPErrorSNAT to the IP packet b.
func translate(t *testing.T, b []byte, v6, dnat bool, addr netip.Addr, port uint16, outer bool) {
	t.Helper()
	var q packet.Quote
	if !v6 {
		ip := packet.IPv4(b)
		ic := packet.ICMPv4(b[ip.HeaderLength():])
		if err := packet.ParseQuote4(ic.Payload(), &q); err != nil {
			t.Fatal(err)
		}
		if dnat {
			ICMPErrorDNAT4(ip, ic, q.L4Off, q.End, q.Proto, addr.As4(), port)
		} else {
			ICMPErrorSNAT4(ip, ic, q.L4Off, q.End, q.Proto, addr.As4(), port, outer)
		}
		return
	}
	ip := packet.IPv6(b)
	ic := packet.ICMPv6(b[packet.IPv6Size:])
	if err := packet.ParseQuote6(ic.Payload(), &q); err != nil {
		t.Fatal(err)
	}
	a := addr.As16()
	if dnat {
		ICMPErrorDNAT6(ip, ic, q.L4Off, q.End, q.Proto, &a, port)
	} else {
		ICMPErrorSNAT6(ip, ic, q.L4Off, q.End, q.Proto, &a, port, outer)
	}
}
