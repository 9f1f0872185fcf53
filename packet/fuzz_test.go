package packet

import (
	"bytes"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// addSeeds adds the frames of the Parse tables to the fuzz corpus, next to
// the hand-picked ones in testdata/fuzz.
func addSeeds(f *testing.F) {
	for _, c := range parseCases(f) {
		f.Add(c.frame)
	}
	for _, c := range errorCases(f) {
		f.Add(c.frame)
	}
}

var sentinels = []error{ErrTruncated, ErrBadVersion, ErrBadIHL, ErrBadLength,
	ErrTooManyExtHeaders, ErrBadExtHeader, ErrBadFragment, ErrBadTCPOffset,
	ErrBadUDPLength, ErrUDPZeroChecksum}

// FuzzParse: Parse never panics, fails only with a sentinel, and when it
// accepts a frame every accessor the pipeline may call is in bounds.
// Incremental rewrites keep correct checksums correct and the frame's shape
// unchanged.
func FuzzParse(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		frame := append([]byte(nil), in...)
		checkCommonAgrees(t, frame)
		var fr Frame
		if err := Parse(frame, &fr); err != nil {
			for _, s := range sentinels {
				if err == s {
					return
				}
			}
			t.Fatalf("Parse returned a non-sentinel error %v", err)
		}
		checkFrameInvariants(t, frame, &fr)
		readAll(frame, &fr)
		if fr.EtherType != EtherTypeIPv4 && fr.EtherType != EtherTypeIPv6 {
			return
		}

		// NAT-style rewrite: checksums that were right stay right.
		l3ok := fr.EtherType == EtherTypeIPv4 && fr.IPv4(frame).IsChecksumValid()
		l4ok := fr.HasL4 && !fr.Frag && l4ChecksumValid(frame, &fr)
		natRewrite4or6(frame, &fr)
		if l3ok && !fr.IPv4(frame).IsChecksumValid() {
			t.Fatalf("IPv4 header checksum broken by incremental updates")
		}
		if l4ok && !l4ChecksumValid(frame, &fr) {
			t.Fatalf("L4 checksum broken by incremental updates")
		}
		var again Frame
		if err := Parse(frame, &again); err != nil || again != fr {
			t.Fatalf("rewrite changed the parse: %v\n%+v\n%+v", err, fr, again)
		}
	})
}

func checkFrameInvariants(t *testing.T, frame []byte, f *Frame) {
	t.Helper()
	if f.L3Off != 14 && f.L3Off != 18 || f.VLAN != (f.L3Off == 18) {
		t.Fatalf("L3Off %d VLAN %v", f.L3Off, f.VLAN)
	}
	if f.EtherType != EtherTypeIPv4 && f.EtherType != EtherTypeIPv6 {
		if f.L4Off != 0 || f.L3Len != 0 || f.HasL4 || f.Frag {
			t.Fatalf("non-IP frame with IP fields: %+v", *f)
		}
		return
	}
	min := IPv4MinSize
	if f.EtherType == EtherTypeIPv6 {
		min = IPv6Size
	}
	end := f.L3Off + f.L3Len
	if f.L3Len < min || end > len(frame) || f.L4Off < f.L3Off+min || f.L4Off > end {
		t.Fatalf("offsets out of range for a %d-byte frame: %+v", len(frame), *f)
	}
	if f.FirstFrag && !f.Frag || f.HasL4 && f.Frag && !f.FirstFrag {
		t.Fatalf("fragment flags: %+v", *f)
	}
	if f.FragHdrOff != 0 && (f.EtherType != EtherTypeIPv6 || f.FragHdrOff+IPv6FragmentSize > f.L4Off) {
		t.Fatalf("fragment header offset: %+v", *f)
	}
}

// readAll calls every accessor of every view the frame offers.
func readAll(frame []byte, f *Frame) {
	e := f.Ethernet(frame)
	_, _, _, _ = e.Destination(), e.Source(), e.EtherType(), e.HeaderLength()
	_ = e.HasVLAN()
	if f.VLAN {
		_ = e.VLANID()
	}
	switch f.EtherType {
	case EtherTypeIPv4:
		ip := f.IPv4(frame)
		_, _, _, _, _ = ip.Version(), ip.HeaderLength(), ip.TOS(), ip.TotalLength(), ip.ID()
		_, _, _, _, _ = ip.Flags(), ip.DF(), ip.MF(), ip.FragmentOffset(), ip.IsFragment()
		_, _, _, _, _ = ip.IsFirstFragment(), ip.TTL(), ip.Protocol(), ip.Checksum(), ip.ComputeChecksum()
		_, _, _, _, _ = ip.IsChecksumValid(), ip.SourceAddress(), ip.DestinationAddress(), ip.SourceUint32(), ip.DestinationUint32()
		_, _, _ = ip.Options(), ip.Payload(), ip.PayloadLength()
	case EtherTypeIPv6:
		ip := f.IPv6(frame)
		_, _, _, _, _ = ip.Version(), ip.TrafficClass(), ip.FlowLabel(), ip.PayloadLength(), ip.NextHeader()
		_, _, _, _ = ip.HopLimit(), ip.SourceAddress(), ip.DestinationAddress(), ip.Payload()
		var x IPv6ExtHeaders
		if err := ip.ExtHeaders(&x); err != nil {
			panic("ExtHeaders fails on a frame Parse accepted")
		}
		if f.FragHdrOff != 0 {
			h := f.IPv6Fragment(frame)
			_, _, _, _ = h.NextHeader(), h.FragmentOffset(), h.More(), h.Identification()
		}
	}
	_ = f.L4(frame)
	if !f.HasL4 {
		return
	}
	switch f.Proto {
	case ProtoTCP:
		t := f.TCP(frame)
		_, _, _, _, _ = t.SourcePort(), t.DestinationPort(), t.SequenceNumber(), t.AckNumber(), t.DataOffset()
		_, _, _, _, _ = t.Flags(), t.WindowSize(), t.Checksum(), t.UrgentPointer(), t.Options()
		_, _, _ = t.Payload(), t.ComputeChecksum(0), t.IsChecksumValid(0)
	case ProtoUDP:
		u := f.UDP(frame)
		_, _, _, _, _ = u.SourcePort(), u.DestinationPort(), u.Length(), u.Checksum(), u.Payload()
		_, _ = u.ComputeChecksum(0), u.IsChecksumValid(0)
	case ProtoICMPv4:
		m := f.ICMPv4(frame)
		_, _, _, _, _ = m.Type(), m.Code(), m.Checksum(), m.RestOfHeader(), m.Ident()
		_, _, _, _, _ = m.Sequence(), m.MTU(), m.Payload(), m.IsFlowError(), m.ComputeChecksum()
		_ = m.IsChecksumValid()
		var q Quote
		if m.IsFlowError() && ParseQuote4(m.Payload(), &q) == nil && q.HasPorts {
			_ = UDP(m.Payload()[q.L4Off:q.End]).DestinationPort()
		}
	case ProtoICMPv6:
		m := f.ICMPv6(frame)
		_, _, _, _, _ = m.Type(), m.Code(), m.Checksum(), m.RestOfHeader(), m.Ident()
		_, _, _, _, _ = m.Sequence(), m.MTU(), m.Payload(), m.IsFlowError(), m.ComputeChecksum(0)
		_ = m.IsChecksumValid(0)
		var q Quote
		if m.IsFlowError() && ParseQuote6(m.Payload(), &q) == nil && q.HasPorts {
			_ = UDP(m.Payload()[q.L4Off:q.End]).DestinationPort()
		}
	}
}

func l4ChecksumValid(frame []byte, f *Frame) bool {
	pseudo := l4Pseudo(frame, f)
	switch f.Proto {
	case ProtoTCP:
		return f.TCP(frame).IsChecksumValid(pseudo)
	case ProtoUDP:
		u := f.UDP(frame)
		if int(u.Length()) != len(u) {
			return false // the pseudo-header would need Length; keep it simple
		}
		return u.Checksum() != 0 && u.IsChecksumValid(pseudo)
	}
	return false
}

// natRewrite4or6 rewrites what the NAT path rewrites, for any protocol.
func natRewrite4or6(frame []byte, f *Frame) {
	if f.HasL4 && (f.Proto == ProtoTCP || f.Proto == ProtoUDP) {
		natRewrite(frame, f, [4]byte{198, 18, 9, 9}, &[16]byte{0x20, 0x01, 0, 2, 15: 9}, 8080)
		return
	}
	if f.EtherType == EtherTypeIPv4 {
		ip := f.IPv4(frame)
		ip.SetDestinationAddressWithChecksumUpdate([4]byte{198, 18, 9, 9})
		ip.DecTTL()
		return
	}
	f.IPv6(frame).DecHopLimit()
}

// FuzzParseGopacket compares Parse with gopacket on the frames both should
// understand: when gopacket cleanly decodes Ethernet (one optional tag),
// IPv4 or IPv6 (with only the extension headers Parse skips) and TCP or UDP,
// Parse agrees on offsets and protocol; and when Parse accepts a plain
// unfragmented TCP or UDP frame without options, gopacket finds the same.
func FuzzParseGopacket(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, frame []byte) {
		var fr Frame
		err := Parse(frame, &fr)
		p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.NoCopy)
		l3, l4, ok := gopacketPlainL4(frame, p)
		if ok {
			if err != nil {
				t.Fatalf("gopacket decodes IP+%v, Parse fails: %v", l4.LayerType(), err)
			}
			if fr.L3Off != offsetIn(frame, l3.LayerContents()) || fr.L4Off != offsetIn(frame, l4.LayerContents()) ||
				!fr.HasL4 || layers.IPProtocol(fr.Proto) != protoOf(l4) {
				t.Fatalf("gopacket: IP at %d, %v at %d; Parse %+v", offsetIn(frame, l3.LayerContents()),
					l4.LayerType(), offsetIn(frame, l4.LayerContents()), fr)
			}
		}
		if err != nil || !fr.HasL4 || fr.Frag || (fr.Proto != ProtoTCP && fr.Proto != ProtoUDP) {
			return
		}
		if fr.EtherType == EtherTypeIPv4 && fr.L4Off != fr.L3Off+IPv4MinSize ||
			fr.EtherType == EtherTypeIPv6 && fr.L4Off != fr.L3Off+IPv6Size ||
			fr.Proto == ProtoTCP && fr.TCP(frame).DataOffset() != TCPMinSize {
			return // options and extension headers gopacket may reject for their content
		}
		var g4 gopacket.Layer = p.TransportLayer()
		// (gopacket's Truncated flag is not consulted: application
		// decoders guessed from the port set it too.)
		if g4 == nil || p.NetworkLayer() == nil ||
			offsetIn(frame, g4.LayerContents()) != fr.L4Off || protoOf(g4) != layers.IPProtocol(fr.Proto) ||
			offsetIn(frame, p.NetworkLayer().LayerContents()) != fr.L3Off {
			t.Fatalf("Parse accepts %+v; gopacket decodes %v", fr, p)
		}
	})
}

func protoOf(l gopacket.Layer) layers.IPProtocol {
	switch l.(type) {
	case *layers.TCP:
		return layers.IPProtocolTCP
	case *layers.UDP:
		return layers.IPProtocolUDP
	}
	return 255
}

// gopacketPlainL4 reports whether gopacket decoded frame as Ethernet, at
// most one 802.1Q tag, IPv4 or IPv6 with only Hop-by-Hop (first), Routing or
// Destination Options extension headers, then TCP or UDP, all whole, with
// the fields Parse insists on and gopacket does not (versions, non-zero
// lengths, lengths within the captured bytes, an IPv6 UDP checksum).
func gopacketPlainL4(frame []byte, p gopacket.Packet) (l3, l4 gopacket.Layer, ok bool) {
	if len(frame) < 18 {
		return nil, nil, false
	}
	et := uint16(frame[12])<<8 | uint16(frame[13])
	if et == EtherTypeVLAN {
		et = uint16(frame[16])<<8 | uint16(frame[17])
	}
	if et != EtherTypeIPv4 && et != EtherTypeIPv6 {
		return nil, nil, false
	}
	ext := 0
	var last gopacket.Layer
	for _, l := range p.Layers() {
		prev := last
		last = l
		switch l := l.(type) {
		case *layers.Ethernet, *layers.Dot1Q:
		case *layers.IPv4:
			off := offsetIn(frame, l.Contents)
			if l3 != nil || l.Version != 4 || bytes.Equal(frame[off+2:][:2], []byte{0, 0}) ||
				int(l.Length) > len(frame)-off || // gopacket only marks this truncated
				l.Flags&layers.IPv4MoreFragments != 0 || l.FragOffset != 0 || et != EtherTypeIPv4 {
				return nil, nil, false
			}
			l3 = l
		case *layers.IPv6:
			if l3 != nil || l.Version != 6 || l.Length == 0 || et != EtherTypeIPv6 ||
				IPv6Size+int(l.Length) > len(frame)-offsetIn(frame, l.Contents) {
				return nil, nil, false
			}
			l3 = l
			if l.HopByHop != nil {
				ext++
			}
		case *layers.IPv6HopByHop:
			// gopacket folds the first Hop-by-Hop header into the IPv6
			// layer; one that appears as a layer of its own is not first.
			return nil, nil, false
		case *layers.IPv6Routing, *layers.IPv6Destination:
			ext++
		case *layers.TCP:
			// gopacket adds the layer even when decoding it fails; decode
			// the same bytes again to learn whether it did.
			var again layers.TCP
			if l3 == nil || again.DecodeFromBytes(prev.LayerPayload(), gopacket.NilDecodeFeedback) != nil {
				return nil, nil, false
			}
			return l3, l, ext <= MaxIPv6ExtHeaders
		case *layers.UDP:
			var again layers.UDP
			if l3 == nil || again.DecodeFromBytes(prev.LayerPayload(), gopacket.NilDecodeFeedback) != nil {
				return nil, nil, false
			}
			v6 := et == EtherTypeIPv6
			return l3, l, ext <= MaxIPv6ExtHeaders && l.Length >= 8 &&
				int(l.Length) <= len(prev.LayerPayload()) && !(v6 && l.Checksum == 0)
		default:
			return nil, nil, false
		}
	}
	return nil, nil, false
}
