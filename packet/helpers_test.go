package packet

import (
	"encoding/binary"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// Test frames are built with gopacket, the independent oracle: it knows
// nothing of this package's offsets and checksum code.

var (
	macClient = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}
	macVIPD   = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x02}

	// Addresses from the benchmarking ranges (RFC 2544, RFC 5180).
	ip4Client = net.IP{198, 18, 0, 1}
	ip4VIP    = net.IP{198, 19, 0, 10}
	ip6Client = net.ParseIP("2001:2::1")
	ip6VIP    = net.ParseIP("2001:2::a")
)

// serialize lays out ls with gopacket, computing lengths and checksums.
func serialize(tb testing.TB, ls ...gopacket.SerializableLayer) []byte {
	tb.Helper()
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{ComputeChecksums: true, FixLengths: true}
	if err := gopacket.SerializeLayers(buf, opts, ls...); err != nil {
		tb.Fatalf("gopacket serialize: %v", err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// rawLayer serializes fixed bytes, for the extension headers gopacket
// cannot serialize (Routing, Fragment) and for hand-made ones.
type rawLayer []byte

func (r rawLayer) LayerType() gopacket.LayerType { return gopacket.LayerTypePayload }

func (r rawLayer) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	p, err := b.PrependBytes(len(r))
	if err != nil {
		return err
	}
	copy(p, r)
	return nil
}

func ethLayer(et layers.EthernetType) *layers.Ethernet {
	return &layers.Ethernet{SrcMAC: macClient, DstMAC: macVIPD, EthernetType: et}
}

func ip4Layer(proto layers.IPProtocol) *layers.IPv4 {
	return &layers.IPv4{
		Version: 4, TTL: 64, Id: 0x1234, Flags: layers.IPv4DontFragment,
		Protocol: proto, SrcIP: ip4Client, DstIP: ip4VIP,
	}
}

func ip6Layer(next layers.IPProtocol) *layers.IPv6 {
	return &layers.IPv6{
		Version: 6, TrafficClass: 0xb8, FlowLabel: 0x12345, HopLimit: 64,
		NextHeader: next, SrcIP: ip6Client, DstIP: ip6VIP,
	}
}

func tcpLayer(nl gopacket.NetworkLayer) *layers.TCP {
	t := &layers.TCP{
		SrcPort: 40000, DstPort: 8080, Seq: 0x01020304, Ack: 0x0a0b0c0d,
		SYN: true, ACK: true, Window: 29200, Urgent: 0,
		Options: []layers.TCPOption{
			{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: []byte{0x05, 0xb4}},
			{OptionType: layers.TCPOptionKindNop},
			{OptionType: layers.TCPOptionKindWindowScale, OptionLength: 3, OptionData: []byte{7}},
		},
	}
	if nl != nil {
		if err := t.SetNetworkLayerForChecksum(nl); err != nil {
			panic(err)
		}
	}
	return t
}

func udpLayer(nl gopacket.NetworkLayer) *layers.UDP {
	u := &layers.UDP{SrcPort: 40001, DstPort: 5353}
	if nl != nil {
		if err := u.SetNetworkLayerForChecksum(nl); err != nil {
			panic(err)
		}
	}
	return u
}

var payload = gopacket.Payload("vipd test payload, 33 bytes long.")

// Frame builders for the common shapes.

func tcp4Frame(tb testing.TB) []byte {
	ip := ip4Layer(layers.IPProtocolTCP)
	return serialize(tb, ethLayer(layers.EthernetTypeIPv4), ip, tcpLayer(ip), payload)
}

func udp4Frame(tb testing.TB) []byte {
	ip := ip4Layer(layers.IPProtocolUDP)
	return serialize(tb, ethLayer(layers.EthernetTypeIPv4), ip, udpLayer(ip), payload)
}

func tcp6Frame(tb testing.TB) []byte {
	return ip6Chain(tb, 6, nil, tcpLayer(nil), payload)
}

// Extension headers for IPv6 chains. Each takes the next header value.
func hopByHop(next uint8) rawLayer {
	return rawLayer{next, 0, 1, 4, 0, 0, 0, 0} // one PadN option
}

func dstOpts(next uint8) rawLayer {
	return rawLayer{next, 1, 1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0} // 16 bytes, PadN
}

// routing0 is a type 0 routing header with one address and no segments
// left, the only type gopacket decodes; this package does not look inside.
func routing0(next uint8) rawLayer {
	r := rawLayer{next, 2, 0, 0, 0, 0, 0, 0}
	return append(r, ip6VIP.To16()...)
}

func fragment6(next uint8, offset uint16, more bool, id uint32) rawLayer {
	r := rawLayer{next, 0, 0, 0, 0, 0, 0, 0}
	v := offset &^ 7
	if more {
		v |= 1
	}
	binary.BigEndian.PutUint16(r[2:], v)
	binary.BigEndian.PutUint32(r[4:], id)
	return r
}

// ip6Chain builds an IPv6 frame whose fixed header is followed by the
// extension headers ext (the first byte of each is its Next Header, which
// the caller chains) and then by l4 layers. first is the fixed header's
// Next Header.
func ip6Chain(tb testing.TB, first uint8, ext []rawLayer, l4 ...gopacket.SerializableLayer) []byte {
	ip := ip6Layer(layers.IPProtocol(first))
	ls := []gopacket.SerializableLayer{ethLayer(layers.EthernetTypeIPv6), ip}
	for _, e := range ext {
		ls = append(ls, e)
	}
	for _, l := range l4 {
		if c, ok := l.(interface {
			SetNetworkLayerForChecksum(gopacket.NetworkLayer) error
		}); ok {
			if err := c.SetNetworkLayerForChecksum(ip); err != nil {
				tb.Fatal(err)
			}
		}
		ls = append(ls, l)
	}
	return serialize(tb, ls...)
}

// refSum is the RFC 1071 sum written the slow, obvious way, to check Sum.
func refSum(b []byte, initial uint32) uint16 {
	s := initial
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

// refPseudo is the pseudo-header sum, unfolded, the obvious way.
func refPseudo(src, dst net.IP, proto uint8, length int) uint32 {
	var s uint32
	for _, a := range []net.IP{src, dst} {
		if a4 := a.To4(); a4 != nil {
			a = a4
		}
		for i := 0; i < len(a); i += 2 {
			s += uint32(a[i])<<8 | uint32(a[i+1])
		}
	}
	return s + uint32(proto) + uint32(length>>16) + uint32(length&0xffff)
}

// decode decodes frame with gopacket and fails on a decoding error up to
// the transport layer. (What gopacket makes of the application payload,
// guessed from the port, is not this package's business.)
func decode(tb testing.TB, frame []byte) gopacket.Packet {
	tb.Helper()
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	if el := p.ErrorLayer(); el != nil && p.TransportLayer() == nil &&
		p.Layer(layers.LayerTypeICMPv4) == nil && p.Layer(layers.LayerTypeICMPv6) == nil {
		tb.Fatalf("gopacket cannot decode frame: %v\n% x", el.Error(), frame)
	}
	return p
}

// checkChecksums decodes frame with gopacket and verifies every checksum in
// it twice: with gopacket's own code where it exposes it (TCP), and with
// refSum over the layer bytes gopacket found. It returns the packet.
func checkChecksums(tb testing.TB, frame []byte) gopacket.Packet {
	tb.Helper()
	p := decode(tb, frame)
	var nl gopacket.NetworkLayer
	var src, dst net.IP
	for _, l := range p.Layers() {
		switch l := l.(type) {
		case *layers.IPv4:
			if got := refSum(l.Contents, 0); got != 0xffff {
				tb.Errorf("IPv4 header checksum %#04x is wrong (sum %#04x)", l.Checksum, got)
			}
			nl, src, dst = l, l.SrcIP, l.DstIP
		case *layers.IPv6:
			nl, src, dst = l, l.SrcIP, l.DstIP
		case *layers.TCP:
			if err := l.SetNetworkLayerForChecksum(nl); err != nil {
				tb.Fatal(err)
			}
			// With the field in place a correct segment sums to 0xFFFF, so
			// gopacket's "compute" returns its complement, 0.
			if c, err := l.ComputeChecksum(); err != nil || c != 0 {
				tb.Errorf("TCP checksum %#04x is wrong per gopacket (%#04x, %v)", l.Checksum, c, err)
			}
			seg := append(append([]byte(nil), l.Contents...), l.Payload...)
			if got := refSum(seg, refPseudo(src, dst, 6, len(seg))); got != 0xffff {
				tb.Errorf("TCP checksum %#04x is wrong (sum %#04x)", l.Checksum, got)
			}
		case *layers.UDP:
			if l.Checksum == 0 {
				if src.To4() == nil {
					tb.Errorf("UDP over IPv6 with zero checksum")
				}
				continue
			}
			dg := append(append([]byte(nil), l.Contents...), l.Payload...)
			if got := refSum(dg, refPseudo(src, dst, 17, int(l.Length))); got != 0xffff {
				tb.Errorf("UDP checksum %#04x is wrong (sum %#04x)", l.Checksum, got)
			}
		case *layers.ICMPv4:
			msg := append(append([]byte(nil), l.Contents...), l.Payload...)
			if got := refSum(msg, 0); got != 0xffff {
				tb.Errorf("ICMPv4 checksum %#04x is wrong (sum %#04x)", l.Checksum, got)
			}
		case *layers.ICMPv6:
			msg := append(append([]byte(nil), l.Contents...), l.Payload...)
			if got := refSum(msg, refPseudo(src, dst, 58, len(msg))); got != 0xffff {
				tb.Errorf("ICMPv6 checksum %#04x is wrong (sum %#04x)", l.Checksum, got)
			}
		}
	}
	return p
}

// mustParse parses frame and fails the test on an error.
func mustParse(tb testing.TB, frame []byte) Frame {
	tb.Helper()
	var f Frame
	if err := Parse(frame, &f); err != nil {
		tb.Fatalf("Parse: %v\n% x", err, frame)
	}
	return f
}
