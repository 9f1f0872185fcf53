package packet

import "testing"

// The package promise is that nothing allocates: these tests make it a
// claim that can fail.

func TestParseDoesNotAllocate(t *testing.T) {
	var frames [][]byte
	for _, c := range parseCases(t) {
		frames = append(frames, c.frame)
	}
	for _, c := range errorCases(t) {
		frames = append(frames, c.frame)
	}
	var f Frame
	for _, frame := range frames {
		if n := testing.AllocsPerRun(100, func() { _ = Parse(frame, &f) }); n != 0 {
			t.Errorf("Parse allocates %v times per frame on\n% x", n, frame)
		}
	}
}

func TestSettersDoNotAllocate(t *testing.T) {
	v4, v6, u4 := tcp4Frame(t), tcp6Frame(t), udp4Frame(t)
	f4, f6, fu := mustParse(t, v4), mustParse(t, v6), mustParse(t, u4)
	ip4, tcp4, ip6, tcp6, udp := f4.IPv4(v4), f4.TCP(v4), f6.IPv6(v6), f6.TCP(v6), fu.UDP(u4)
	eth := Ethernet(v4)
	icmp4, icmp6 := ICMPv4(make([]byte, 64)), ICMPv6(make([]byte, 64))
	a4 := [4]byte{198, 18, 0, 99}
	a6 := [16]byte{0x20, 0x01, 0, 2, 15: 99}
	mac := [6]byte{2, 0, 0, 0, 0, 9}
	ops := []struct {
		name string
		fn   func()
	}{
		{"Ethernet set MACs", func() { eth.SetDestination(mac); eth.SetSource(eth.Destination()) }},
		{"IPv4 address updates", func() {
			ip4.SetDestinationAddressWithChecksumUpdate(a4)
			ip4.SetSourceAddressWithChecksumUpdate(a4)
		}},
		{"IPv4 DecTTL", func() { ip4.SetTTL(64); ip4.DecTTL() }},
		{"IPv4 full checksum", func() { ip4.SetChecksum(ip4.ComputeChecksum()); _ = ip4.IsChecksumValid() }},
		{"IPv4 raw setters", func() {
			ip4.SetTOS(1)
			ip4.SetID(2)
			ip4.SetFlagsFragmentOffset(2, 0)
			ip4.SetTotalLength(ip4.TotalLength())
			ip4.SetProtocol(6)
			ip4.SetSourceAddress(a4)
			ip4.SetDestinationAddress(a4)
		}},
		{"IPv6 setters", func() {
			ip6.SetDestinationAddress(&a6)
			ip6.SetSourceAddress(ip6.DestinationAddress())
			ip6.SetHopLimit(64)
			ip6.DecHopLimit()
			ip6.SetPayloadLength(ip6.PayloadLength())
			ip6.SetNextHeader(6)
		}},
		{"IPv6 ExtHeaders", func() { var x IPv6ExtHeaders; _ = ip6.ExtHeaders(&x) }},
		{"TCP updates", func() {
			tcp4.SetDestinationPortWithChecksumUpdate(8080)
			tcp4.SetSourcePortWithChecksumUpdate(1234)
			tcp4.UpdatePseudoHeaderAddress4(a4, a4)
			tcp6.UpdatePseudoHeaderAddress6(&a6, ip6.SourceAddress())
		}},
		{"TCP raw setters and checksum", func() {
			tcp4.SetSequenceNumber(1)
			tcp4.SetAckNumber(2)
			tcp4.SetFlags(TCPFlagACK)
			tcp4.SetSourcePort(1)
			tcp4.SetDestinationPort(2)
			tcp4.SetChecksum(tcp4.ComputeChecksum(PseudoHeaderSum4(a4, a4, 6, uint16(len(tcp4)))))
			_ = tcp6.IsChecksumValid(PseudoHeaderSum6(&a6, &a6, 6, uint32(len(tcp6))))
		}},
		{"UDP updates", func() {
			udp.SetDestinationPortWithChecksumUpdate(53)
			udp.SetSourcePortWithChecksumUpdate(54)
			udp.UpdatePseudoHeaderAddress4(a4, a4)
			udp.UpdatePseudoHeaderAddress6(&a6, &a6)
			udp.SetChecksum(udp.ComputeChecksum(0))
			udp.SetLength(udp.Length())
			udp.SetSourcePort(1)
			udp.SetDestinationPort(2)
		}},
		{"ICMP setters", func() {
			icmp4.SetType(3)
			icmp4.SetCode(4)
			icmp4.SetMTU(1480)
			icmp4.SetRestOfHeader(icmp4.RestOfHeader())
			icmp4.SetChecksum(icmp4.ComputeChecksum())
			icmp6.SetType(2)
			icmp6.SetCode(0)
			icmp6.SetMTU(1280)
			icmp6.SetRestOfHeader(icmp6.RestOfHeader())
			icmp6.SetChecksum(icmp6.ComputeChecksum(0))
		}},
		{"checksum helpers", func() {
			_ = ChecksumUpdate16(1, 2, 3)
			_ = ChecksumUpdate32(1, 2, 3)
			_ = ChecksumUpdate128(1, &a6, &a6)
			_ = Checksum(v4, 0)
		}},
	}
	for _, op := range ops {
		if n := testing.AllocsPerRun(100, op.fn); n != 0 {
			t.Errorf("%s: %v allocations per run", op.name, n)
		}
	}
}
