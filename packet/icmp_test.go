package packet

import (
	"bytes"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

func TestICMPv4View(t *testing.T) {
	inner := tcp4Frame(t)[14 : 14+28]
	frame := serialize(t, ethLayer(layers.EthernetTypeIPv4), ip4Layer(1),
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(3, 4), Seq: 1480}, gopacket.Payload(inner))
	f := mustParse(t, frame)
	m := f.ICMPv4(frame)
	g := decode(t, frame).Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
	if m.Type() != ICMPv4DstUnreachable || m.Code() != ICMPv4FragNeeded || m.Type() != g.TypeCode.Type() ||
		m.Code() != g.TypeCode.Code() || m.Checksum() != g.Checksum || m.MTU() != 1480 || !m.IsFlowError() ||
		!bytes.Equal(m.Payload(), inner) || m.RestOfHeader() != [4]byte{0, 0, 0x05, 0xc8} {
		t.Fatalf("view %d/%d %#x MTU %d, gopacket %+v", m.Type(), m.Code(), m.Checksum(), m.MTU(), g)
	}
	if m.ComputeChecksum() != g.Checksum || !m.IsChecksumValid() {
		t.Errorf("ComputeChecksum %#04x, gopacket %#04x", m.ComputeChecksum(), g.Checksum)
	}
	// Lower the MTU as vipd's frag-needed reply does, then turn it into an
	// echo with raw setters.
	m.SetMTU(1460)
	m.SetChecksum(m.ComputeChecksum())
	g = checkChecksums(t, frame).Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
	if g.Seq != 1460 {
		t.Fatalf("gopacket reads MTU %d", g.Seq)
	}
	m.SetType(ICMPv4Echo)
	m.SetCode(0)
	m.SetRestOfHeader([4]byte{0, 7, 0, 9})
	m.SetChecksum(m.ComputeChecksum())
	g = checkChecksums(t, frame).Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
	if g.TypeCode.Type() != 8 || g.Id != 7 || g.Seq != 9 || m.Ident() != 7 || m.Sequence() != 9 || m.IsFlowError() {
		t.Fatalf("gopacket reads %+v", g)
	}
}

func TestICMPv6View(t *testing.T) {
	inner := tcp6Frame(t)[14:]
	frame := ip6Chain(t, 58, nil, &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(2, 0)},
		gopacket.Payload(append([]byte{0, 0, 0x05, 0xc8}, inner...)))
	f := mustParse(t, frame)
	m := f.ICMPv6(frame)
	g := decode(t, frame).Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6)
	if m.Type() != ICMPv6PacketTooBig || m.Type() != g.TypeCode.Type() || m.Code() != g.TypeCode.Code() ||
		m.Checksum() != g.Checksum || m.MTU() != 1480 || !m.IsFlowError() || !bytes.Equal(m.Payload(), inner) ||
		m.RestOfHeader() != [4]byte{0, 0, 0x05, 0xc8} {
		t.Fatalf("view %d/%d %#x MTU %d, gopacket %+v", m.Type(), m.Code(), m.Checksum(), m.MTU(), g)
	}
	pseudo := l4Pseudo(frame, &f)
	if m.ComputeChecksum(pseudo) != g.Checksum || !m.IsChecksumValid(pseudo) {
		t.Errorf("ComputeChecksum %#04x, gopacket %#04x", m.ComputeChecksum(pseudo), g.Checksum)
	}
	m.SetMTU(1280)
	m.SetChecksum(m.ComputeChecksum(pseudo))
	checkChecksums(t, frame)
	if m.MTU() != 1280 {
		t.Fatal("SetMTU")
	}
	m.SetType(ICMPv6EchoRequest)
	m.SetCode(0)
	m.SetRestOfHeader([4]byte{0, 7, 0, 9})
	m.SetChecksum(m.ComputeChecksum(pseudo))
	p := checkChecksums(t, frame)
	e := p.Layer(layers.LayerTypeICMPv6Echo).(*layers.ICMPv6Echo)
	if e.Identifier != 7 || e.SeqNumber != 9 || m.Ident() != 7 || m.Sequence() != 9 || m.IsFlowError() {
		t.Fatalf("gopacket reads %+v", e)
	}
}

// TestICMPIsFlowError: only unreachable, time exceeded and parameter
// problem (and ICMPv6 packet too big) are relayed; redirects and source
// quench, which quote a datagram too, are not.
func TestICMPIsFlowError(t *testing.T) {
	b := make([]byte, 8)
	for typ := 0; typ < 256; typ++ {
		b[0] = uint8(typ)
		want4 := typ == 3 || typ == 11 || typ == 12
		if got := ICMPv4(b).IsFlowError(); got != want4 {
			t.Errorf("ICMPv4 type %d: IsFlowError = %v", typ, got)
		}
		want6 := typ >= 1 && typ <= 4
		if got := ICMPv6(b).IsFlowError(); got != want6 {
			t.Errorf("ICMPv6 type %d: IsFlowError = %v", typ, got)
		}
	}
	n := 0
	for typ := 0; typ < 256; typ++ {
		for _, e := range ICMPv4FlowErrors {
			if uint8(typ) == e {
				n++
				if !IsICMPv4FlowError(e) {
					t.Errorf("ICMPv4FlowErrors holds %d, IsICMPv4FlowError does not", e)
				}
			}
		}
	}
	if n != 3 {
		t.Errorf("ICMPv4FlowErrors has %d types, IsICMPv4FlowError 3", n)
	}
}
