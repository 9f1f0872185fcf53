package packet

import (
	"bytes"
	"testing"

	"github.com/google/gopacket/layers"
)

func TestARPView(t *testing.T) {
	frame := arpFrame(t, nil)
	a := ARP(frame[14:])
	if !a.IsValid() {
		t.Fatal("IsValid = false for a gopacket ARP request")
	}
	g := decode(t, frame).Layer(layers.LayerTypeARP).(*layers.ARP)
	sha, spa, tha, tpa := a.SenderHardwareAddress(), a.SenderProtocolAddress(), a.TargetHardwareAddress(), a.TargetProtocolAddress()
	if a.Op() != g.Operation || !bytes.Equal(sha[:], g.SourceHwAddress) || !bytes.Equal(spa[:], g.SourceProtAddress) ||
		!bytes.Equal(tha[:], g.DstHwAddress) || !bytes.Equal(tpa[:], g.DstProtAddress) {
		t.Fatalf("view %d %x %v %x %v, gopacket %+v", a.Op(), sha, spa, tha, tpa, g)
	}

	// Answer it in place, as a responder would.
	vipMAC := [6]byte(macVIPD)
	a.SetOp(ARPReply)
	a.SetTargetHardwareAddress(sha)
	a.SetTargetProtocolAddress(spa)
	a.SetSenderHardwareAddress(vipMAC)
	a.SetSenderProtocolAddress(tpa)
	g = decode(t, frame).Layer(layers.LayerTypeARP).(*layers.ARP)
	if g.Operation != layers.ARPReply || !bytes.Equal(g.SourceHwAddress, vipMAC[:]) ||
		!bytes.Equal(g.SourceProtAddress, tpa[:]) || !bytes.Equal(g.DstHwAddress, sha[:]) ||
		!bytes.Equal(g.DstProtAddress, spa[:]) {
		t.Fatalf("reply per gopacket: %+v", g)
	}
}

func TestARPIsValid(t *testing.T) {
	good := ARP(arpFrame(t, nil)[14:])
	mod := func(i int, v byte) ARP {
		b := append(ARP(nil), good...)
		b[i] = v
		return b
	}
	cases := []struct {
		name string
		a    ARP
		want bool
	}{
		{"request", good, true},
		{"27 bytes", good[:27], false},
		{"hardware type 6", mod(1, 6), false},
		{"protocol IPv6", mod(2, 0x86), false},
		{"hardware length 8", mod(4, 8), false},
		{"protocol length 16", mod(5, 16), false},
	}
	for _, c := range cases {
		if got := c.a.IsValid(); got != c.want {
			t.Errorf("%s: IsValid = %v, want %v", c.name, got, c.want)
		}
	}
}
