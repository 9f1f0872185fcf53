package packet

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

func TestIPv4View(t *testing.T) {
	withOpts := ip4Layer(layers.IPProtocolUDP)
	withOpts.TOS = 0xb8
	withOpts.Options = []layers.IPv4Option{{OptionType: 0x94, OptionLength: 4, OptionData: []byte{0, 0}}}
	frag := ip4Layer(layers.IPProtocolUDP)
	frag.Flags, frag.FragOffset, frag.Id = layers.IPv4MoreFragments, 370, 0xbeef
	cases := []struct {
		name string
		ip   *layers.IPv4
	}{
		{"plain", ip4Layer(layers.IPProtocolUDP)},
		{"options", withOpts},
		{"middle fragment", frag},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			frame := serialize(t, ethLayer(layers.EthernetTypeIPv4), c.ip, gopacket.Payload(make([]byte, 16)))
			ip := IPv4(frame[14:])
			if err := ip.Validate(); err != nil {
				t.Fatal(err)
			}
			g := decode(t, frame).Layer(layers.LayerTypeIPv4).(*layers.IPv4)
			src, dst := ip.SourceAddress(), ip.DestinationAddress()
			checks := []struct {
				what      string
				got, want any
			}{
				{"Version", ip.Version(), g.Version},
				{"HeaderLength", ip.HeaderLength(), int(g.IHL) * 4},
				{"TOS", ip.TOS(), g.TOS},
				{"TotalLength", ip.TotalLength(), g.Length},
				{"ID", ip.ID(), g.Id},
				{"Flags", ip.Flags(), uint8(g.Flags)},
				{"DF", ip.DF(), g.Flags&layers.IPv4DontFragment != 0},
				{"MF", ip.MF(), g.Flags&layers.IPv4MoreFragments != 0},
				{"FragmentOffset", ip.FragmentOffset(), g.FragOffset * 8},
				{"TTL", ip.TTL(), g.TTL},
				{"Protocol", ip.Protocol(), uint8(g.Protocol)},
				{"Checksum", ip.Checksum(), g.Checksum},
				{"ComputeChecksum", ip.ComputeChecksum(), g.Checksum},
				{"IsChecksumValid", ip.IsChecksumValid(), true},
				{"SourceAddress", net.IP(src[:]).String(), g.SrcIP.String()},
				{"DestinationAddress", net.IP(dst[:]).String(), g.DstIP.String()},
				{"SourceUint32", ip.SourceUint32(), binary.BigEndian.Uint32(g.SrcIP)},
				{"DestinationUint32", ip.DestinationUint32(), binary.BigEndian.Uint32(g.DstIP)},
				{"Options", len(ip.Options()), int(g.IHL)*4 - 20},
				{"Payload", len(ip.Payload()), len(g.Payload)},
				{"PayloadLength", int(ip.PayloadLength()), len(g.Payload)},
			}
			for _, c := range checks {
				if c.got != c.want {
					t.Errorf("%s = %v, gopacket %v", c.what, c.got, c.want)
				}
			}
			if len(g.Options) > 0 && !bytes.Equal(ip.Options()[:4], []byte{0x94, 4, 0, 0}) {
				t.Errorf("Options = % x", ip.Options())
			}
		})
	}
}

func TestIPv4Fragments(t *testing.T) {
	cases := []struct {
		name        string
		flagsFrag   uint16
		frag, first bool
	}{
		{"whole, DF", 0x4000, false, false},
		{"whole, no flags", 0, false, false},
		{"first", 0x2000, true, true},
		{"middle", 0x2000 | 185, true, false},
		{"last", 185, true, false},
		{"reserved bit only", 0x8000, false, false},
	}
	for _, c := range cases {
		ip := IPv4(serialize(t, ip4Layer(17), gopacket.Payload(make([]byte, 8))))
		binary.BigEndian.PutUint16(ip[6:], c.flagsFrag)
		if ip.IsFragment() != c.frag || ip.IsFirstFragment() != c.first {
			t.Errorf("%s: IsFragment %v IsFirstFragment %v", c.name, ip.IsFragment(), ip.IsFirstFragment())
		}
	}
}

func TestIPv4Setters(t *testing.T) {
	frame := tcp4Frame(t)
	f := mustParse(t, frame)
	ip, tcp := f.IPv4(frame), f.TCP(frame)
	newDst := [4]byte{198, 18, 7, 9}
	newSrc := [4]byte{198, 19, 255, 255}

	oldDst := ip.DestinationAddress()
	ip.SetDestinationAddressWithChecksumUpdate(newDst)
	tcp.UpdatePseudoHeaderAddress4(oldDst, newDst)
	oldSrc := ip.SourceAddress()
	ip.SetSourceAddressWithChecksumUpdate(newSrc)
	tcp.UpdatePseudoHeaderAddress4(oldSrc, newSrc)
	if !ip.DecTTL() {
		t.Fatal("DecTTL refused TTL 64")
	}
	g := checkChecksums(t, frame).Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	if !bytes.Equal(g.DstIP, newDst[:]) || !bytes.Equal(g.SrcIP, newSrc[:]) || g.TTL != 63 {
		t.Fatalf("gopacket reads %v -> %v TTL %d", g.SrcIP, g.DstIP, g.TTL)
	}

	// Raw setters, then a full checksum.
	ip.SetTOS(0x28)
	ip.SetID(0x4242)
	ip.SetFlagsFragmentOffset(0, 0)
	ip.SetTTL(1)
	ip.SetChecksum(ip.ComputeChecksum())
	g = checkChecksums(t, frame).Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	if g.TOS != 0x28 || g.Id != 0x4242 || g.Flags != 0 || g.FragOffset != 0 || g.TTL != 1 {
		t.Fatalf("gopacket reads %+v", g)
	}
	ip.SetFlagsFragmentOffset(1, 1480)
	if ip.FragmentOffset() != 1480 || !ip.MF() || ip.DF() {
		t.Fatalf("SetFlagsFragmentOffset(1, 1480): offset %d MF %v DF %v", ip.FragmentOffset(), ip.MF(), ip.DF())
	}
	ip.SetFlagsFragmentOffset(2, 0)

	// TTL 1 and 0 must not be forwarded and are left alone.
	for _, ttl := range []uint8{1, 0} {
		ip.SetTTL(ttl)
		ip.SetChecksum(ip.ComputeChecksum())
		before := append([]byte(nil), ip...)
		if ip.DecTTL() || !bytes.Equal(before, ip) {
			t.Errorf("DecTTL at TTL %d returned true or changed the header", ttl)
		}
	}

	ip.SetProtocol(17)
	ip.SetTotalLength(ip.TotalLength() - 1)
	if ip.Protocol() != 17 || ip.IsChecksumValid() {
		t.Errorf("raw setters: protocol %d, checksum still valid", ip.Protocol())
	}
}

func TestIPv4DecTTLEqualsRecompute(t *testing.T) {
	// Every TTL and a few protocols and IDs, including for each an ID that
	// makes the decremented header's checksum 0x0000, the RFC 1624 corner.
	ip := IPv4(serialize(t, ip4Layer(6), gopacket.Payload(nil)))
	zeros := 0
	for ttl := 2; ttl < 256; ttl++ {
		for _, proto := range []uint8{0, 1, 6, 17, 255} {
			// With TTL-1 and ID 0 the checksum is c; an ID of c adds c
			// to the sum ~c, making it 0xFFFF and the checksum 0.
			ip.SetTTL(uint8(ttl - 1))
			ip.SetProtocol(proto)
			ip.SetID(0)
			zeroID := ip.ComputeChecksum()
			for _, id := range []uint16{0, 0xffff, zeroID} {
				ip.SetTTL(uint8(ttl))
				ip.SetID(id)
				ip.SetChecksum(ip.ComputeChecksum())
				ip.DecTTL()
				want := ^refSum(append(append([]byte(nil), ip[:10]...), ip[12:20]...), 0)
				if ip.Checksum() != want {
					t.Fatalf("TTL %d proto %d id %#x: %#04x, recomputed %#04x", ttl, proto, id, ip.Checksum(), want)
				}
				if want == 0 {
					zeros++
				}
			}
		}
	}
	if zeros == 0 {
		t.Fatal("no case produced checksum 0x0000")
	}
}

// TestSourceRouted4: Parse marks an IPv4 packet Routed when a loose or
// strict source route option has an address left (its pointer not past
// its end, RFC 791 §3.1), wherever it stands among the options; an
// exhausted route, other options and malformed lists are not.
func TestSourceRouted4(t *testing.T) {
	route := func(typ, ptr byte) []byte { return []byte{typ, 7, ptr, 198, 18, 99, 1} }
	cat := func(bs ...[]byte) []byte {
		var out []byte
		for _, b := range bs {
			out = append(out, b...)
		}
		for len(out)%4 != 0 {
			out = append(out, 0) // End of Option List, then padding
		}
		return out
	}
	cases := []struct {
		name   string
		opts   []byte
		routed bool
	}{
		{"none", nil, false},
		{"router alert", []byte{0x94, 4, 0, 0}, false},
		{"LSRR, an address left", cat(route(131, 4)), true},
		{"SSRR, an address left", cat(route(137, 4)), true},
		{"LSRR exhausted", cat(route(131, 8)), false},
		{"after NOPs and a router alert", cat([]byte{1, 1, 0x94, 4, 0, 0}, route(131, 4)), true},
		{"after End of Option List", cat([]byte{0, 1, 1, 1}, route(131, 4)), false},
		{"record route is no source route", cat(route(7, 4)), false},
		{"length past the options", []byte{131, 9, 4, 0}, false},
		{"length 1", []byte{0x94, 1, 131, 7}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ip := ip4Layer(layers.IPProtocolUDP)
			frame := serialize(t, ethLayer(layers.EthernetTypeIPv4), ip, udpLayer(ip), gopacket.Payload(make([]byte, 16)))
			if len(c.opts) > 0 {
				frame = append(append(append([]byte(nil), frame[:14+20]...), c.opts...), frame[14+20:]...)
				frame[14] = 0x45 + byte(len(c.opts)/4)
				binary.BigEndian.PutUint16(frame[14+2:], uint16(len(frame)-14))
				frame[14+10], frame[14+11] = 0, 0
				binary.BigEndian.PutUint16(frame[14+10:], IPv4(frame[14:]).ComputeChecksum())
			}
			var f Frame
			if err := Parse(frame, &f); err != nil {
				t.Fatal(err)
			}
			if f.Routed != c.routed {
				t.Errorf("Routed %v, want %v", f.Routed, c.routed)
			}
		})
	}
}
