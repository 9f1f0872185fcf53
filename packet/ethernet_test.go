package packet

import (
	"bytes"
	"testing"

	"github.com/google/gopacket/layers"
)

func TestEthernetView(t *testing.T) {
	cases := []struct {
		name   string
		frame  []byte
		vlan   bool
		vlanID uint16
		etype  uint16
		hdrLen int
	}{
		{"untagged ipv4", tcp4Frame(t), false, 0, EtherTypeIPv4, 14},
		{"tagged arp", arpFrame(t, &layers.Dot1Q{Priority: 3, VLANIdentifier: 0xabc, Type: layers.EthernetTypeARP}),
			true, 0xabc, EtherTypeARP, 18},
		{"untagged ipv6", tcp6Frame(t), false, 0, EtherTypeIPv6, 14},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := Ethernet(c.frame)
			if !e.IsValid() {
				t.Fatal("IsValid = false")
			}
			p := decode(t, c.frame)
			g := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
			if d, s := e.Destination(), e.Source(); !bytes.Equal(d[:], g.DstMAC) || !bytes.Equal(s[:], g.SrcMAC) {
				t.Errorf("MACs %x %x, gopacket %v %v", d, s, g.DstMAC, g.SrcMAC)
			}
			if e.HasVLAN() != c.vlan || e.EtherType() != c.etype || e.HeaderLength() != c.hdrLen ||
				len(e.Payload()) != len(c.frame)-c.hdrLen {
				t.Errorf("HasVLAN %v EtherType %#x HeaderLength %d", e.HasVLAN(), e.EtherType(), e.HeaderLength())
			}
			if c.vlan {
				q := p.Layer(layers.LayerTypeDot1Q).(*layers.Dot1Q)
				if e.VLANID() != q.VLANIdentifier || e.VLANID() != c.vlanID || e.VLANTCI()>>13 != uint16(q.Priority) {
					t.Errorf("VLAN TCI %#x, gopacket id %d prio %d", e.VLANTCI(), q.VLANIdentifier, q.Priority)
				}
			}
			src, dst := [6]byte{0x02, 1, 2, 3, 4, 5}, [6]byte{0x02, 6, 7, 8, 9, 10}
			e.SetSource(src)
			e.SetDestination(dst)
			g = decode(t, c.frame).Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
			if !bytes.Equal(g.SrcMAC, src[:]) || !bytes.Equal(g.DstMAC, dst[:]) {
				t.Errorf("after set: gopacket reads %v %v", g.SrcMAC, g.DstMAC)
			}
			if e.EtherType() != c.etype {
				t.Errorf("setting MACs changed the EtherType")
			}
		})
	}
}

func TestEthernetIsValid(t *testing.T) {
	tagged := make([]byte, 18)
	tagged[12], tagged[13] = 0x81, 0x00
	cases := []struct {
		name string
		b    []byte
		want bool
	}{
		{"13 bytes", make([]byte, 13), false},
		{"14 bytes", make([]byte, 14), true},
		{"tagged, 17 bytes", tagged[:17], false},
		{"tagged, 18 bytes", tagged, true},
	}
	for _, c := range cases {
		if got := Ethernet(c.b).IsValid(); got != c.want {
			t.Errorf("%s: IsValid = %v, want %v", c.name, got, c.want)
		}
	}
}
