package ipfrag

import (
	"bytes"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/vipd/vipd/packet"
)

// TestFragmenterOptions splits a datagram with IP options (one copied on
// fragmentation, one not) and checks every fragment with gopacket.
func TestFragmenterOptions(t *testing.T) {
	ip := &layers.IPv4{Version: 4, TTL: 64, Id: 77, Protocol: layers.IPProtocolUDP,
		SrcIP: net.IP{198, 18, 0, 1}, DstIP: net.IP{198, 18, 1, 1},
		Options: []layers.IPv4Option{
			{OptionType: 0x94, OptionLength: 4, OptionData: []byte{0, 0}},    // router alert: copied
			{OptionType: 0x07, OptionLength: 7, OptionData: make([]byte, 5)}, // record route: not copied
		}}
	data := make([]byte, 3000)
	for i := range data {
		data[i] = byte(i)
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true, FixLengths: true}, ip, gopacket.Payload(data)); err != nil {
		t.Fatal(err)
	}
	pkt := packet.IPv4(buf.Bytes())
	var f Fragmenter
	n := f.Init(pkt, 1000)
	if n != 4 {
		t.Fatalf("%d fragments, want 4", n)
	}
	var got []byte
	for i := 0; i < n; i++ {
		out := make([]byte, f.Len(i))
		if l := f.Write(i, out); l != len(out) {
			t.Fatalf("fragment %d: wrote %d, Len said %d", i, l, len(out))
		}
		p := gopacket.NewPacket(out, layers.LayerTypeIPv4, gopacket.Default)
		g := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		if len(out) > 1000 || g.Id != 77 || int(g.FragOffset)*8 != len(got) {
			t.Errorf("fragment %d: %d bytes, id %d, offset %d (want %d)", i, len(out), g.Id, int(g.FragOffset)*8, len(got))
		}
		if (g.Flags&layers.IPv4MoreFragments != 0) != (i < n-1) {
			t.Errorf("fragment %d: MF %v", i, g.Flags)
		}
		if !packet.IPv4(out).IsChecksumValid() {
			t.Errorf("fragment %d: bad header checksum", i)
		}
		wantOpts := 2
		if i > 0 {
			wantOpts = 1 // only the copied option
		}
		if len(g.Options) < wantOpts || (i > 0 && g.Options[0].OptionType != 0x94) {
			t.Errorf("fragment %d options %+v", i, g.Options)
		}
		if i > 0 {
			for _, o := range g.Options {
				if o.OptionType == 0x07 {
					t.Errorf("fragment %d carries a non-copied option", i)
				}
			}
		}
		got = append(got, g.Payload...)
	}
	if !bytes.Equal(got, data) {
		t.Errorf("reassembled data differs")
	}
}

func TestFragmenterTooSmall(t *testing.T) {
	hdr := make([]byte, 60+100)
	hdr[0] = 0x4f // IHL 15
	packet.IPv4(hdr).SetTotalLength(160)
	var f Fragmenter
	if n := f.Init(packet.IPv4(hdr), 64); n != 0 {
		t.Errorf("a 64-byte limit under a 60-byte header gave %d fragments", n)
	}
}

// TestFragmenterPastDatagramEnd: a fragment whose data ends past 65,535
// bytes (here 2,000 bytes at offset 65,528) is no datagram's; split, its
// second piece's offset wrapped to 1,472 and read as a valid one. Init
// refuses it; one that ends exactly at 65,535 is split.
func TestFragmenterPastDatagramEnd(t *testing.T) {
	for _, tc := range []struct {
		off, data int
		want      bool
	}{
		{65528, 2000, false},
		{65528, 7, true},
		{63528, 2000, true}, // ends at 65,528
	} {
		pkt := make([]byte, 20+tc.data)
		ip := packet.IPv4(pkt)
		pkt[0] = 0x45
		ip.SetTotalLength(uint16(len(pkt)))
		ip.SetFlagsFragmentOffset(0, uint16(tc.off))
		var f Fragmenter
		if n := f.Init(ip, 1500); (n > 0) != tc.want {
			t.Errorf("%d bytes at offset %d: %d fragments, want some: %v", tc.data, tc.off, n, tc.want)
		}
	}
}
