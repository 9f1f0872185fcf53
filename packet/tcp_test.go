package packet

import (
	"bytes"
	"testing"

	"github.com/google/gopacket/layers"
)

func TestTCPView(t *testing.T) {
	for _, frame := range [][]byte{tcp4Frame(t), tcp6Frame(t)} {
		f := mustParse(t, frame)
		tcp := f.TCP(frame)
		g := decode(t, frame).Layer(layers.LayerTypeTCP).(*layers.TCP)
		var flags uint8
		for i, set := range []bool{g.FIN, g.SYN, g.RST, g.PSH, g.ACK, g.URG, g.ECE, g.CWR} {
			if set {
				flags |= 1 << i
			}
		}
		checks := []struct {
			what      string
			got, want any
		}{
			{"SourcePort", tcp.SourcePort(), uint16(g.SrcPort)},
			{"DestinationPort", tcp.DestinationPort(), uint16(g.DstPort)},
			{"SequenceNumber", tcp.SequenceNumber(), g.Seq},
			{"AckNumber", tcp.AckNumber(), g.Ack},
			{"DataOffset", tcp.DataOffset(), int(g.DataOffset) * 4},
			{"Flags", tcp.Flags(), flags},
			{"Flags SYN|ACK", tcp.Flags(), TCPFlagSYN | TCPFlagACK},
			{"WindowSize", tcp.WindowSize(), g.Window},
			{"Checksum", tcp.Checksum(), g.Checksum},
			{"UrgentPointer", tcp.UrgentPointer(), g.Urgent},
			{"Options", len(tcp.Options()), int(g.DataOffset)*4 - 20},
			{"Payload", string(tcp.Payload()), string(g.Payload)},
		}
		for _, c := range checks {
			if c.got != c.want {
				t.Errorf("%s = %v, gopacket %v", c.what, c.got, c.want)
			}
		}
		pseudo := l4Pseudo(frame, &f)
		if tcp.ComputeChecksum(pseudo) != g.Checksum || !tcp.IsChecksumValid(pseudo) {
			t.Errorf("ComputeChecksum %#04x, gopacket %#04x", tcp.ComputeChecksum(pseudo), g.Checksum)
		}
	}
}

// l4Pseudo returns the pseudo-header sum for the upper-layer packet of a
// parsed frame.
func l4Pseudo(frame []byte, f *Frame) uint16 {
	n := f.L3Off + f.L3Len - f.L4Off
	if f.EtherType == EtherTypeIPv4 {
		ip := f.IPv4(frame)
		return PseudoHeaderSum4(ip.SourceAddress(), ip.DestinationAddress(), f.Proto, uint16(n))
	}
	ip := f.IPv6(frame)
	return PseudoHeaderSum6(ip.SourceAddress(), ip.DestinationAddress(), f.Proto, uint32(n))
}

func TestTCPSetters(t *testing.T) {
	for _, frame := range [][]byte{tcp4Frame(t), tcp6Frame(t)} {
		f := mustParse(t, frame)
		tcp := f.TCP(frame)
		tcp.SetDestinationPortWithChecksumUpdate(8443)
		tcp.SetSourcePortWithChecksumUpdate(1)
		g := checkChecksums(t, frame).Layer(layers.LayerTypeTCP).(*layers.TCP)
		if g.DstPort != 8443 || g.SrcPort != 1 {
			t.Fatalf("gopacket reads ports %d -> %d", g.SrcPort, g.DstPort)
		}

		tcp.SetSourcePort(2)
		tcp.SetDestinationPort(3)
		tcp.SetSequenceNumber(0xfffffff0)
		tcp.SetAckNumber(7)
		tcp.SetFlags(TCPFlagRST)
		tcp.SetChecksum(tcp.ComputeChecksum(l4Pseudo(frame, &f)))
		g = checkChecksums(t, frame).Layer(layers.LayerTypeTCP).(*layers.TCP)
		if g.SrcPort != 2 || g.DstPort != 3 || g.Seq != 0xfffffff0 || g.Ack != 7 || !g.RST || g.SYN {
			t.Fatalf("gopacket reads %+v", g)
		}
		if !bytes.Equal(tcp.Payload(), payload) {
			t.Errorf("payload changed")
		}
	}
}
