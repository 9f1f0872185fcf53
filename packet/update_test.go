package packet

import (
	"encoding/binary"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// randomL4Frame builds, with gopacket, a TCP or UDP frame over IPv4 or IPv6
// with random addresses, ports and an even-length random payload.
func randomL4Frame(tb testing.TB, rng *rand.Rand, v6, udp bool) []byte {
	payload := make([]byte, 2*rng.IntN(200))
	for i := range payload {
		payload[i] = byte(rng.Uint32())
	}
	var nl gopacket.NetworkLayer
	var ip gopacket.SerializableLayer
	et := layers.EthernetTypeIPv4
	proto := layers.IPProtocolTCP
	if udp {
		proto = layers.IPProtocolUDP
	}
	if v6 {
		l := ip6Layer(proto)
		l.SrcIP, l.DstIP = randIP(rng, 16), randIP(rng, 16)
		nl, ip, et = l, l, layers.EthernetTypeIPv6
	} else {
		l := ip4Layer(proto)
		l.SrcIP, l.DstIP = randIP(rng, 4), randIP(rng, 4)
		l.TTL = uint8(2 + rng.IntN(254))
		l.Id = uint16(rng.Uint32())
		nl, ip = l, l
	}
	var l4 gopacket.SerializableLayer
	if udp {
		u := udpLayer(nl)
		u.SrcPort, u.DstPort = layers.UDPPort(rng.Uint32()), layers.UDPPort(rng.Uint32())
		l4 = u
	} else {
		t := tcpLayer(nl)
		t.SrcPort, t.DstPort = layers.TCPPort(rng.Uint32()), layers.TCPPort(rng.Uint32())
		t.Seq, t.Ack = rng.Uint32(), rng.Uint32()
		l4 = t
	}
	return serialize(tb, ethLayer(et), ip, l4, gopacket.Payload(payload))
}

func randIP(rng *rand.Rand, n int) net.IP {
	b := make(net.IP, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// natRewrite does what the NAT path will: new destination address and port,
// TTL or hop limit decremented, all checksums updated incrementally.
func natRewrite(frame []byte, f *Frame, dst4 [4]byte, dst6 *[16]byte, port uint16) {
	var tcp TCP
	var udp UDP
	if f.Proto == ProtoTCP {
		tcp = f.TCP(frame)
		tcp.SetDestinationPortWithChecksumUpdate(port)
	} else {
		udp = f.UDP(frame)
		udp.SetDestinationPortWithChecksumUpdate(port)
	}
	if f.EtherType == EtherTypeIPv4 {
		ip := f.IPv4(frame)
		old := ip.DestinationAddress()
		ip.SetDestinationAddressWithChecksumUpdate(dst4)
		ip.DecTTL()
		if tcp != nil {
			tcp.UpdatePseudoHeaderAddress4(old, dst4)
		} else {
			udp.UpdatePseudoHeaderAddress4(old, dst4)
		}
		return
	}
	ip := f.IPv6(frame)
	if tcp != nil {
		tcp.UpdatePseudoHeaderAddress6(ip.DestinationAddress(), dst6)
	} else {
		udp.UpdatePseudoHeaderAddress6(ip.DestinationAddress(), dst6)
	}
	ip.SetDestinationAddress(dst6)
	ip.DecHopLimit()
}

// recomputed returns the L4 checksum (and, for IPv4, the header checksum)
// that frame should carry, from scratch.
func recomputed(frame []byte, f *Frame) (l4, l3 uint16) {
	pseudo := l4Pseudo(frame, f)
	if f.Proto == ProtoTCP {
		l4 = f.TCP(frame).ComputeChecksum(pseudo)
	} else {
		l4 = f.UDP(frame).ComputeChecksum(pseudo)
	}
	if f.EtherType == EtherTypeIPv4 {
		l3 = f.IPv4(frame).ComputeChecksum()
	}
	return l4, l3
}

func l4Checksum(frame []byte, f *Frame) uint16 {
	return binary.BigEndian.Uint16(frame[f.L4Off+map[uint8]int{ProtoTCP: 16, ProtoUDP: 6}[f.Proto]:])
}

func TestIncrementalUpdatesEqualRecompute(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	n := 2000
	if testing.Short() {
		n = 200
	}
	for i := 0; i < n; i++ {
		v6, udp := i%2 == 1, i%4 >= 2
		frame := randomL4Frame(t, rng, v6, udp)
		f := mustParse(t, frame)
		var dst4 [4]byte
		var dst6 [16]byte
		copy(dst4[:], randIP(rng, 4))
		copy(dst6[:], randIP(rng, 16))
		port := uint16(rng.Uint32())
		switch rng.IntN(8) { // the corner values of the fields themselves
		case 0:
			port, dst4, dst6 = 0, [4]byte{}, [16]byte{}
		case 1:
			port, dst4 = 0xffff, [4]byte{255, 255, 255, 255}
			dst6 = [16]byte{0: 0xff, 1: 0xff, 14: 0xff, 15: 0xff}
		}
		natRewrite(frame, &f, dst4, &dst6, port)
		l4, l3 := recomputed(frame, &f)
		if got := l4Checksum(frame, &f); got != l4 {
			t.Fatalf("case %d (v6 %v udp %v): L4 checksum %#04x, recomputed %#04x", i, v6, udp, got, l4)
		}
		if !v6 && f.IPv4(frame).Checksum() != l3 {
			t.Fatalf("case %d: IPv4 checksum %#04x, recomputed %#04x", i, f.IPv4(frame).Checksum(), l3)
		}
		checkChecksums(t, frame)
	}
}

// TestIncrementalUpdateChecksumCorners forces the rewritten packet's full
// checksum to 0x0000 (TCP; UDP sends 0xFFFF) and starts from packets whose
// checksum is 0x0000 or 0xFFFF, where RFC 1624 eqn. 2 goes wrong.
func TestIncrementalUpdateChecksumCorners(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for i := 0; i < 400; i++ {
		v6, udp := i%2 == 1, i%4 >= 2
		frame := randomL4Frame(t, rng, v6, udp)
		f := mustParse(t, frame)
		var dst4 [4]byte
		var dst6 [16]byte
		copy(dst4[:], randIP(rng, 4))
		copy(dst6[:], randIP(rng, 16))
		port := uint16(rng.Uint32())

		// A checksum c is ~sum, and sum +' c = 0xFFFF: adding c to a
		// payload word makes the checksum zero. The last word of the
		// payload is used (the payload has even length).
		end := f.L3Off + f.L3Len
		if end-f.L4Off < 22 {
			continue // no payload word to adjust
		}
		zeroSum := func(b []byte, c uint16) {
			w := binary.BigEndian.Uint16(b[end-2:])
			binary.BigEndian.PutUint16(b[end-2:], add16(w, c))
		}
		zero := map[bool]uint16{false: 0, true: 0xffff}[udp] // UDP sends a zero as 0xFFFF
		switch i % 3 {
		case 0: // the rewritten packet's checksum is zero
			after := append([]byte(nil), frame...)
			natRewrite(after, &f, dst4, &dst6, port)
			c, _ := recomputed(after, &f)
			zeroSum(frame, c)
			l4, _ := recomputed(frame, &f)
			setL4Checksum(frame, &f, l4)
		case 1: // the original packet's checksum is zero
			l4, _ := recomputed(frame, &f)
			zeroSum(frame, l4)
			if l4, _ = recomputed(frame, &f); l4 != zero {
				t.Fatalf("case %d: could not make the checksum zero: %#04x", i, l4)
			}
			setL4Checksum(frame, &f, l4)
		}
		natRewrite(frame, &f, dst4, &dst6, port)
		want, _ := recomputed(frame, &f)
		if got := l4Checksum(frame, &f); got != want {
			t.Fatalf("case %d (v6 %v udp %v): L4 checksum %#04x, recomputed %#04x", i, v6, udp, got, want)
		}
		if i%3 == 0 {
			if want != zero {
				t.Fatalf("case %d: corner not reached: checksum %#04x", i, want)
			}
		}
		checkChecksums(t, frame)
	}
}

func setL4Checksum(frame []byte, f *Frame, v uint16) {
	binary.BigEndian.PutUint16(frame[f.L4Off+map[uint8]int{ProtoTCP: 16, ProtoUDP: 6}[f.Proto]:], v)
}
