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

// ipip wraps inner as vipd does (encap.Encap4): outer IPv4, protocol 4, DF,
// ID 0, TTL 64, no options.
func ipip(tb testing.TB, src, dst netip.Addr, inner []byte) []byte {
	tb.Helper()
	outer := &layers.IPv4{Version: 4, TTL: 64, Flags: layers.IPv4DontFragment, Protocol: layers.IPProtocolIPv4, SrcIP: ip(src), DstIP: ip(dst)}
	return serialize(tb, outer, gopacket.Payload(inner))
}

// ip6ip6 wraps inner in an outer IPv6 header with next header 41, as
// encap.Encap6 does. The raw IPv6 socket hands the decapsulator only the
// payload; the unit tests use the whole packet to check with gopacket.
func ip6ip6(tb testing.TB, src, dst netip.Addr, inner []byte) []byte {
	tb.Helper()
	outer := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolIPv6, SrcIP: ip(src), DstIP: ip(dst)}
	return serialize(tb, outer, gopacket.Payload(inner))
}
