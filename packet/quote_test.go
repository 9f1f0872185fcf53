package packet

import (
	"testing"

	"github.com/google/gopacket/layers"
)

func TestParseQuote(t *testing.T) {
	t4, u6 := tcp4Frame(t)[14:], ip6Chain(t, 17, nil, udpLayer(nil), payload)[14:]
	ip4opts := ip4Layer(layers.IPProtocolUDP)
	ip4opts.Options = []layers.IPv4Option{{OptionType: 0x94, OptionLength: 4, OptionData: []byte{0, 0}}}
	u4opts := serialize(t, ip4opts, udpLayer(ip4opts), payload)
	chain := ip6Chain(t, 60, []rawLayer{dstOpts(44), fragment6(6, 0, true, 5)}, tcpLayer(nil), payload)[14:]
	later := ip6Chain(t, 44, []rawLayer{fragment6(6, 1448, true, 5)}, payload)[14:]
	frag4 := append([]byte(nil), t4...)
	IPv4(frag4).SetFlagsFragmentOffset(1, 1480)

	cases := []struct {
		name      string
		quote     []byte
		v6        bool
		want      Quote
		src, dst  uint16 // expected ports when HasPorts
		wantError error
	}{
		{"ipv4 tcp, 28 bytes (RFC 792 minimum)", t4[:28], false,
			Quote{L4Off: 20, End: 28, Proto: 6, HasPorts: true}, 40000, 8080, nil},
		{"ipv4 tcp, whole", t4, false, Quote{L4Off: 20, End: len(t4), Proto: 6, HasPorts: true}, 40000, 8080, nil},
		{"ipv4 udp with options", u4opts[:32], false, Quote{L4Off: 24, End: 32, Proto: 17, HasPorts: true}, 40001, 5353, nil},
		{"ipv4 tcp, 4 bytes of ports", t4[:24], false, Quote{L4Off: 20, End: 24, Proto: 6}, 0, 0, nil},
		{"ipv4 later fragment", frag4[:28], false, Quote{L4Off: 20, End: 28, Proto: 6, Frag: true}, 0, 0, nil},
		{"ipv6 udp", u6, true, Quote{L4Off: 40, End: len(u6), Proto: 17, HasPorts: true}, 40001, 5353, nil},
		{"ipv6 first fragment after dstopts", chain[:40+16+8+8], true,
			Quote{L4Off: 64, End: 72, Proto: 6, Frag: true, FirstFrag: true, FragHdrOff: 56, HasPorts: true}, 40000, 8080, nil},
		{"ipv6 later fragment", later, true, Quote{L4Off: 48, End: len(later), Proto: 6, Frag: true, FragHdrOff: 40}, 0, 0, nil},
		{"ipv4 19 bytes", t4[:19], false, Quote{}, 0, 0, ErrTruncated},
		{"ipv4 options cut", u4opts[:22], false, Quote{}, 0, 0, ErrTruncated},
		{"ipv4 as ipv6", t4, true, Quote{}, 0, 0, ErrBadVersion},
		{"ipv6 as ipv4", u6, false, Quote{}, 0, 0, ErrBadVersion},
		{"ipv4 ihl 3", append([]byte{0x43}, t4[1:28]...), false, Quote{}, 0, 0, ErrBadIHL},
		{"ipv4 total length 10", append(append([]byte{}, t4[:2]...), append([]byte{0, 10}, t4[4:28]...)...), false, Quote{}, 0, 0, ErrBadLength},
		{"ipv6 39 bytes", u6[:39], true, Quote{}, 0, 0, ErrTruncated},
		{"ipv6 extension header cut", chain[:40+10], true, Quote{}, 0, 0, ErrTruncated},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var q Quote
			var err error
			if c.v6 {
				err = ParseQuote6(c.quote, &q)
			} else {
				err = ParseQuote4(c.quote, &q)
			}
			if err != c.wantError || q != c.want {
				t.Fatalf("got %+v, %v\nwant %+v, %v", q, err, c.want, c.wantError)
			}
			if q.HasPorts {
				l4 := UDP(c.quote[q.L4Off:q.End]) // the first 8 bytes read alike for TCP
				if l4.SourcePort() != c.src || l4.DestinationPort() != c.dst {
					t.Errorf("ports %d -> %d", l4.SourcePort(), l4.DestinationPort())
				}
			}
		})
	}
}

func TestParseQuoteDoesNotAllocate(t *testing.T) {
	t4, t6 := tcp4Frame(t)[14:42], tcp6Frame(t)[14:]
	var q Quote
	if n := testing.AllocsPerRun(100, func() { _ = ParseQuote4(t4, &q); _ = ParseQuote6(t6, &q) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

// FuzzParseQuote: the quote parsers never panic, and what they accept can
// be read: the IP header and, with HasPorts, 8 bytes of transport header.
func FuzzParseQuote(f *testing.F) {
	f.Add(tcp4Frame(f)[14:42], false)
	f.Add(tcp6Frame(f)[14:], true)
	f.Add(ip6Chain(f, 60, []rawLayer{dstOpts(44), fragment6(6, 0, true, 5)}, tcpLayer(nil), payload)[14:], true)
	f.Fuzz(func(t *testing.T, b []byte, v6 bool) {
		var q Quote
		if v6 {
			if ParseQuote6(b, &q) != nil {
				return
			}
			ip := IPv6(b)
			_, _, _, _, _ = ip.HopLimit(), ip.NextHeader(), ip.SourceAddress(), ip.DestinationAddress(), ip.PayloadLength()
		} else {
			if ParseQuote4(b, &q) != nil {
				return
			}
			ip := IPv4(b)
			_, _, _, _, _ = ip.SourceAddress(), ip.DestinationAddress(), ip.Options(), ip.ComputeChecksum(), ip.IsChecksumValid()
		}
		if q.L4Off > q.End || q.End > len(b) {
			t.Fatalf("offsets %+v for %d bytes", q, len(b))
		}
		if q.HasPorts {
			u := UDP(b[q.L4Off:q.End])
			_, _, _, _ = u.SourcePort(), u.DestinationPort(), u.Length(), u.Checksum()
			_ = TCP(b[q.L4Off:q.End]).SequenceNumber()
			if q.FragHdrOff != 0 {
				_ = IPv6Fragment(b[q.FragHdrOff:]).Identification()
			}
		}
	})
}
