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
