package arp

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/mdlayher/ndp"
)

// FuzzParseARP: parseARP never panics, and what it accepts rebuilds to the
// same 42 bytes (Ethernet header + ARP packet) when the Ethernet source is
// the sender's.
func FuzzParseARP(f *testing.F) {
	f.Add(arpFrame(broadcastMAC, arpRequest, macB, netip.MustParseAddr("198.18.0.2"), [6]byte{}, netip.MustParseAddr("198.18.0.100")))
	f.Add(arpAnnouncement(macA, netip.MustParseAddr("198.18.0.100")))
	f.Add(arpFrame(macB, arpReply, macA, netip.MustParseAddr("198.18.0.100"), macB, netip.MustParseAddr("198.18.0.2"))[:ethHeaderLen+arpLen])
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseARP(b)
		if err != nil {
			return
		}
		var ethDst [6]byte
		copy(ethDst[:], b[0:6])
		again := arpFrame(ethDst, m.op, m.senderMAC, m.senderIP, m.targetMAC, m.targetIP)
		if m.ethSrc == m.senderMAC && !bytes.Equal(again[:ethHeaderLen+arpLen], b[:ethHeaderLen+arpLen]) {
			t.Fatalf("round trip:\n% x\n% x", b[:ethHeaderLen+arpLen], again[:ethHeaderLen+arpLen])
		}
	})
}

// FuzzParseNDP: parseNDP never panics, and what it accepts is a Neighbor
// Solicitation or Advertisement that, marshalled again with the same
// addresses, parses to the same target.
func FuzzParseNDP(f *testing.F) {
	target := netip.MustParseAddr("2001:2::100")
	ns, _ := neighborSolicitation(macB, netip.MustParseAddr("2001:2::2"), target)
	dad, _ := neighborSolicitation(macB, netip.IPv6Unspecified(), target)
	na, _ := unsolicitedNA(macA, target)
	for _, s := range [][]byte{ns, dad, na} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseNDP(b)
		if err != nil {
			return
		}
		var want netip.Addr
		switch msg := m.msg.(type) {
		case *ndp.NeighborSolicitation:
			want = msg.TargetAddress
		case *ndp.NeighborAdvertisement:
			want = msg.TargetAddress
		default:
			t.Fatalf("accepted a %T", m.msg)
		}
		var dstMAC [6]byte
		copy(dstMAC[:], b[0:6])
		again, err := ndpFrame(m.ethSrc, dstMAC, m.src, m.dst, m.msg)
		if err != nil {
			t.Fatalf("accepted message does not marshal: %v", err)
		}
		m2, err := parseNDP(again)
		if err != nil {
			t.Fatalf("re-marshalled message rejected: %v", err)
		}
		var got netip.Addr
		switch msg := m2.msg.(type) {
		case *ndp.NeighborSolicitation:
			got = msg.TargetAddress
		case *ndp.NeighborAdvertisement:
			got = msg.TargetAddress
		}
		if got != want || m2.src != m.src || m2.dst != m.dst {
			t.Fatalf("round trip changed %v %v→%v into %v %v→%v", want, m.src, m.dst, got, m2.src, m2.dst)
		}
	})
}
