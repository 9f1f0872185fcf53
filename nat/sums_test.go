package nat

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/vipd/vipd/packet"
)

// TestSums4 checks that adding Sums4's sums to the checksums of a packet,
// as packet.ChecksumAdd does, gives exactly the checksums DNAT4Sum (odd
// cases: SNAT4) writes: for random headers (every checksum value, the UDP
// zero-checksum rules included), random addresses, ports kept and changed.
func TestSums4(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 200_000 {
		proto := uint8(packet.ProtoTCP)
		csumOff := 16
		if i%2 == 1 {
			proto, csumOff = packet.ProtoUDP, 6
		}
		pkt := make([]byte, 40)
		for j := range pkt {
			pkt[j] = byte(r.Uint32())
		}
		pkt[0], pkt[8], pkt[9] = 0x45, byte(2+r.IntN(254)), proto
		switch i % 7 { // checksums at the edges of ones' complement
		case 0:
			binary.BigEndian.PutUint16(pkt[20+csumOff:], 0)
		case 1:
			binary.BigEndian.PutUint16(pkt[20+csumOff:], 0xffff)
		case 2:
			binary.BigEndian.PutUint16(pkt[10:], 0xffff)
		}
		snat := i%5 == 1
		old, oldPort := [4]byte(pkt[16:20]), binary.BigEndian.Uint16(pkt[22:])
		if snat {
			old, oldPort = [4]byte(pkt[12:16]), binary.BigEndian.Uint16(pkt[20:])
		}
		addr := [4]byte{byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32())}
		port := uint16(r.Uint32())
		if i%3 == 0 {
			port = 0
		}
		sum := AddrSum4(old, addr)
		ipSum, l4Sum := Sums4(sum, oldPort, port)

		want := append([]byte(nil), pkt...)
		if snat {
			SNAT4(want[:20], L4{Proto: proto, Hdr: want[20:]}, addr, port)
		} else {
			DNAT4Sum(want[:20], L4{Proto: proto, Hdr: want[20:]}, addr, sum, port)
		}

		ipc := packet.ChecksumAdd(binary.BigEndian.Uint16(pkt[10:]), ipSum)
		if got := binary.BigEndian.Uint16(want[10:]); got != ipc {
			t.Fatalf("case %d: header checksum %#04x, the rewrite wrote %#04x", i, ipc, got)
		}
		c := binary.BigEndian.Uint16(pkt[20+csumOff:])
		l4c := c
		if proto != packet.ProtoUDP || c != 0 {
			l4c = packet.ChecksumAdd(c, l4Sum)
			if proto == packet.ProtoUDP && l4c == 0 {
				l4c = 0xffff
			}
		}
		if got := binary.BigEndian.Uint16(want[20+csumOff:]); got != l4c {
			t.Fatalf("case %d (proto %d, checksum %#04x): L4 checksum %#04x, the rewrite wrote %#04x", i, proto, c, l4c, got)
		}
	}
}

// TestSums6 checks, on random IPv6 TCP and UDP packets with valid
// checksums (checksums at the ones' complement edges among them), that
// DNAT6 and SNAT6 leave a checksum that verifies from scratch (an
// independent sum over the pseudo-header and the segment), and that
// adding Sums6 to the old checksum gives exactly what they wrote, which
// is what a fast path replaying the translation relies on.
func TestSums6(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 100_000 {
		proto := uint8(packet.ProtoTCP)
		csumOff := 16
		if i%2 == 1 {
			proto, csumOff = packet.ProtoUDP, 6
		}
		pkt := make([]byte, 40+20+r.IntN(8))
		for j := range pkt {
			pkt[j] = byte(r.Uint32())
		}
		pkt[0], pkt[6] = 0x60, proto
		binary.BigEndian.PutUint16(pkt[4:], uint16(len(pkt)-40))
		if proto == packet.ProtoUDP {
			binary.BigEndian.PutUint16(pkt[44:], uint16(len(pkt)-40))
		}
		if i%7 == 0 { // make the checksum 0x0000 (TCP) or 0xffff by a payload word
			binary.BigEndian.PutUint16(pkt[40+csumOff:], 0)
			s := verify6(pkt, proto)
			binary.BigEndian.PutUint16(pkt[40+18:], binary.BigEndian.Uint16(pkt[40+18:])+^uint16(0)-uint16(s))
			for verify6(pkt, proto) != 0xffff {
				binary.BigEndian.PutUint16(pkt[40+18:], binary.BigEndian.Uint16(pkt[40+18:])+1)
			}
		}
		binary.BigEndian.PutUint16(pkt[40+csumOff:], 0)
		c := ^verify6(pkt, proto)
		if proto == packet.ProtoUDP && c == 0 {
			c = 0xffff
		}
		binary.BigEndian.PutUint16(pkt[40+csumOff:], c)
		if verify6(pkt, proto) != 0xffff {
			t.Fatalf("case %d: the test's packet does not verify", i)
		}
		snat := i%5 == 1
		old, oldPort := [16]byte(pkt[24:40]), binary.BigEndian.Uint16(pkt[42:])
		if snat {
			old, oldPort = [16]byte(pkt[8:24]), binary.BigEndian.Uint16(pkt[40:])
		}
		var addr [16]byte
		for j := range addr {
			addr[j] = byte(r.Uint32())
		}
		port := uint16(r.Uint32())
		if i%3 == 0 {
			port = 0
		}
		got := append([]byte(nil), pkt...)
		if snat {
			SNAT6(got[:40], L4{Proto: proto, Hdr: got[40:]}, &addr, port)
		} else {
			DNAT6(got[:40], L4{Proto: proto, Hdr: got[40:]}, &addr, port)
		}
		if v := verify6(got, proto); v != 0xffff {
			t.Fatalf("case %d (proto %d, snat %v): the translated checksum does not verify (sum %#04x)", i, proto, snat, v)
		}
		want := packet.ChecksumAdd(c, Sums6(&old, &addr, oldPort, port))
		if proto == packet.ProtoUDP && want == 0 {
			want = 0xffff
		}
		if g := binary.BigEndian.Uint16(got[40+csumOff:]); g != want {
			t.Fatalf("case %d (proto %d, checksum %#04x): Sums6 gives %#04x, the rewrite wrote %#04x", i, proto, c, want, g)
		}
	}
}

// verify6 is the folded ones' complement sum of an IPv6 packet's
// pseudo-header and segment, computed from scratch (0xffff: the checksum
// verifies); the packet has no extension headers.
func verify6(pkt []byte, proto uint8) uint16 {
	var s uint64
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			s += uint64(b[i])<<8 | uint64(b[i+1])
		}
		if len(b)%2 == 1 {
			s += uint64(b[len(b)-1]) << 8
		}
	}
	add(pkt[8:40])
	n := len(pkt) - 40
	s += uint64(n) + uint64(proto)
	add(pkt[40:])
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}
