package xdpprog

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// pk describes a test frame built with gopacket, the independent oracle.
// The zero value of each field means the ordinary case: untagged,
// unfragmented, no options, no extension headers.
type pk struct {
	vlan         bool
	src, dst     string // the family of src picks IPv4 or IPv6
	proto        layers.IPProtocol
	sport, dport uint16
	optWords     int    // IPv4 options, in 32-bit words (IHL = 5 + optWords)
	fragOff      uint16 // fragment offset in 8-byte units
	mf           bool   // more fragments
	frag6        bool   // IPv6: a Fragment header (fragOff, mf) after the fixed header
	hopByHop     bool   // IPv6: a Hop-by-Hop Options header after the fixed header
	quote        *pk    // an ICMP error quoting this packet's IP header and 8 bytes of L4
	icmpType     uint8  // ICMP type when there is no quote; 0 = echo request
	cut          int    // keep only the first cut bytes of the frame
	payload      []byte // TCP or UDP payload; nil: "vipd" (frames padded to 60 bytes)
}

var (
	macA = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xa}
	macB = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xb}
)

func serialize(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatalf("serialize: %v", err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// frame returns the Ethernet frame.
func (p pk) frame(t testing.TB) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeIPv4}
	if netip.MustParseAddr(p.src).Is6() {
		eth.EthernetType = layers.EthernetTypeIPv6
	}
	ls := []gopacket.SerializableLayer{eth}
	if p.vlan {
		ls = append(ls, &layers.Dot1Q{VLANIdentifier: 42, Type: eth.EthernetType})
		eth.EthernetType = layers.EthernetTypeDot1Q
	}
	ls = append(ls, gopacket.Payload(p.packet(t)))
	f := serialize(t, ls...)
	if p.cut > 0 {
		f = f[:p.cut]
	}
	return f
}

// packet returns the IP packet.
func (p pk) packet(t testing.TB) []byte {
	t.Helper()
	src, dst := netip.MustParseAddr(p.src), netip.MustParseAddr(p.dst)
	var ip gopacket.NetworkLayer
	var hdr gopacket.SerializableLayer
	if src.Is4() {
		ip4 := &layers.IPv4{Version: 4, TTL: 64, Protocol: p.proto, SrcIP: src.AsSlice(), DstIP: dst.AsSlice(), FragOffset: p.fragOff}
		if p.mf {
			ip4.Flags = layers.IPv4MoreFragments
		}
		for range p.optWords * 4 {
			ip4.Options = append(ip4.Options, layers.IPv4Option{OptionType: 1}) // NOP
		}
		ip, hdr = ip4, ip4
	} else {
		ip6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: p.proto, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
		ip, hdr = ip6, ip6
	}
	l4 := p.l4(t, ip)
	if p.frag6 {
		// Next header, reserved, offset(13) res(2) M(1), identification.
		fh := []byte{byte(p.proto), 0, 0, 0, 0, 0, 0x12, 0x34}
		binary.BigEndian.PutUint16(fh[2:], p.fragOff<<3)
		if p.mf {
			fh[3] |= 1
		}
		l4 = append(fh, l4...)
		hdr.(*layers.IPv6).NextHeader = layers.IPProtocolIPv6Fragment
	}
	if p.hopByHop {
		// Next header, length 0 (8 bytes), a PadN option of 4 bytes.
		l4 = append([]byte{byte(hdr.(*layers.IPv6).NextHeader), 0, 1, 4, 0, 0, 0, 0}, l4...)
		hdr.(*layers.IPv6).NextHeader = layers.IPProtocolIPv6HopByHop
	}
	return serialize(t, hdr, gopacket.Payload(l4))
}

// l4 returns what follows the IP header, checksummed against ip.
func (p pk) l4(t testing.TB, ip gopacket.NetworkLayer) []byte {
	t.Helper()
	data := gopacket.Payload("vipd")
	if p.payload != nil {
		data = p.payload
	}
	if p.fragOff != 0 {
		return []byte("a non-first fragment: no L4 header in here")
	}
	if p.quote != nil {
		q := p.quote.packet(t)
		n := 40 + 8
		if q[0]>>4 == 4 {
			n = int(q[0]&0x0f)*4 + 8
		}
		if p.proto == layers.IPProtocolICMPv4 {
			return serialize(t, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeDestinationUnreachable, layers.ICMPv4CodeFragmentationNeeded)}, gopacket.Payload(q[:n]))
		}
		ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypePacketTooBig, 0)}
		ic.SetNetworkLayerForChecksum(ip)
		return serialize(t, ic, gopacket.Payload(append([]byte{0, 0, 0x05, 0x00}, q[:n]...))) // MTU 1280
	}
	switch p.proto {
	case layers.IPProtocolTCP:
		tcp := &layers.TCP{SrcPort: layers.TCPPort(p.sport), DstPort: layers.TCPPort(p.dport), ACK: true, Window: 512}
		tcp.SetNetworkLayerForChecksum(ip)
		return serialize(t, tcp, data)
	case layers.IPProtocolUDP:
		udp := &layers.UDP{SrcPort: layers.UDPPort(p.sport), DstPort: layers.UDPPort(p.dport)}
		udp.SetNetworkLayerForChecksum(ip)
		return serialize(t, udp, data)
	case layers.IPProtocolICMPv4:
		return serialize(t, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0), Id: 1, Seq: 1}, data)
	case layers.IPProtocolICMPv6:
		typ := uint8(layers.ICMPv6TypeEchoRequest)
		if p.icmpType != 0 {
			typ = p.icmpType
		}
		ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(typ, 0)}
		ic.SetNetworkLayerForChecksum(ip)
		// 4 bytes of identifier and sequence (echo) or reserved (NDP), then
		// the target address of a neighbour solicitation, or filler.
		return serialize(t, ic, gopacket.Payload(append([]byte{0, 1, 0, 1}, netip.MustParseAddr(p.dst).AsSlice()...)))
	}
	t.Fatalf("pk: no L4 builder for protocol %v", p.proto)
	return nil
}

// arpRequest returns a who-has for ip.
func arpRequest(t testing.TB, ip string) []byte {
	t.Helper()
	a := netip.MustParseAddr(ip).As4()
	return serialize(t,
		&layers.Ethernet{SrcMAC: macA, DstMAC: layers.EthernetBroadcast, EthernetType: layers.EthernetTypeARP},
		&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
			Operation: layers.ARPRequest, SourceHwAddress: macA, SourceProtAddress: []byte{198, 18, 0, 2},
			DstHwAddress: make([]byte, 6), DstProtAddress: a[:]})
}
