package dataplane

import (
	"github.com/vipd/vipd/conntrack"
	"github.com/vipd/vipd/nat"
	"github.com/vipd/vipd/packet"
)

// The ICMP paths both address families share. Those with a branch on the
// family run only for ICMP to or about a VIP, never for a flow's own
// packets, so the branch costs the forwarding path nothing.

// icmpAllowed reports whether the ICMP rate limit lets vipd send one more
// message; when it does not, d is dropped for reason and counted as
// rate-limited too.
func (w *Worker) icmpAllowed(d *Desc, reason DropReason) bool {
	if w.icmp.allow(w.now) {
		return true
	}
	w.c.ICMPRateLimited++
	w.drop(d, reason)
	return false
}

// echoBack sends an echo reply, already written in place over the
// request in d, back out of the port it came in on, to the MAC it came
// from.
func (w *Worker) echoBack(d *Desc, frame []byte, f *packet.Frame) {
	var peer [6]byte
	copy(peer[:], frame[6:12])
	setMACs(frame, peer, w.snap.mac[d.RxPort])
	d.Len = f.L3Off + f.L3Len
	w.reply(d, d.RxPort)
}

// tooBigReply sends the ICMP error an icmperr generator wrote at d.Buf[o:]
// (n bytes) back to the sender of the packet it quotes, behind e's
// Ethernet header (and VLAN tag) with the addresses swapped.
func (w *Worker) tooBigReply(d *Desc, e *l2, o, n int, etherType uint16) {
	d.Off = o - e.hlen
	d.Len = e.hlen + n
	e.write(d.Buf[d.Off:], e.src, w.snap.mac[d.RxPort], etherType)
	// The packet itself is not forwarded: counted as a too_big drop, while
	// the frame's verdict is the reply.
	w.c.Drops[DropTooBig]++
	w.reply(d, d.RxPort)
}

// steerTo is the end of steer4 and steer6: it sends the ICMP error in d,
// whose quote q names flow k of VIP vi (hashes h and hp), to the flow's
// owner, encapsulated (DSR) or translated (NAT) like the flow's own
// packets. The family is k.IPv6's.
func (w *Worker) steerTo(d *Desc, frame []byte, f *packet.Frame, q *quoted, k *conntrack.Key, h, hp uint64, vi int32) {
	s := w.snap
	v := &s.vips[vi]
	var b *backend
	if v.quic != nil && q.proto == packet.ProtoUDP {
		// The quoted payload: the ICMP error's after its 8-byte header.
		at := f.L4Off + 8
		if o := at + q.l4Off + packet.UDPSize; o <= at+q.end && at+q.end <= len(frame) {
			b = w.quicOwner(v, frame[o:at+q.end], int(vi))
		}
	}
	handed := false
	if b == nil {
		b, handed = w.owner(d, k, h, hp, int(vi), v)
	}
	if handed {
		return
	}
	if !w.reachable(d, b) {
		return
	}
	e := readL2(frame, f)
	out := s.egress()
	if v.mode == ModeDSR {
		// Never answer an ICMP error with another: one that does not fit
		// is dropped.
		if f.L3Len+v.over > s.mtu[out] {
			w.drop(d, DropTooBig)
			return
		}
		if k.IPv6 {
			w.encap6(d, frame, f, &e, v, b, out, 0, hp)
		} else {
			w.encap4(d, frame, f, &e, v, b, out, hp)
		}
		if d.Verdict == VerdictTX { // not dropped for want of headroom
			w.c.ICMPSteered++
		}
		return
	}
	if f.L3Len > s.mtu[out] {
		w.drop(d, DropTooBig)
		return
	}
	if k.IPv6 {
		ip := f.IPv6(frame)
		if !ip.DecHopLimit() {
			w.drop(d, DropTTLExceeded)
			return
		}
		nat.ICMPErrorDNAT6(ip, f.ICMPv6(frame), q.l4Off, q.end, q.proto, &b.addr6, b.port)
	} else {
		ip := f.IPv4(frame)
		if !ip.DecTTL() {
			w.drop(d, DropTTLExceeded)
			return
		}
		nat.ICMPErrorDNAT4(ip, f.ICMPv4(frame), q.l4Off, q.end, q.proto, b.addr4, b.port)
	}
	w.c.ICMPSteered++
	setBackendMACs(frame, b)
	d.Len = f.L3Off + f.L3Len
	w.tx(d, out)
}

// owner returns the backend that owns a flow without creating state: the
// pinned one if this worker's shard knows the flow; else, when another
// worker may hold it, it hands the error in d on to the next worker
// (handed is true and d's verdict is set, see relay.go); else Maglev's
// choice.
func (w *Worker) owner(d *Desc, k *conntrack.Key, h, hp uint64, vi int, v *vip) (b *backend, handed bool) {
	if e, ok := w.ct.Lookup(k, h); ok {
		if b := w.snap.backendFor(e.Backend(), vi); b != nil {
			return b, false
		}
		// Pinned to a backend that is gone or down: its next packet will
		// repick by Maglev, so does the error.
	} else if w.handOn(d) {
		return nil, true
	}
	b, _ = w.maglev(v, hp)
	return b, false
}

// replyErrorTo is the end of natReplyICMP4 and natReplyICMP6: it sends
// the ICMP error in d, about a packet a client sent to a backend of NAT
// VIP vi (quote q), on to the client, translated so that it comes from
// and quotes the VIP.
func (w *Worker) replyErrorTo(d *Desc, frame []byte, f *packet.Frame, q *quoted, vi int32, v6 bool) {
	s := w.snap
	v := &s.vips[vi]
	var mac [6]byte
	var ok bool
	if v6 {
		mac, ok = s.clientMAC6(f.IPv6(frame).DestinationAddress(), w.neigh)
	} else {
		mac, ok = s.clientMAC4(f.IPv4(frame).DestinationAddress(), w.neigh)
	}
	if !ok {
		w.drop(d, DropNoNeighbor)
		return
	}
	if f.L3Len > s.mtu[PortIngress] {
		w.drop(d, DropTooBig)
		return
	}
	if v6 {
		ip := f.IPv6(frame)
		if !ip.DecHopLimit() {
			w.drop(d, DropTTLExceeded)
			return
		}
		nat.ICMPErrorSNAT6(ip, f.ICMPv6(frame), q.l4Off, q.end, q.proto, &v.addr6, v.port, *ip.SourceAddress() == q.dst)
	} else {
		ip := f.IPv4(frame)
		if !ip.DecTTL() {
			w.drop(d, DropTTLExceeded)
			return
		}
		nat.ICMPErrorSNAT4(ip, f.ICMPv4(frame), q.l4Off, q.end, q.proto, v.addr4, v.port, ip.SourceAddress() == [4]byte(q.dst[:4]))
	}
	setMACs(frame, mac, s.mac[PortIngress])
	d.Len = f.L3Off + f.L3Len
	w.c.ICMPSteered++
	w.tx(d, PortIngress)
}
