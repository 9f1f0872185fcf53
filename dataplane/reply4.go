package dataplane

import (
	"github.com/vipd/vipd/nat"
	"github.com/vipd/vipd/packet"
)

// natReply4 handles a packet from a NAT backend toward a client (and an ICMP
// error about a packet a client sent to one), rewriting it to come from the
// VIP. It reports false when the packet is none of those.
//
// Replies need no conntrack lookup: configuration guarantees that a
// (backend address, protocol, port) belongs to one NAT VIP, so the reverse
// translation is a function of the packet. That matters because a reply
// may arrive on another NIC queue, and so another worker, than its flow.
//
// It follows the steering rule (claims.go): a packet to one of the box's
// own addresses is never a reply (a health check's answer from a NAT
// backend to the box is the kernel's), a first fragment is matched on its
// ports like a whole packet, later fragments on (source, protocol).
func (w *Worker) natReply4(d *Desc, frame []byte, f *packet.Frame) bool {
	s := w.snap
	ip := f.IPv4(frame)
	src := ip.SourceUint32()
	vi, ref := int32(-1), int32(-1)
	var cport uint16 // the client's port (TCP and UDP)
	switch {
	case f.Frag && !f.FirstFrag:
		vi = s.cls4.replyAddr4.get(key4(src, f.Proto, 0))
	case f.Proto == packet.ProtoICMPv4:
		if f.Frag {
			return false // the rule never relays a fragmented ICMP error
		}
		return w.natReplyICMP4(d, frame, f)
	default:
		sp, dp, ok := ports(frame, f)
		if !ok {
			return false
		}
		if ref = s.cls4.reply4.get(key4(src, f.Proto, sp)); ref < 0 {
			ref = s.cls4.reply4.get(key4(src, f.Proto, 0))
		}
		if ref >= 0 {
			vi, cport = s.backends[ref].vip, dp
		}
	}
	if vi == empty || s.isLocal4(ip.DestinationUint32()) {
		return false
	}
	if vi == ambiguous {
		w.checkedDrop4(d, ip, DropFragAmbiguous)
		return true
	}
	if !ip.IsChecksumValid() {
		w.drop(d, DropBadIPChecksum)
		return true
	}
	v := &s.vips[vi]
	if ip.TTL() <= 1 {
		w.drop(d, DropTTLExceeded)
		return true
	}
	mac, ok := s.clientMAC4(ip.DestinationAddress(), w.neigh)
	if !ok {
		w.drop(d, DropNoNeighbor)
		return true
	}
	e := readL2(frame, f)
	mtu := s.mtu[PortIngress]
	if f.L3Len > mtu && ip.DF() {
		w.tooBig4(d, f, &e, mtu, w.ownAddr4(d.RxPort, ip))
		return true
	}
	var l4 nat.L4
	l4.Proto = f.Proto
	if f.HasL4 {
		l4.Hdr = frame[f.L4Off : f.L3Off+f.L3Len]
	}
	w.sampleL4(frame, f)
	if w.fast != nil {
		w.offerReply(d, frame, f, v, uint32(ref), mac) // before the frame is translated
	}
	nat.SNAT4(ip, l4, v.addr4, v.port) // and the TTL, checked above
	setMACs(frame, mac, s.mac[PortIngress])
	d.Len = f.L3Off + f.L3Len
	w.c.Replies++
	w.countReply(v, ref, f.L3Len)
	if ref >= 0 && synAck(&l4) {
		var client [16]byte
		a := ip.DestinationAddress()
		copy(client[:], a[:])
		w.handshakeAnswered(watchKey(&client, cport, v.id), v.id, uint32(ref))
	}
	if f.L3Len > mtu {
		w.fragmentReply4(d, f, &e, mac, mtu)
		return true
	}
	w.tx(d, PortIngress)
	return true
}

// ownAddr4 is the source for an ICMP error vipd sends on port p: the
// port's own address if it has one, else the destination of the offending
// packet (what a transparent middlebox does).
func (w *Worker) ownAddr4(p uint8, ip packet.IPv4) [4]byte {
	if w.snap.has4[p] {
		return w.snap.addr4[p]
	}
	return ip.DestinationAddress()
}

// natReplyICMP4 translates an ICMP error headed for a client about a packet
// the client sent to a NAT backend, sent by the backend or by a router
// between vipd and the backend.
//
// Whether it is one is the steering rule's call, made on the same bytes
// the XDP program reads (the frame up to its end); once it is, every
// failure below is a counted drop.
func (w *Worker) natReplyICMP4(d *Desc, frame []byte, f *packet.Frame) bool {
	s := w.snap
	ip := f.IPv4(frame)
	key, kind := icmpReplyKey4(frame[f.L3Off:], f.L4Off-f.L3Off)
	if !s.isReply4(ip.DestinationUint32(), key, kind) {
		return false
	}
	if !ip.IsChecksumValid() {
		w.drop(d, DropBadIPChecksum)
		return true
	}
	ic := f.ICMPv4(frame)
	var q quoted
	if !parseQuote4(ic.Payload(), &q) || [4]byte(q.src[:4]) != ip.DestinationAddress() {
		w.drop(d, DropICMPUnmatched)
		return true
	}
	backend := u32([4]byte(q.dst[:4]))
	ref := s.cls4.reply4.get(key4(backend, q.proto, q.dport))
	if ref < 0 {
		ref = s.cls4.reply4.get(key4(backend, q.proto, 0))
	}
	if ref < 0 {
		w.drop(d, DropICMPUnmatched)
		return true
	}
	if !ic.IsChecksumValid() {
		w.drop(d, DropBadICMPChecksum)
		return true
	}
	w.replyErrorTo(d, frame, f, &q, s.backends[ref].vip, false)
	return true
}

// fragmentReply4 splits a translated reply too big for the ingress MTU.
func (w *Worker) fragmentReply4(d *Desc, f *packet.Frame, e *l2, mac [6]byte, mtu int) {
	b := backend{mac: mac}
	w.fragment4(d, f, e, &b, PortIngress, mtu, nil, 0)
}
