package arp

import (
	"bytes"
	"net"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/mdlayher/ndp"
	"golang.org/x/net/bpf"
)

// gopacket is the independent oracle: frames built here are decoded with it,
// and frames it builds are parsed here.

var (
	macA = mustMAC("02:00:5e:00:00:0a")
	macB = mustMAC("02:00:5e:00:00:0b")
	macC = mustMAC("02:00:5e:00:00:0c")
)

func decodeARP(t *testing.T, f []byte) (*layers.Ethernet, *layers.ARP) {
	t.Helper()
	p := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
	eth, _ := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	a, _ := p.Layer(layers.LayerTypeARP).(*layers.ARP)
	if eth == nil || a == nil {
		t.Fatalf("not an ARP frame: %v", p)
	}
	if len(f) < minFrameLen {
		t.Errorf("frame is %d bytes, shorter than the Ethernet minimum %d", len(f), minFrameLen)
	}
	return eth, a
}

// checkARP asserts every field of an ARP frame.
func checkARP(t *testing.T, f []byte, ethDst [6]byte, op uint16, sha [6]byte, spa netip.Addr, tha [6]byte, tpa netip.Addr) {
	t.Helper()
	eth, a := decodeARP(t, f)
	if !bytes.Equal(eth.DstMAC, ethDst[:]) || !bytes.Equal(eth.SrcMAC, sha[:]) || eth.EthernetType != layers.EthernetTypeARP {
		t.Errorf("Ethernet %v → %v type %v, want %v → %v ARP", eth.SrcMAC, eth.DstMAC, eth.EthernetType,
			net.HardwareAddr(sha[:]), net.HardwareAddr(ethDst[:]))
	}
	if a.AddrType != layers.LinkTypeEthernet || a.Protocol != layers.EthernetTypeIPv4 || a.HwAddressSize != 6 || a.ProtAddressSize != 4 {
		t.Errorf("ARP hrd/pro/hln/pln = %v/%v/%d/%d, want Ethernet/IPv4/6/4", a.AddrType, a.Protocol, a.HwAddressSize, a.ProtAddressSize)
	}
	if a.Operation != op {
		t.Errorf("op = %d, want %d", a.Operation, op)
	}
	for _, c := range []struct {
		name      string
		got, want []byte
	}{
		{"sender MAC", a.SourceHwAddress, sha[:]},
		{"sender IP", a.SourceProtAddress, spa.AsSlice()},
		{"target MAC", a.DstHwAddress, tha[:]},
		{"target IP", a.DstProtAddress, tpa.AsSlice()},
	} {
		if !bytes.Equal(c.got, c.want) {
			t.Errorf("%s = % x, want % x", c.name, c.got, c.want)
		}
	}
}

func TestARPFrameMatchesGopacket(t *testing.T) {
	spa, tpa := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")
	f := arpFrame(macB, arpReply, macA, spa, macB, tpa)
	checkARP(t, f, macB, arpReply, macA, spa, macB, tpa)

	m, err := parseARP(f)
	if err != nil {
		t.Fatal(err)
	}
	want := arpMessage{op: arpReply, ethSrc: macA, senderMAC: macA, senderIP: spa, targetMAC: macB, targetIP: tpa}
	if m != want {
		t.Errorf("parseARP = %+v, want %+v", m, want)
	}
}

func TestARPAnnouncementFormat(t *testing.T) {
	vip := netip.MustParseAddr("198.18.0.100")
	// RFC 5227 §3: op request, sender = target = VIP, target MAC zero, broadcast.
	checkARP(t, arpAnnouncement(macA, vip), broadcastMAC, arpRequest, macA, vip, [6]byte{}, vip)
}

func TestParseARPFromGopacket(t *testing.T) {
	build := func(mod func(*layers.ARP)) []byte {
		eth := &layers.Ethernet{SrcMAC: macB[:], DstMAC: broadcastMAC[:], EthernetType: layers.EthernetTypeARP}
		a := &layers.ARP{
			AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
			Operation: layers.ARPRequest, SourceHwAddress: macB[:], SourceProtAddress: []byte{198, 18, 0, 2},
			DstHwAddress: make([]byte, 6), DstProtAddress: []byte{198, 18, 0, 100},
		}
		if mod != nil {
			mod(a)
		}
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, eth, a); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	m, err := parseARP(build(nil))
	if err != nil {
		t.Fatal(err)
	}
	if m.op != arpRequest || m.senderMAC != macB || m.ethSrc != macB ||
		m.senderIP != netip.MustParseAddr("198.18.0.2") || m.targetIP != netip.MustParseAddr("198.18.0.100") {
		t.Errorf("parseARP = %+v", m)
	}
	for name, mod := range map[string]func(*layers.ARP){
		"token ring hardware": func(a *layers.ARP) { a.AddrType = layers.LinkTypeTokenRing },
		"IPv6 protocol":       func(a *layers.ARP) { a.Protocol = layers.EthernetTypeIPv6 },
	} {
		if _, err := parseARP(build(mod)); err == nil {
			t.Errorf("%s: parsed, want errNotARP", name)
		}
	}
	if _, err := parseARP(build(nil)[:ethHeaderLen+arpLen-1]); err == nil {
		t.Error("truncated ARP parsed")
	}
}

// decodeNDP decodes an Ethernet/IPv6/ICMPv6 NDP frame with gopacket and
// checks its ICMPv6 checksum by having gopacket compute it again.
func decodeNDP(t *testing.T, f []byte) (*layers.Ethernet, *layers.IPv6, gopacket.Packet) {
	t.Helper()
	p := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
	eth, _ := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	ip, _ := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	icmp, _ := p.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6)
	if eth == nil || ip == nil || icmp == nil {
		t.Fatalf("not an NDP frame: %v", p)
	}
	if ip.HopLimit != 255 || ip.NextHeader != layers.IPProtocolICMPv6 {
		t.Errorf("hop limit %d next header %v, want 255 ICMPv6 (RFC 4861 §7.1)", ip.HopLimit, ip.NextHeader)
	}
	if int(ip.Length) != len(ip.Payload) {
		t.Errorf("IPv6 payload length %d, payload is %d bytes", ip.Length, len(ip.Payload))
	}
	again := &layers.ICMPv6{TypeCode: icmp.TypeCode}
	if err := again.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true}, again, gopacket.Payload(icmp.Payload)); err != nil {
		t.Fatal(err)
	}
	if again.Checksum != icmp.Checksum {
		t.Errorf("ICMPv6 checksum %#04x, gopacket computes %#04x", icmp.Checksum, again.Checksum)
	}
	return eth, ip, p
}

func optionMAC(opts layers.ICMPv6Options, typ layers.ICMPv6Opt) []byte {
	for _, o := range opts {
		if o.Type == typ {
			return o.Data
		}
	}
	return nil
}

func TestNeighborAdvertisementFrames(t *testing.T) {
	vip := netip.MustParseAddr("2001:2::100")
	peer := netip.MustParseAddr("2001:2::2")

	for _, tc := range []struct {
		name      string
		frame     func() ([]byte, error)
		ethDst    [6]byte
		ipDst     netip.Addr
		solicited bool
	}{
		{"solicited", func() ([]byte, error) {
			return ndpFrame(macA, macB, vip, peer, neighborAdvertisement(vip, macA, true))
		}, macB, peer, true},
		{"unsolicited", func() ([]byte, error) { return unsolicitedNA(macA, vip) },
			[6]byte{0x33, 0x33, 0, 0, 0, 1}, netip.MustParseAddr("ff02::1"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := tc.frame()
			if err != nil {
				t.Fatal(err)
			}
			eth, ip, p := decodeNDP(t, f)
			na, _ := p.Layer(layers.LayerTypeICMPv6NeighborAdvertisement).(*layers.ICMPv6NeighborAdvertisement)
			if na == nil {
				t.Fatalf("no NA in %v", p)
			}
			if !bytes.Equal(eth.DstMAC, tc.ethDst[:]) || !bytes.Equal(eth.SrcMAC, macA[:]) {
				t.Errorf("Ethernet %v → %v", eth.SrcMAC, eth.DstMAC)
			}
			if !ip.SrcIP.Equal(vip.AsSlice()) || !ip.DstIP.Equal(tc.ipDst.AsSlice()) {
				t.Errorf("IPv6 %v → %v, want %v → %v", ip.SrcIP, ip.DstIP, vip, tc.ipDst)
			}
			if !na.TargetAddress.Equal(vip.AsSlice()) || na.Solicited() != tc.solicited || !na.Override() || na.Router() {
				t.Errorf("NA target %v S=%v O=%v R=%v, want %v S=%v O=true R=false",
					na.TargetAddress, na.Solicited(), na.Override(), na.Router(), vip, tc.solicited)
			}
			if got := optionMAC(na.Options, layers.ICMPv6OptTargetAddress); !bytes.Equal(got, macA[:]) {
				t.Errorf("target link-layer option %x, want %x", got, macA)
			}
		})
	}
}

func TestNeighborSolicitationFrame(t *testing.T) {
	target := netip.MustParseAddr("2001:2::2")
	src := netip.MustParseAddr("2001:2::1")
	f, err := neighborSolicitation(macA, src, target)
	if err != nil {
		t.Fatal(err)
	}
	eth, ip, p := decodeNDP(t, f)
	ns, _ := p.Layer(layers.LayerTypeICMPv6NeighborSolicitation).(*layers.ICMPv6NeighborSolicitation)
	if ns == nil {
		t.Fatalf("no NS in %v", p)
	}
	snm := netip.MustParseAddr("ff02::1:ff00:2")
	if !ip.DstIP.Equal(snm.AsSlice()) || !bytes.Equal(eth.DstMAC, []byte{0x33, 0x33, 0xff, 0, 0, 2}) {
		t.Errorf("sent to %v at %v, want solicited-node %v at 33:33:ff:00:00:02", ip.DstIP, eth.DstMAC, snm)
	}
	if !ns.TargetAddress.Equal(target.AsSlice()) || !ip.SrcIP.Equal(src.AsSlice()) {
		t.Errorf("NS for %v from %v", ns.TargetAddress, ip.SrcIP)
	}
	if got := optionMAC(ns.Options, layers.ICMPv6OptSourceAddress); !bytes.Equal(got, macA[:]) {
		t.Errorf("source link-layer option %x, want %x", got, macA)
	}

	// From :: (RFC 4861 §7.2.2): no source link-layer option.
	f, err = neighborSolicitation(macA, netip.IPv6Unspecified(), target)
	if err != nil {
		t.Fatal(err)
	}
	_, _, p = decodeNDP(t, f)
	ns = p.Layer(layers.LayerTypeICMPv6NeighborSolicitation).(*layers.ICMPv6NeighborSolicitation)
	if len(ns.Options) != 0 {
		t.Errorf("NS from :: carries options %v", ns.Options)
	}
	if _, err := parseNDP(f); err != nil {
		t.Errorf("DAD solicitation rejected: %v", err)
	}
}

// gopacketNS builds a Neighbor Solicitation with gopacket, from src to dst.
func gopacketNS(t *testing.T, ethSrc [6]byte, src, dst, target netip.Addr, hopLimit uint8, sllaMAC []byte) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: ethSrc[:], DstMAC: net.HardwareAddr{0x33, 0x33, 0xff, 0, 1, 0}, EthernetType: layers.EthernetTypeIPv6}
	ip := &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolICMPv6, HopLimit: hopLimit, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
	icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeNeighborSolicitation, 0)}
	if err := icmp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	ns := &layers.ICMPv6NeighborSolicitation{TargetAddress: target.AsSlice()}
	if sllaMAC != nil {
		ns.Options = layers.ICMPv6Options{{Type: layers.ICMPv6OptSourceAddress, Data: sllaMAC}}
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, icmp, ns); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestParseNDPValidation(t *testing.T) {
	src := netip.MustParseAddr("2001:2::2")
	target := netip.MustParseAddr("2001:2::100")
	snm := solicitedNode(target)

	good := gopacketNS(t, macB, src, snm, target, 255, macB[:])
	m, err := parseNDP(good)
	if err != nil {
		t.Fatalf("valid NS rejected: %v", err)
	}
	ns, ok := m.msg.(*ndp.NeighborSolicitation)
	if !ok || ns.TargetAddress != target || m.src != src || m.dst != snm || m.ethSrc != macB {
		t.Fatalf("parseNDP = %+v", m)
	}
	if got := linkLayerOption(ns.Options, ndp.Source); !bytes.Equal(got, macB[:]) {
		t.Errorf("source link-layer option %v", got)
	}

	corrupt := append([]byte(nil), good...)
	corrupt[len(corrupt)-1] ^= 0xff

	for name, f := range map[string][]byte{
		"hop limit 64 (off-link sender)":  gopacketNS(t, macB, src, snm, target, 64, macB[:]),
		"bad checksum":                    corrupt,
		"multicast target":                gopacketNS(t, macB, src, snm, netip.MustParseAddr("ff02::1"), 255, nil),
		"DAD to a unicast destination":    gopacketNS(t, macB, netip.IPv6Unspecified(), target, target, 255, nil),
		"DAD with source link-layer addr": gopacketNS(t, macB, netip.IPv6Unspecified(), snm, target, 255, macB[:]),
		"truncated":                       good[:len(good)-10],
		"not IPv6":                        append(append([]byte(nil), good[:12]...), append([]byte{0x08, 0x00}, good[14:]...)...),
		"option length zero (RFC 4861 §4.6)": func() []byte {
			b := gopacketNS(t, macB, src, snm, target, 255, macB[:])
			b[ethHeaderLen+ipv6HeaderLen+24+1] = 0
			fixICMPv6Checksum(b)
			return b
		}(),
	} {
		if _, err := parseNDP(f); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestSolicitedNodeAndMulticastMAC(t *testing.T) {
	a := netip.MustParseAddr("2001:2::12:3456")
	if got, want := solicitedNode(a), netip.MustParseAddr("ff02::1:ff12:3456"); got != want {
		t.Errorf("solicitedNode(%v) = %v, want %v", a, got, want)
	}
	if got, want := multicastMAC(solicitedNode(a)), mustMAC("33:33:ff:12:34:56"); got != want {
		t.Errorf("multicastMAC = %v, want %v", net.HardwareAddr(got[:]), net.HardwareAddr(want[:]))
	}
	if !isSolicitedNode(solicitedNode(a)) || isSolicitedNode(a) {
		t.Error("isSolicitedNode wrong")
	}
}

// TestNDPFilterOffsets runs the address-independent part of the NDP socket
// filter in the x/net/bpf VM (which cannot run the pkttype extension).
func TestNDPFilterOffsets(t *testing.T) {
	prog := ndpFilter(icmpv6TypeNS)
	ins, ok := bpf.Disassemble(prog)
	if !ok {
		t.Fatalf("filter does not disassemble: %v", ins)
	}
	// Drop the two pkttype instructions; the jumps after them are relative.
	vm, err := bpf.NewVM(ins[2:])
	if err != nil {
		t.Fatal(err)
	}
	src, target := netip.MustParseAddr("2001:2::2"), netip.MustParseAddr("2001:2::100")
	ns := gopacketNS(t, macB, src, solicitedNode(target), target, 255, macB[:])
	na, err := unsolicitedNA(macA, target)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		frame  []byte
		accept bool
	}{
		{"NS", ns, true},
		{"NA", na, false},
	} {
		n, err := vm.Run(c.frame)
		if err != nil {
			t.Fatal(err)
		}
		if (n > 0) != c.accept {
			t.Errorf("%s: filter returned %d, want accept=%v", c.name, n, c.accept)
		}
	}
	vmNA, err := bpf.NewVM(mustDisassemble(t, ndpFilter(icmpv6TypeNA))[2:])
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := vmNA.Run(na); n == 0 {
		t.Error("NA filter drops an NA")
	}
	if n, _ := vmNA.Run(ns); n != 0 {
		t.Error("NA filter accepts an NS")
	}
}

func mustDisassemble(t *testing.T, raw []bpf.RawInstruction) []bpf.Instruction {
	t.Helper()
	ins, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatalf("filter does not disassemble: %v", ins)
	}
	return ins
}

// fixICMPv6Checksum recomputes the checksum of the ICMPv6 message in an
// Ethernet/IPv6 frame after a test edited it (RFC 8200 §8.1 pseudo-header).
func fixICMPv6Checksum(f []byte) {
	ip := f[ethHeaderLen:]
	icmp := ip[ipv6HeaderLen:]
	icmp[2], icmp[3] = 0, 0
	var sum uint32
	words := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(b[i])<<8 | uint32(b[i+1])
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	words(ip[ipv6Src : ipv6Dst+16])
	sum += uint32(len(icmp)) + protocolICMPv6
	words(icmp)
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	c := ^uint16(sum)
	icmp[2], icmp[3] = byte(c>>8), byte(c)
}

func TestFixICMPv6ChecksumAgreesWithParse(t *testing.T) {
	target := netip.MustParseAddr("2001:2::100")
	f := gopacketNS(t, macB, netip.MustParseAddr("2001:2::2"), solicitedNode(target), target, 255, macB[:])
	f[ethHeaderLen+ipv6HeaderLen+2] ^= 0x5a
	if _, err := parseNDP(f); err == nil {
		t.Fatal("corrupted checksum accepted")
	}
	fixICMPv6Checksum(f)
	if _, err := parseNDP(f); err != nil {
		t.Fatalf("repaired frame rejected: %v", err)
	}
}
