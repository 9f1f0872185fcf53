package packet

import (
	"testing"

	"github.com/google/gopacket/layers"
)

func TestUDPView(t *testing.T) {
	for _, frame := range [][]byte{udp4Frame(t), ip6Chain(t, 17, nil, udpLayer(nil), payload)} {
		f := mustParse(t, frame)
		u := f.UDP(frame)
		g := decode(t, frame).Layer(layers.LayerTypeUDP).(*layers.UDP)
		if u.SourcePort() != uint16(g.SrcPort) || u.DestinationPort() != uint16(g.DstPort) ||
			u.Length() != g.Length || u.Checksum() != g.Checksum || string(u.Payload()) != string(g.Payload) {
			t.Errorf("view %d %d %d %#x, gopacket %+v", u.SourcePort(), u.DestinationPort(), u.Length(), u.Checksum(), g)
		}
		pseudo := l4Pseudo(frame, &f)
		if u.ComputeChecksum(pseudo) != g.Checksum || !u.IsChecksumValid(pseudo) {
			t.Errorf("ComputeChecksum %#04x, gopacket %#04x", u.ComputeChecksum(pseudo), g.Checksum)
		}

		u.SetDestinationPortWithChecksumUpdate(53)
		u.SetSourcePortWithChecksumUpdate(65535)
		g = checkChecksums(t, frame).Layer(layers.LayerTypeUDP).(*layers.UDP)
		if g.DstPort != 53 || g.SrcPort != 65535 {
			t.Fatalf("gopacket reads ports %d -> %d", g.SrcPort, g.DstPort)
		}
		u.SetSourcePort(1)
		u.SetDestinationPort(2)
		u.SetChecksum(u.ComputeChecksum(pseudo))
		if g = checkChecksums(t, frame).Layer(layers.LayerTypeUDP).(*layers.UDP); g.SrcPort != 1 || g.DstPort != 2 {
			t.Fatalf("gopacket reads ports %d -> %d", g.SrcPort, g.DstPort)
		}
	}
}

func TestUDPZeroChecksumStaysZero(t *testing.T) {
	frame := udp4Frame(t)
	f := mustParse(t, frame)
	u := f.UDP(frame)
	u.SetChecksum(0)
	u.SetDestinationPortWithChecksumUpdate(9)
	u.SetSourcePortWithChecksumUpdate(10)
	u.UpdatePseudoHeaderAddress4([4]byte{1, 2, 3, 4}, [4]byte{5, 6, 7, 8})
	var a, b [16]byte
	b[3] = 1
	u.UpdatePseudoHeaderAddress6(&a, &b)
	if u.Checksum() != 0 {
		t.Fatalf("zero (absent) IPv4 UDP checksum became %#04x", u.Checksum())
	}
}

func TestUDPValidate(t *testing.T) {
	b := UDP(make([]byte, 20))
	cases := []struct {
		length uint16
		frag   bool
		want   error
	}{
		{8, false, nil},
		{20, false, nil},
		{12, false, nil}, // trailing bytes after the datagram are allowed
		{21, false, ErrBadUDPLength},
		{21, true, nil}, // a fragment holds less than Length
		{7, false, ErrBadUDPLength},
		{0, true, ErrBadUDPLength},
	}
	for _, c := range cases {
		b.SetLength(c.length)
		if err := b.Validate(c.frag); err != c.want {
			t.Errorf("Length %d frag %v: %v, want %v", c.length, c.frag, err, c.want)
		}
	}
	if err := UDP(make([]byte, 7)).Validate(false); err != ErrTruncated {
		t.Errorf("7 bytes: %v", err)
	}
	// A fragment's view is shorter than Length; Payload and the checksum
	// helpers stay in bounds.
	b.SetLength(100)
	if len(b.Payload()) != 12 {
		t.Errorf("Payload of a cut datagram: %d bytes", len(b.Payload()))
	}
	_ = b.ComputeChecksum(0)
	_ = b.IsChecksumValid(0)
}
