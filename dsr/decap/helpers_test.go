package decap

import (
	"net"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// Addresses of the tests: 198.18.0.0/15 and 2001:2::/48 only.
var (
	vip4     = netip.MustParseAddr("198.18.0.101")
	client4  = netip.MustParseAddr("198.18.2.7")
	lbAddr4  = netip.MustParseAddr("198.18.1.1") // vipd's encapsulation source
	beAddr4  = netip.MustParseAddr("198.18.1.11")
	stranger = netip.MustParseAddr("198.18.1.99") // an outer source not allowed

	vip6      = netip.MustParseAddr("2001:2::101")
	client6   = netip.MustParseAddr("2001:2:0:2::7")
	lbAddr6   = netip.MustParseAddr("2001:2:0:1::1")
	beAddr6   = netip.MustParseAddr("2001:2:0:1::11")
	stranger6 = netip.MustParseAddr("2001:2:0:1::99")
)

func ip(a netip.Addr) net.IP { return net.IP(a.AsSlice()) }

func serialize(tb testing.TB, ls ...gopacket.SerializableLayer) []byte {
	tb.Helper()
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, ls...); err != nil {
		tb.Fatalf("serialize: %v", err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// tcp4 returns an IPv4 TCP segment src:sport → dst:dport with the given
// flags and payload, checksums right.
func tcp4(tb testing.TB, src, dst netip.Addr, sport, dport uint16, syn, ack bool, seq uint32, payload []byte) []byte {
	tb.Helper()
	l3 := &layers.IPv4{Version: 4, TTL: 63, Id: 7, Flags: layers.IPv4DontFragment, Protocol: layers.IPProtocolTCP, SrcIP: ip(src), DstIP: ip(dst)}
	l4 := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: layers.TCPPort(dport), Seq: seq, SYN: syn, ACK: ack, Window: 64240}
	if syn {
		l4.Options = []layers.TCPOption{{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: []byte{0x05, 0xb4}}}
	}
	l4.SetNetworkLayerForChecksum(l3)
	return serialize(tb, l3, l4, gopacket.Payload(payload))
}

// tcp6 is tcp4 for IPv6.
func tcp6(tb testing.TB, src, dst netip.Addr, sport, dport uint16, syn, ack bool, seq uint32, payload []byte) []byte {
	tb.Helper()
	l3 := &layers.IPv6{Version: 6, HopLimit: 63, NextHeader: layers.IPProtocolTCP, SrcIP: ip(src), DstIP: ip(dst)}
	l4 := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: layers.TCPPort(dport), Seq: seq, SYN: syn, ACK: ack, Window: 64240}
	if syn {
		l4.Options = []layers.TCPOption{{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: []byte{0x05, 0xa0}}}
	}
	l4.SetNetworkLayerForChecksum(l3)
	return serialize(tb, l3, l4, gopacket.Payload(payload))
}

// ipip wraps inner as vipd does (dsr.Encap4): outer IPv4, protocol 4, DF,
// ID 0, TTL 64, no options.
func ipip(tb testing.TB, src, dst netip.Addr, inner []byte) []byte {
	tb.Helper()
	outer := &layers.IPv4{Version: 4, TTL: 64, Flags: layers.IPv4DontFragment, Protocol: layers.IPProtocolIPv4, SrcIP: ip(src), DstIP: ip(dst)}
	return serialize(tb, outer, gopacket.Payload(inner))
}

// ip6ip6 wraps inner in an outer IPv6 header with next header 41, as
// dsr.Encap6 does. The raw IPv6 socket hands the decapsulator only the
// payload; the unit tests use the whole packet to check with gopacket.
func ip6ip6(tb testing.TB, src, dst netip.Addr, inner []byte) []byte {
	tb.Helper()
	outer := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolIPv6, SrcIP: ip(src), DstIP: ip(dst)}
	return serialize(tb, outer, gopacket.Payload(inner))
}

// gue4 wraps inner as vipd does for a VIP with encap = "gue" over IPv4:
// outer IPv4 (protocol 17, DF, ID 0, TTL 64), UDP from sport (vipd: 49152
// + flow hash mod 16384) to dport, checksum 0, then inner directly (GUE
// variant 1).
func gue4(tb testing.TB, src, dst netip.Addr, sport, dport uint16, inner []byte) []byte {
	tb.Helper()
	outer := &layers.IPv4{Version: 4, TTL: 64, Flags: layers.IPv4DontFragment, Protocol: layers.IPProtocolUDP, SrcIP: ip(src), DstIP: ip(dst)}
	u := &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: layers.UDPPort(dport)}
	u.SetNetworkLayerForChecksum(outer)
	pkt := serialize(tb, outer, u, gopacket.Payload(inner))
	pkt[outerUDPChecksum4], pkt[outerUDPChecksum4+1] = 0, 0 // "no checksum" (RFC 768)
	return pkt
}

// outerUDPChecksum4 is the offset of the UDP checksum in gue4's packets.
const outerUDPChecksum4 = 20 + 6

// gue6 is gue4 over IPv6 (next header 17, hop limit 64), where the UDP
// checksum is computed: IPv6 has no "no checksum" for plain UDP sockets.
func gue6(tb testing.TB, src, dst netip.Addr, sport, dport uint16, inner []byte) []byte {
	tb.Helper()
	outer := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP, SrcIP: ip(src), DstIP: ip(dst)}
	u := &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: layers.UDPPort(dport)}
	u.SetNetworkLayerForChecksum(outer)
	return serialize(tb, outer, u, gopacket.Payload(inner))
}

// udpFrom returns an IPv4 UDP datagram src:sport → dst:dport, checksums
// right.
func udpFrom(tb testing.TB, src, dst netip.Addr, sport, dport uint16, payload []byte) []byte {
	tb.Helper()
	l3 := &layers.IPv4{Version: 4, TTL: 63, Protocol: layers.IPProtocolUDP, SrcIP: ip(src), DstIP: ip(dst)}
	u := &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: layers.UDPPort(dport)}
	u.SetNetworkLayerForChecksum(l3)
	return serialize(tb, l3, u, gopacket.Payload(payload))
}

// icmpEcho4 returns an ICMP echo request src → dst.
func icmpEcho4(tb testing.TB, src, dst netip.Addr) []byte {
	tb.Helper()
	l3 := &layers.IPv4{Version: 4, TTL: 63, Protocol: layers.IPProtocolICMPv4, SrcIP: ip(src), DstIP: ip(dst)}
	return serialize(tb, l3, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0), Id: 1, Seq: 1}, gopacket.Payload("ping"))
}
