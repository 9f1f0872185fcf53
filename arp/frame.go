package arp

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"

	mdarp "github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/ndp"
)

// Frames are built and parsed here, away from the sockets, so that the
// protocol logic is testable byte for byte. Nothing here is on the packet
// path: allocation is fine.

const (
	ethHeaderLen  = 14 // destination, source, EtherType; no VLAN tag (the kernel strips it before AF_PACKET)
	etherTypeARP  = 0x0806
	etherTypeIPv6 = 0x86dd

	// maxFrameLen sizes read buffers: a whole frame at a 1500-byte MTU.
	// ARP and NDP frames are far smaller; a longer one is truncated and
	// then fails validation, which is the right outcome.
	maxFrameLen = ethHeaderLen + 1500

	// ARP hardware type for Ethernet (RFC 826 ar$hrd; IANA "Ethernet (10Mb)").
	arpHardwareEthernet = 1
)

// IPv6 fixed header (RFC 8200 §3):
//
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Version| Traffic Class |           Flow Label                  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Payload Length        |  Next Header  |   Hop Limit   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                     Source Address (16)                       |
//	|                   Destination Address (16)                    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
const (
	ipv6HeaderLen  = 40
	ipv6PayloadLen = 4
	ipv6NextHeader = 6
	ipv6HopLimit   = 7
	ipv6Src        = 8
	ipv6Dst        = 24
	protocolICMPv6 = 58

	// NDP (RFC 4861 §4.3, §4.4).
	icmpv6TypeNS  = 135
	icmpv6TypeNA  = 136
	ndpMinNSNALen = 24 // ICMPv6 header (4) + reserved/flags (4) + target (16)
	// ndpHopLimit is required on every NDP message (RFC 4861 §7.1): a
	// router would have decremented it, so 255 proves the sender on-link.
	ndpHopLimit = ndp.HopLimit
)

var (
	broadcastMAC = [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

	// allNodes is ff02::1, where unsolicited advertisements go (RFC 4861 §7.2.6).
	allNodes = netip.MustParseAddr("ff02::1")

	errNotARP = errors.New("not an Ethernet/IPv4 ARP packet")
	errNotNDP = errors.New("not a valid neighbor discovery message")
)

// ARP packet for IPv4 over Ethernet (RFC 826), after the Ethernet header:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Hardware type (1)         |     Protocol type (0x0800)    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  HW len (6)   | Proto len (4) |          Operation            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Sender hardware address (6) | Sender protocol address (4)    |
//	|  Target hardware address (6) | Target protocol address (4)    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
const (
	arpLen       = 28 // the packet above, for Ethernet and IPv4
	arpRequest   = 1
	arpReply     = 2
	etherTypeIP4 = 0x0800

	// minFrameLen is the shortest Ethernet frame without FCS; shorter
	// frames are padded with zeros (IEEE 802.3 minimum payload of 46).
	minFrameLen = 60
)

// ethFrame returns a frame with an Ethernet header and room for n payload
// bytes, padded to the Ethernet minimum.
func ethFrame(dst, src [6]byte, etherType uint16, n int) []byte {
	b := make([]byte, max(ethHeaderLen+n, minFrameLen))
	copy(b[0:6], dst[:])
	copy(b[6:12], src[:])
	binary.BigEndian.PutUint16(b[12:14], etherType)
	return b
}

// arpFrame returns an Ethernet frame to ethDst, from senderMAC, carrying an
// ARP packet. Both protocol addresses must be IPv4. The ARP packet and the
// Ethernet frame are encoded by github.com/mdlayher/arp and
// github.com/mdlayher/ethernet (which pads to the Ethernet minimum).
func arpFrame(ethDst [6]byte, op uint16, senderMAC [6]byte, senderIP netip.Addr, targetMAC [6]byte, targetIP netip.Addr) []byte {
	p, err := mdarp.NewPacket(mdarp.Operation(op), net.HardwareAddr(senderMAC[:]), senderIP, net.HardwareAddr(targetMAC[:]), targetIP)
	if err != nil {
		// Only non-IPv4 addresses or short MACs fail, which callers never pass.
		panic("arp: " + err.Error())
	}
	payload, _ := p.MarshalBinary() // never fails (mdlayher/arp)
	f := ethernet.Frame{Destination: net.HardwareAddr(ethDst[:]), Source: net.HardwareAddr(senderMAC[:]), EtherType: ethernet.EtherTypeARP, Payload: payload}
	b, err := f.MarshalBinary()
	if err != nil {
		panic("arp: " + err.Error())
	}
	return b
}

// arpAnnouncement returns the frame RFC 5227 §3 calls an ARP Announcement:
// a broadcast ARP request whose sender and target protocol addresses are both
// addr and whose target hardware address is zero (RFC 5227 §2.3: "ignored
// and SHOULD be set to all zeroes").
func arpAnnouncement(mac [6]byte, addr netip.Addr) []byte {
	return arpFrame(broadcastMAC, arpRequest, mac, addr, [6]byte{}, addr)
}

// arpMessage is a parsed ARP packet with the Ethernet source it came from.
type arpMessage struct {
	op        uint16
	ethSrc    [6]byte
	senderMAC [6]byte
	senderIP  netip.Addr
	targetMAC [6]byte
	targetIP  netip.Addr
}

// parseARP parses an Ethernet frame carrying an ARP packet for IPv4 over
// Ethernet (with github.com/mdlayher/arp); any other ARP (other hardware or
// protocol types) is errNotARP. Trailing bytes (Ethernet padding) are
// ignored.
func parseARP(b []byte) (arpMessage, error) {
	if len(b) < ethHeaderLen+arpLen || binary.BigEndian.Uint16(b[12:14]) != etherTypeARP {
		return arpMessage{}, errNotARP
	}
	var p mdarp.Packet
	if err := p.UnmarshalBinary(b[ethHeaderLen:]); err != nil {
		return arpMessage{}, errNotARP
	}
	if p.HardwareType != arpHardwareEthernet || p.ProtocolType != etherTypeIP4 ||
		p.HardwareAddrLength != 6 || p.IPLength != 4 {
		return arpMessage{}, errNotARP
	}
	m := arpMessage{op: uint16(p.Operation), senderIP: p.SenderIP, targetIP: p.TargetIP}
	copy(m.ethSrc[:], b[6:12])
	copy(m.senderMAC[:], p.SenderHardwareAddr)
	copy(m.targetMAC[:], p.TargetHardwareAddr)
	return m, nil
}

// ndpFrame returns an Ethernet frame carrying an IPv6 packet with the NDP
// message m from src to dst, hop limit 255 and a correct ICMPv6 checksum.
func ndpFrame(ethSrc, ethDst [6]byte, src, dst netip.Addr, m ndp.Message) ([]byte, error) {
	icmp, err := ndp.MarshalMessageChecksum(m, src, dst)
	if err != nil {
		return nil, err
	}
	b := ethFrame(ethDst, ethSrc, etherTypeIPv6, ipv6HeaderLen+len(icmp))
	ip := b[ethHeaderLen:]
	ip[0] = 6 << 4 // version 6, traffic class 0, flow label 0
	binary.BigEndian.PutUint16(ip[ipv6PayloadLen:], uint16(len(icmp)))
	ip[ipv6NextHeader] = protocolICMPv6
	ip[ipv6HopLimit] = ndpHopLimit
	s, d := src.As16(), dst.As16()
	copy(ip[ipv6Src:], s[:])
	copy(ip[ipv6Dst:], d[:])
	copy(ip[ipv6HeaderLen:], icmp)
	return b, nil
}

// ndpMessage is a validated NDP message with the addresses it came with.
type ndpMessage struct {
	ethSrc   [6]byte
	src, dst netip.Addr
	msg      ndp.Message
}

// parseNDP parses an Ethernet frame carrying a Neighbor Solicitation or
// Neighbor Advertisement and applies the validity checks of RFC 4861 §7.1.1
// and §7.1.2 that do not depend on the receiver's state. Anything else,
// including IPv6 packets with extension headers, is errNotNDP.
func parseNDP(b []byte) (ndpMessage, error) {
	if len(b) < ethHeaderLen+ipv6HeaderLen+ndpMinNSNALen {
		return ndpMessage{}, errNotNDP
	}
	if binary.BigEndian.Uint16(b[12:14]) != etherTypeIPv6 {
		return ndpMessage{}, errNotNDP
	}
	var m ndpMessage
	copy(m.ethSrc[:], b[6:12])
	ip := b[ethHeaderLen:]
	if ip[0]>>4 != 6 || ip[ipv6NextHeader] != protocolICMPv6 || ip[ipv6HopLimit] != ndpHopLimit {
		return ndpMessage{}, errNotNDP
	}
	n := int(binary.BigEndian.Uint16(ip[ipv6PayloadLen:]))
	if n < ndpMinNSNALen || ipv6HeaderLen+n > len(ip) {
		return ndpMessage{}, errNotNDP
	}
	icmp := ip[ipv6HeaderLen : ipv6HeaderLen+n]
	m.src = netip.AddrFrom16([16]byte(ip[ipv6Src : ipv6Src+16]))
	m.dst = netip.AddrFrom16([16]byte(ip[ipv6Dst : ipv6Dst+16]))
	if icmp[1] != 0 || !icmpv6ChecksumOK(m.src, m.dst, icmp) {
		return ndpMessage{}, errNotNDP
	}
	msg, err := ndp.ParseMessage(icmp)
	if err != nil {
		return ndpMessage{}, errNotNDP
	}
	switch msg := msg.(type) {
	case *ndp.NeighborSolicitation:
		if msg.TargetAddress.IsMulticast() {
			return ndpMessage{}, errNotNDP
		}
		// §7.1.1: a solicitation from the unspecified address (duplicate
		// address detection) goes to a solicited-node address and carries
		// no source link-layer address.
		if m.src.IsUnspecified() {
			if !isSolicitedNode(m.dst) || linkLayerOption(msg.Options, ndp.Source) != nil {
				return ndpMessage{}, errNotNDP
			}
		}
	case *ndp.NeighborAdvertisement:
		if msg.TargetAddress.IsMulticast() || (m.dst.IsMulticast() && msg.Solicited) {
			return ndpMessage{}, errNotNDP
		}
	default:
		return ndpMessage{}, errNotNDP
	}
	m.msg = msg
	return m, nil
}

// icmpv6ChecksumOK reports whether the ICMPv6 message b, checksum included,
// sums to all ones over the pseudo-header of RFC 8200 §8.1.
func icmpv6ChecksumOK(src, dst netip.Addr, b []byte) bool {
	var sum uint32
	add := func(p []byte) {
		for len(p) >= 2 {
			sum += uint32(p[0])<<8 | uint32(p[1])
			p = p[2:]
		}
		if len(p) == 1 {
			sum += uint32(p[0]) << 8
		}
	}
	s, d := src.As16(), dst.As16()
	add(s[:])
	add(d[:])
	var l [8]byte // upper-layer length (4), zero (3), next header (1)
	binary.BigEndian.PutUint32(l[:4], uint32(len(b)))
	l[7] = protocolICMPv6
	add(l[:])
	add(b)
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return sum == 0xffff
}

// linkLayerOption returns the source or target link-layer address option of
// an NDP message, or nil. Only Ethernet-sized addresses are returned.
func linkLayerOption(opts []ndp.Option, dir ndp.Direction) net.HardwareAddr {
	for _, o := range opts {
		if lla, ok := o.(*ndp.LinkLayerAddress); ok && lla.Direction == dir && len(lla.Addr) == 6 {
			return lla.Addr
		}
	}
	return nil
}

// solicitedNode returns the solicited-node multicast address of addr
// (RFC 4291 §2.7.1: ff02::1:ff00:0/104 plus the low 24 bits of addr).
func solicitedNode(addr netip.Addr) netip.Addr {
	a := addr.As16()
	return netip.AddrFrom16([16]byte{0xff, 0x02, 11: 0x01, 12: 0xff, 13: a[13], 14: a[14], 15: a[15]})
}

func isSolicitedNode(addr netip.Addr) bool {
	return addr.Is6() && solicitedNode(addr) == addr
}

// multicastMAC maps an IPv6 multicast address to its Ethernet address
// (RFC 2464 §7: 33:33 followed by the low 32 bits).
func multicastMAC(addr netip.Addr) [6]byte {
	a := addr.As16()
	return [6]byte{0x33, 0x33, a[12], a[13], a[14], a[15]}
}

// neighborAdvertisement returns an NA for target carrying mac as the target
// link-layer address. Override is set: the sender is the authority for the
// address, and caches holding another MAC must switch (RFC 4861 §7.2.6).
func neighborAdvertisement(target netip.Addr, mac [6]byte, solicited bool) *ndp.NeighborAdvertisement {
	return &ndp.NeighborAdvertisement{
		Solicited:     solicited,
		Override:      true,
		TargetAddress: target,
		Options:       []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Target, Addr: mac[:]}},
	}
}

// unsolicitedNA returns the frame announcing addr at mac to all nodes.
func unsolicitedNA(mac [6]byte, addr netip.Addr) ([]byte, error) {
	return ndpFrame(mac, multicastMAC(allNodes), addr, allNodes, neighborAdvertisement(addr, mac, false))
}

// neighborSolicitation returns the frame asking for target's link-layer
// address from src at mac, multicast to target's solicited-node address.
// From the unspecified address it carries no source link-layer option
// (RFC 4861 §7.2.2 / §4.3).
func neighborSolicitation(mac [6]byte, src, target netip.Addr) ([]byte, error) {
	ns := &ndp.NeighborSolicitation{TargetAddress: target}
	if !src.IsUnspecified() {
		ns.Options = []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Source, Addr: mac[:]}}
	}
	dst := solicitedNode(target)
	return ndpFrame(mac, multicastMAC(dst), src, dst, ns)
}
