package packet

import (
	"encoding/binary"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// parseCases are valid frames of every shape Parse knows, with the Frame it
// must produce. They double as fuzz seeds and benchmark inputs.
func parseCases(tb testing.TB) []struct {
	name  string
	frame []byte
	want  Frame
} {
	eth4 := ethLayer(layers.EthernetTypeIPv4)
	tagged := func(et layers.EthernetType) []gopacket.SerializableLayer {
		return []gopacket.SerializableLayer{
			ethLayer(layers.EthernetTypeDot1Q),
			&layers.Dot1Q{Priority: 5, VLANIdentifier: 100, Type: et},
		}
	}
	ip4 := func(proto layers.IPProtocol, mod func(*layers.IPv4)) *layers.IPv4 {
		ip := ip4Layer(proto)
		if mod != nil {
			mod(ip)
		}
		return ip
	}
	withOpts := func(ip *layers.IPv4) {
		// Router alert (RFC 2113) and a NOP: IHL 6.
		ip.Options = []layers.IPv4Option{
			{OptionType: 0x94, OptionLength: 4, OptionData: []byte{0, 0}},
			{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 1},
		}
	}
	firstFrag := func(ip *layers.IPv4) { ip.Flags = layers.IPv4MoreFragments }
	lastFrag := func(ip *layers.IPv4) { ip.Flags = 0; ip.FragOffset = 185 } // 1480 bytes

	tcp4 := func(mod func(*layers.IPv4)) []gopacket.SerializableLayer {
		ip := ip4(layers.IPProtocolTCP, mod)
		return []gopacket.SerializableLayer{ip, tcpLayer(ip), payload}
	}
	udp4 := func(mod func(*layers.IPv4)) []gopacket.SerializableLayer {
		ip := ip4(layers.IPProtocolUDP, mod)
		return []gopacket.SerializableLayer{ip, udpLayer(ip), payload}
	}
	udp4Short := func() []gopacket.SerializableLayer {
		ip := ip4(layers.IPProtocolUDP, nil)
		return []gopacket.SerializableLayer{ip, udpLayer(ip), gopacket.Payload("hi")}
	}
	udp6 := func() []gopacket.SerializableLayer {
		ip := ip6Layer(layers.IPProtocolUDP)
		return []gopacket.SerializableLayer{ip, udpLayer(ip), payload}
	}
	cat := func(a ...[]gopacket.SerializableLayer) []byte {
		var ls []gopacket.SerializableLayer
		for _, l := range a {
			ls = append(ls, l...)
		}
		return serialize(tb, ls...)
	}
	one := func(l ...gopacket.SerializableLayer) []gopacket.SerializableLayer { return l }

	// A first IPv6 fragment carries the UDP header, whose Length counts
	// the whole datagram: more than this fragment holds.
	udp6First := ip6Chain(tb, 44, []rawLayer{fragment6(17, 0, true, 0xdeadbeef)}, udpLayer(nil), payload)
	binary.BigEndian.PutUint16(udp6First[14+48+4:], 1000)

	echo4 := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0), Id: 7, Seq: 1}
	fragNeeded := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(3, 4), Seq: 1480}
	inner := tcp4Frame(tb)[14:]

	type tc = struct {
		name  string
		frame []byte
		want  Frame
	}
	v4 := func(l4off, l3len int, proto uint8) Frame {
		return Frame{L3Off: 14, L4Off: l4off, L3Len: l3len, EtherType: EtherTypeIPv4, Proto: proto, HasL4: true}
	}
	v6 := func(l4off, l3len int, proto uint8) Frame {
		return Frame{L3Off: 14, L4Off: l4off, L3Len: l3len, EtherType: EtherTypeIPv6, Proto: proto, HasL4: true}
	}
	tcpLen := 20 + 8 + len(payload) // header, 8 bytes of options, data
	udpLen := 8 + len(payload)
	cases := []tc{
		{"ipv4 tcp", cat(one(eth4), tcp4(nil)), v4(34, 20+tcpLen, 6)},
		{"ipv4 udp", cat(one(eth4), udp4(nil)), v4(34, 20+udpLen, 17)},
		{"ipv4 icmp echo", cat(one(eth4, ip4(1, nil), echo4, payload)), v4(34, 28+len(payload), 1)},
		{"ipv4 icmp frag needed", cat(one(eth4, ip4(1, nil), fragNeeded, gopacket.Payload(inner[:28]))), v4(34, 56, 1)},
		{"ipv4 options tcp", cat(one(eth4), tcp4(withOpts)), v4(42, 28+tcpLen, 6)},
		{"ipv4 ipip", cat(one(eth4, ip4(4, nil), gopacket.Payload(inner))),
			Frame{L3Off: 14, L4Off: 34, L3Len: 20 + len(inner), EtherType: EtherTypeIPv4, Proto: 4}},
		{"ipv4 first fragment", cat(one(eth4), udp4(firstFrag)),
			Frame{L3Off: 14, L4Off: 34, L3Len: 20 + udpLen, EtherType: EtherTypeIPv4, Proto: 17,
				Frag: true, FirstFrag: true, HasL4: true}},
		{"ipv4 last fragment", cat(one(eth4), one(ip4(17, lastFrag), payload)),
			Frame{L3Off: 14, L4Off: 34, L3Len: 20 + len(payload), EtherType: EtherTypeIPv4, Proto: 17, Frag: true}},
		{"vlan ipv4 tcp", cat(tagged(layers.EthernetTypeIPv4), tcp4(nil)),
			Frame{L3Off: 18, L4Off: 38, L3Len: 20 + tcpLen, EtherType: EtherTypeIPv4, VLAN: true, Proto: 6, HasL4: true}},
		{"padded ipv4 udp", cat(one(eth4), udp4Short()), v4(34, 30, 17)},
		{"ipv6 tcp", tcp6Frame(tb), v6(54, 40+tcpLen, 6)},
		{"ipv6 udp", ip6Chain(tb, 17, nil, udpLayer(nil), payload), v6(54, 40+udpLen, 17)},
		{"ipv6 icmp echo", ip6Chain(tb, 58, nil,
			&layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(128, 0)}, &layers.ICMPv6Echo{Identifier: 7, SeqNumber: 1}),
			v6(54, 48, 58)},
		{"ipv6 packet too big", ip6Chain(tb, 58, nil,
			&layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(2, 0)}, gopacket.Payload(append([]byte{0, 0, 5, 0xc8}, tcp6Frame(tb)[14:]...))),
			v6(54, 48+40+tcpLen, 58)},
		{"ipv6 hop-by-hop tcp", ip6Chain(tb, 0, []rawLayer{hopByHop(6)}, tcpLayer(nil), payload), v6(62, 48+tcpLen, 6)},
		{"ipv6 routing udp", ip6Chain(tb, 43, []rawLayer{routing0(17)}, udpLayer(nil), payload), v6(78, 64+udpLen, 17)},
		{"ipv6 dstopts icmpv6", ip6Chain(tb, 60, []rawLayer{dstOpts(58)},
			&layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(128, 0)}, &layers.ICMPv6Echo{Identifier: 7, SeqNumber: 1}),
			v6(70, 64, 58)},
		{"ipv6 chain", ip6Chain(tb, 0, []rawLayer{hopByHop(60), dstOpts(43), routing0(44), fragment6(60, 0, false, 9), dstOpts(6)},
			tcpLayer(nil), payload),
			// An atomic fragment (offset 0, M clear) is a whole packet.
			Frame{L3Off: 14, L4Off: 14 + 40 + 8 + 16 + 24 + 8 + 16, L3Len: 40 + 72 + tcpLen, EtherType: EtherTypeIPv6,
				Proto: 6, FragHdrOff: 14 + 40 + 8 + 16 + 24, HasL4: true}},
		{"ipv6 first fragment udp", udp6First,
			Frame{L3Off: 14, L4Off: 62, L3Len: 48 + udpLen, EtherType: EtherTypeIPv6, Proto: 17,
				Frag: true, FirstFrag: true, FragHdrOff: 54, HasL4: true}},
		{"ipv6 last fragment", ip6Chain(tb, 44, []rawLayer{fragment6(6, 1448, false, 0xdeadbeef)}, payload),
			Frame{L3Off: 14, L4Off: 62, L3Len: 48 + len(payload), EtherType: EtherTypeIPv6, Proto: 6,
				Frag: true, FragHdrOff: 54}},
		{"ipv6 ah not skipped", ip6Chain(tb, 51, nil, gopacket.Payload(make([]byte, 24))),
			Frame{L3Off: 14, L4Off: 54, L3Len: 64, EtherType: EtherTypeIPv6, Proto: 51}},
		{"ipv6 esp", ip6Chain(tb, 0, []rawLayer{hopByHop(50)}, gopacket.Payload(make([]byte, 24))),
			Frame{L3Off: 14, L4Off: 62, L3Len: 72, EtherType: EtherTypeIPv6, Proto: 50}},
		{"ipv6 no next header", ip6Chain(tb, 60, []rawLayer{dstOpts(59)}),
			Frame{L3Off: 14, L4Off: 70, L3Len: 56, EtherType: EtherTypeIPv6, Proto: 59}},
		{"vlan ipv6 udp", cat(tagged(layers.EthernetTypeIPv6), udp6()),
			Frame{L3Off: 18, L4Off: 58, L3Len: 40 + udpLen, EtherType: EtherTypeIPv6, VLAN: true, Proto: 17, HasL4: true}},
		{"arp", arpFrame(tb, nil), Frame{L3Off: 14, EtherType: EtherTypeARP}},
		{"vlan arp", arpFrame(tb, &layers.Dot1Q{VLANIdentifier: 7, Type: layers.EthernetTypeARP}),
			Frame{L3Off: 18, EtherType: EtherTypeARP, VLAN: true}},
		{"qinq is not ip", cat(one(ethLayer(layers.EthernetTypeQinQ),
			&layers.Dot1Q{VLANIdentifier: 7, Type: layers.EthernetTypeIPv4}), tcp4(nil)),
			Frame{L3Off: 14, EtherType: 0x88a8}},
	}
	// gopacket pads short frames to the Ethernet minimum only when asked;
	// pad the tiny one by hand so L3Len < len(frame)-L3Off.
	for i := range cases {
		if cases[i].name == "padded ipv4 udp" {
			cases[i].frame = append(cases[i].frame, make([]byte, 60-len(cases[i].frame))...)
		}
	}
	return cases
}

func arpFrame(tb testing.TB, tag *layers.Dot1Q) []byte {
	a := &layers.ARP{
		AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4,
		HwAddressSize: 6, ProtAddressSize: 4, Operation: layers.ARPRequest,
		SourceHwAddress: macClient, SourceProtAddress: ip4Client,
		DstHwAddress: make([]byte, 6), DstProtAddress: ip4VIP,
	}
	if tag == nil {
		return serialize(tb, ethLayer(layers.EthernetTypeARP), a)
	}
	return serialize(tb, ethLayer(layers.EthernetTypeDot1Q), tag, a)
}

func TestParse(t *testing.T) {
	for _, c := range parseCases(t) {
		t.Run(c.name, func(t *testing.T) {
			f := mustParse(t, c.frame)
			if f != c.want {
				t.Fatalf("Parse:\n got %+v\nwant %+v", f, c.want)
			}
			agreeWithGopacket(t, c.frame, &f)
		})
	}
}

// offsetIn returns where sub starts within frame; gopacket's NoCopy layers
// are subslices of the frame.
func offsetIn(frame, sub []byte) int { return cap(frame) - cap(sub) }

// agreeWithGopacket checks f against what gopacket decodes from frame, for
// every layer gopacket finds up to the first transport layer. Frames that
// Parse deliberately leaves alone (QinQ and other EtherTypes) are skipped.
func agreeWithGopacket(tb testing.TB, frame []byte, f *Frame) {
	tb.Helper()
	switch f.EtherType {
	case EtherTypeIPv4, EtherTypeIPv6, EtherTypeARP:
	default:
		return
	}
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.NoCopy)
	sawIP := false
	for _, l := range p.Layers() {
		off := offsetIn(frame, l.LayerContents())
		switch l.(type) {
		case *layers.IPv4, *layers.IPv6:
			if sawIP {
				return // tunnelled packet: Parse stops at the outer header
			}
			sawIP = true
		}
		switch l := l.(type) {
		case *layers.Dot1Q:
			if !f.VLAN {
				tb.Errorf("gopacket sees an 802.1Q tag, Parse does not")
			}
		case *layers.IPv4:
			if off != f.L3Off || int(l.Length) != f.L3Len || l.Protocol != layers.IPProtocol(f.Proto) {
				tb.Errorf("IPv4 at %d len %d proto %d per gopacket; Parse: %+v", off, l.Length, l.Protocol, *f)
			}
			if frag := l.Flags&layers.IPv4MoreFragments != 0 || l.FragOffset != 0; frag != f.Frag {
				tb.Errorf("fragment %v per gopacket, Parse %v", frag, f.Frag)
			}
		case *layers.IPv6:
			if off != f.L3Off || 40+int(l.Length) != f.L3Len {
				tb.Errorf("IPv6 at %d len %d per gopacket; Parse: %+v", off, l.Length, *f)
			}
		case *layers.IPv6Fragment:
			if off != f.FragHdrOff {
				tb.Errorf("IPv6 fragment header at %d per gopacket; Parse: %+v", off, *f)
			}
		case *layers.TCP:
			if off != f.L4Off || f.Proto != 6 || !f.HasL4 ||
				uint16(l.DstPort) != f.TCP(frame).DestinationPort() || int(l.DataOffset)*4 != f.TCP(frame).DataOffset() {
				tb.Errorf("TCP at %d per gopacket; Parse: %+v", off, *f)
			}
		case *layers.UDP:
			if off != f.L4Off || f.Proto != 17 || !f.HasL4 || uint16(l.SrcPort) != f.UDP(frame).SourcePort() {
				tb.Errorf("UDP at %d per gopacket; Parse: %+v", off, *f)
			}
		case *layers.ICMPv4:
			if off != f.L4Off || f.Proto != 1 || !f.HasL4 || l.TypeCode.Type() != f.ICMPv4(frame).Type() {
				tb.Errorf("ICMPv4 at %d per gopacket; Parse: %+v", off, *f)
			}
		case *layers.ICMPv6:
			if off != f.L4Off || f.Proto != 58 || !f.HasL4 || l.TypeCode.Type() != f.ICMPv6(frame).Type() {
				tb.Errorf("ICMPv6 at %d per gopacket; Parse: %+v", off, *f)
			}
		case *layers.ARP:
			if off != f.L3Off || f.EtherType != EtherTypeARP {
				tb.Errorf("ARP at %d per gopacket; Parse: %+v", off, *f)
			}
		}
	}
}

// errorCases are crafted frames, each rejected with a given error.
func errorCases(tb testing.TB) []struct {
	name  string
	frame []byte
	want  error
} {
	type tc = struct {
		name  string
		frame []byte
		want  error
	}
	// mod returns a copy of frame changed by fn.
	mod := func(frame []byte, fn func(b []byte)) []byte {
		b := append([]byte(nil), frame...)
		fn(b)
		return b
	}
	be16 := binary.BigEndian.PutUint16
	t4, u4, t6, u6 := tcp4Frame(tb), udp4Frame(tb), tcp6Frame(tb), ip6Chain(tb, 17, nil, udpLayer(nil), payload)
	icmp4 := serialize(tb, ethLayer(layers.EthernetTypeIPv4), ip4Layer(1),
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0)})
	nine := make([]rawLayer, 9)
	for i := range nine {
		nine[i] = dstOpts(60)
	}
	nine[8] = dstOpts(6)
	return []tc{
		{"empty", nil, ErrTruncated},
		{"short ethernet", t4[:13], ErrTruncated},
		{"cut vlan tag", mod(t4[:16], func(b []byte) { be16(b[12:], 0x8100) }), ErrTruncated},
		{"short ipv4", t4[:14+19], ErrTruncated},
		{"ipv4 options past capture", mod(t4[:34], func(b []byte) { b[14] = 0x46; be16(b[16:], 20) }), ErrTruncated},
		{"ipv4 tcp header cut", mod(t4[:14+20+10], func(b []byte) { be16(b[16:], 30) }), ErrTruncated},
		{"ipv4 udp header cut", mod(u4[:14+20+4], func(b []byte) { be16(b[16:], 24) }), ErrTruncated},
		{"ipv4 icmp header cut", mod(icmp4[:14+20+4], func(b []byte) { be16(b[16:], 24) }), ErrTruncated},
		{"ipv4 first fragment without whole tcp header", mod(t4[:14+20+16], func(b []byte) {
			be16(b[16:], 36)
			b[20] |= 0x20
		}), ErrTruncated},
		{"short ipv6", t6[:14+39], ErrTruncated},
		{"ipv6 ext header past payload", ip6Chain(tb, 60, []rawLayer{dstOpts(6)[:8]}), ErrTruncated},
		{"ipv6 ext length past payload", mod(ip6Chain(tb, 60, []rawLayer{dstOpts(59)}), func(b []byte) { b[55] = 2 }), ErrTruncated},
		{"ipv6 fragment header past payload", ip6Chain(tb, 44, []rawLayer{fragment6(6, 8, false, 1)[:6]}), ErrTruncated},
		{"ipv4 version 6", mod(t4, func(b []byte) { b[14] = 0x65 }), ErrBadVersion},
		{"ipv6 version 4", mod(t6, func(b []byte) { b[14] = 0x45 }), ErrBadVersion},
		{"ihl 4", mod(t4, func(b []byte) { b[14] = 0x44 }), ErrBadIHL},
		{"ihl 0", mod(t4, func(b []byte) { b[14] = 0x40 }), ErrBadIHL},
		{"total length below header", mod(t4, func(b []byte) { be16(b[16:], 19) }), ErrBadLength},
		{"total length zero", mod(t4, func(b []byte) { be16(b[16:], 0) }), ErrBadLength},
		{"total length past capture", mod(t4, func(b []byte) { be16(b[16:], uint16(len(t4)-14+1)) }), ErrBadLength},
		{"ipv6 payload length past capture", mod(t6, func(b []byte) { be16(b[18:], uint16(len(t6)-54+1)) }), ErrBadLength},
		{"nine extension headers", ip6Chain(tb, 60, nine, tcpLayer(nil)), ErrTooManyExtHeaders},
		{"hop-by-hop not first", ip6Chain(tb, 60, []rawLayer{dstOpts(0), hopByHop(6)}, tcpLayer(nil)), ErrBadExtHeader},
		{"two fragment headers", ip6Chain(tb, 44, []rawLayer{fragment6(44, 0, true, 1), fragment6(6, 0, true, 1)}, tcpLayer(nil)), ErrBadExtHeader},
		{"ipv4 tcp fragment at offset 8", mod(t4, func(b []byte) { be16(b[20:], 1) }), ErrBadFragment},
		{"tcp data offset 4", mod(t4, func(b []byte) { b[14+20+12] = 0x40 }), ErrBadTCPOffset},
		{"tcp data offset past segment", mod(t4[:14+20+20], func(b []byte) {
			be16(b[16:], 40)
			b[14+20+12] = 0x60
		}), ErrBadTCPOffset},
		{"ipv6 tcp data offset past segment", mod(t6[:54+40], func(b []byte) {
			be16(b[18:], 40)
			b[54+12] = 0xf0
		}), ErrBadTCPOffset},
		{"udp length 7", mod(u4, func(b []byte) { be16(b[14+20+4:], 7) }), ErrBadUDPLength},
		{"udp length past payload", mod(u4, func(b []byte) { be16(b[14+20+4:], uint16(len(u4)-34+1)) }), ErrBadUDPLength},
		{"ipv6 udp zero checksum", mod(u6, func(b []byte) { be16(b[54+6:], 0) }), ErrUDPZeroChecksum},
	}
}

func TestParseErrors(t *testing.T) {
	seen := map[error]bool{}
	for _, c := range errorCases(t) {
		t.Run(c.name, func(t *testing.T) {
			var f Frame
			if err := Parse(c.frame, &f); err != c.want {
				t.Fatalf("Parse = %v, want %v (frame %+v)", err, c.want, f)
			}
			seen[c.want] = true
		})
	}
	for _, err := range []error{ErrTruncated, ErrBadVersion, ErrBadIHL, ErrBadLength,
		ErrTooManyExtHeaders, ErrBadExtHeader, ErrBadFragment, ErrBadTCPOffset,
		ErrBadUDPLength, ErrUDPZeroChecksum} {
		if !seen[err] {
			t.Errorf("no case produces %v", err)
		}
	}
}

func TestParseEightExtHeadersIsEnough(t *testing.T) {
	ext := make([]rawLayer, MaxIPv6ExtHeaders)
	for i := range ext {
		ext[i] = dstOpts(60)
	}
	ext[len(ext)-1] = dstOpts(6)
	frame := ip6Chain(t, 60, ext, tcpLayer(nil), payload)
	f := mustParse(t, frame)
	if f.L4Off != 14+40+16*MaxIPv6ExtHeaders || !f.HasL4 {
		t.Fatalf("Parse: %+v", f)
	}
}

func TestParseResetsFrame(t *testing.T) {
	var f Frame
	if err := Parse(tcp4Frame(t), &f); err != nil {
		t.Fatal(err)
	}
	if err := Parse(arpFrame(t, nil), &f); err != nil {
		t.Fatal(err)
	}
	if want := (Frame{L3Off: 14, EtherType: EtherTypeARP}); f != want {
		t.Fatalf("stale fields after reuse: %+v", f)
	}
}

// checkCommonAgrees fails t if ParseCommon takes frame and fills a Frame
// other than the general path's, or takes a frame the general path
// rejects.
func checkCommonAgrees(t *testing.T, frame []byte) {
	t.Helper()
	var c, g Frame
	if !ParseCommon(frame, &c) {
		return
	}
	if err := parseGeneral(frame, &g); err != nil || c != g {
		t.Fatalf("ParseCommon %+v; general path %+v, %v\n%x", c, g, err, frame)
	}
}

// TestParseCommonAgrees runs ParseCommon against the general path on
// common frames with every header byte set to values around the edges
// the checks test (lengths, version and IHL, flags, data offset).
func TestParseCommonAgrees(t *testing.T) {
	taken := 0
	for _, base := range [][]byte{tcp4Frame(t), udp4Frame(t), tcp6Frame(t)} {
		for i := 0; i < min(len(base), 14+20+20); i++ {
			for _, v := range []byte{0, 1, 4, 5, 6, 8, 0x11, 0x14, 0x20, 0x3f, 0x40, 0x45, 0x46, 0x50, 0x80, 0xf0, 0xff} {
				frame := append([]byte(nil), base...)
				frame[i] = v
				checkCommonAgrees(t, frame)
				var f Frame
				if ParseCommon(frame, &f) {
					taken++
				}
			}
			checkCommonAgrees(t, base[:i]) // truncated
		}
	}
	if taken == 0 {
		t.Fatal("ParseCommon took no frame")
	}
	t.Logf("%d frames took the common path", taken)
}
