package dataplane

import (
	"encoding/binary"

	"github.com/vipd/vipd/conntrack"
	"github.com/vipd/vipd/dataplane/icmperr"
	"github.com/vipd/vipd/hashing"
	"github.com/vipd/vipd/packet"
)

// ICMPv4 types (RFC 792).
const (
	icmpEchoReply   = 0
	icmpEchoRequest = 8
)

// icmpToVIP4 handles ICMP addressed to a VIP: echo requests are answered,
// errors about a VIP flow are steered to the backend that owns the flow,
// every other type (redirects, source quench, timestamps, ...) and every
// fragment is dropped and counted.
func (w *Worker) icmpToVIP4(d *Desc, frame []byte, f *packet.Frame) {
	ic := f.ICMPv4(frame)
	switch {
	case f.Frag:
		w.drop(d, DropICMPType)
	case ic.Type() == icmpEchoRequest && ic.Code() == 0:
		w.echo4(d, frame, f)
	case ic.IsFlowError():
		w.steer4(d, frame, f)
	default:
		w.drop(d, DropICMPType)
	}
}

// echo4 turns an echo request to a VIP into the reply, in place: swapping
// the addresses leaves the IP checksum as it is (the sum is commutative);
// the TTL and the ICMP type change incrementally.
func (w *Worker) echo4(d *Desc, frame []byte, f *packet.Frame) {
	if !w.icmpAllowed(d, DropICMPRateLimited) {
		return
	}
	ip := f.IPv4(frame)
	src, dst := ip.SourceAddress(), ip.DestinationAddress()
	ip.SetSourceAddress(dst)
	ip.SetDestinationAddress(src)
	old := uint16(ip.TTL())<<8 | uint16(ip.Protocol())
	ip.SetTTL(icmperr.TTL)
	ip.SetChecksum(packet.ChecksumUpdate16(ip.Checksum(), old, uint16(icmperr.TTL)<<8|uint16(ip.Protocol())))
	ic := f.ICMPv4(frame)
	ic.SetType(icmpEchoReply)
	ic.SetChecksum(packet.ChecksumUpdate16(ic.Checksum(), icmpEchoRequest<<8, icmpEchoReply<<8))
	w.echoBack(d, frame, f)
}

// steer4 delivers an ICMP error about a packet a VIP sent (the quote's
// source is the VIP, its destination the client) to the backend that owns
// the flow: the reversed quote is the flow's key, looked up in conntrack and
// otherwise hashed through Maglev like the flow's own packets. This keeps
// path-MTU discovery working behind the load balancer.
func (w *Worker) steer4(d *Desc, frame []byte, f *packet.Frame) {
	s := w.snap
	ip := f.IPv4(frame)
	ic := f.ICMPv4(frame)
	var q quoted
	if !parseQuote4(ic.Payload(), &q) {
		w.drop(d, DropICMPUnmatched)
		return
	}
	vipAddr, client := [4]byte(q.src[:4]), [4]byte(q.dst[:4])
	if vipAddr != ip.DestinationAddress() {
		w.drop(d, DropICMPUnmatched)
		return
	}
	va := u32(vipAddr)
	vi := s.cls4.exact4.get(key4(va, q.proto, q.sport))
	if vi < 0 {
		vi = s.cls4.exact4.get(key4(va, q.proto, 0))
	}
	if vi < 0 {
		w.drop(d, DropICMPUnmatched)
		return
	}
	if !ic.IsChecksumValid() {
		w.drop(d, DropBadICMPChecksum)
		return
	}
	v := &s.vips[vi]
	ca := u32(client)
	h := hashing.Flow4(ca, va, q.dport, q.sport, q.proto, s.seed)
	hp := h
	if v.srcHash {
		hp = hashing.Src4(ca, s.seed)
	}
	var k conntrack.Key
	binary.BigEndian.PutUint32(k.Src[:], ca)
	k.SrcPort, k.DstPort, k.VIP, k.Proto = q.dport, q.sport, v.id, q.proto
	w.steerTo(d, frame, f, &q, &k, h, hp, vi)
}
