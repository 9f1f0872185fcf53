package dataplane

import (
	"encoding/binary"

	"github.com/vipd/vipd/conntrack"
	"github.com/vipd/vipd/hashing"
	"github.com/vipd/vipd/packet"
)

// Process runs the pipeline on one frame and records the verdict in d. It
// is pure with respect to the outside world (no I/O, no clock, no
// allocation): everything it needs is the snapshot and time given to Begin,
// the worker's conntrack shard and the frame itself. It is ProcessBatch for
// a batch of one.
func (w *Worker) Process(d *Desc) {
	w.c.RxFrames++
	w.c.RxBytes += uint64(d.Len)
	w.process(d)
}

// process is Process without the receive counters, for frames another
// worker received (serveRelays).
func (w *Worker) process(d *Desc) {
	w.classify(d, &w.one)
	w.act(d, &w.one)
}

// classify is the first stage of the pipeline: it parses the frame, finds
// the VIP it is for, and for a flow that conntrack tracks computes the
// flow's key and hashes and starts loading its conntrack bucket. It reads
// only the frame and the snapshot, so it may run for every frame of a batch
// before act runs for any.
func (w *Worker) classify(d *Desc, p *pkt) {
	d.Verdict, d.Reason, d.Port = VerdictDrop, DropNone, 0
	p.vi, p.tracked = empty, false
	frame := d.Buf[d.Off : d.Off+d.Len]
	if p.err = packet.Parse(frame, &p.f); p.err != nil {
		return
	}
	switch p.f.EtherType {
	case packet.EtherTypeIPv4:
		p.l3 = p.f.L3(frame)
		w.classify4(frame, p)
	case packet.EtherTypeIPv6:
		p.l3 = p.f.L3(frame)
		w.classify6(frame, p)
	}
	if p.tracked {
		p.loc = w.ct.Locate(p.h)
		if w.prefetch >= 1 {
			w.ct.Prefetch(p.loc)
		}
	}
}

// act is the second stage: the verdict, from what classify found.
func (w *Worker) act(d *Desc, p *pkt) {
	frame := d.Buf[d.Off : d.Off+d.Len]
	if p.err != nil {
		// Malformed: dropped if the steering rule makes it vipd's (the
		// XDP program would have redirected it), else the kernel's, as
		// the XDP program would have passed it.
		if w.snap.Claims(frame) {
			w.drop(d, reasonOf(p.err))
		} else {
			w.kernel(d)
		}
		return
	}
	switch p.f.EtherType {
	case packet.EtherTypeIPv4:
		w.ipv4(d, frame, p)
	case packet.EtherTypeIPv6:
		w.ipv6(d, frame, p)
	default:
		w.kernel(d)
	}
}

// reasonOf maps a parse error to its drop reason without allocating.
func reasonOf(err error) DropReason {
	switch err {
	case packet.ErrTruncated:
		return DropTruncated
	case packet.ErrBadVersion, packet.ErrBadIHL, packet.ErrBadLength:
		return DropBadIPHeader
	case packet.ErrBadTCPOffset, packet.ErrBadUDPLength, packet.ErrUDPZeroChecksum:
		return DropBadL4
	case packet.ErrBadFragment:
		return DropBadFragment
	case packet.ErrTooManyExtHeaders, packet.ErrBadExtHeader:
		return DropExtHeaders
	}
	return DropBadIPHeader
}

// ports returns the transport ports of a packet that carries a TCP or UDP
// header, else zeros.
func ports(frame []byte, f *packet.Frame) (src, dst uint16, ok bool) {
	if !f.HasL4 || (f.Proto != packet.ProtoTCP && f.Proto != packet.ProtoUDP) {
		return 0, 0, false
	}
	l4 := frame[f.L4Off:]
	return binary.BigEndian.Uint16(l4), binary.BigEndian.Uint16(l4[2:]), true
}

// isTCPUDP reports whether proto is one a VIP can serve.
func isTCPUDP(proto uint8) bool { return proto == packet.ProtoTCP || proto == packet.ProtoUDP }

// tcpFlags returns the TCP flags byte, or 0 for other packets.
func tcpFlags(frame []byte, f *packet.Frame) uint8 {
	if f.Proto == packet.ProtoTCP && f.HasL4 {
		return frame[f.L4Off+13]
	}
	return 0
}

// classify4 is classify for IPv4: p.vi is the VIP the packet is for, or
// empty, or ambiguous (a non-first fragment for an address several VIPs of
// its protocol share). Fragments after the first carry no ports: they are
// classified by address and protocol alone. A first fragment has its ports
// and is classified like a whole packet; all fragments are hashed on
// addresses and protocol (pick4), so a datagram's fragments that are
// forwarded land on one backend. (Only TCP and UDP: VIPs serve nothing
// else, and (address, 0, 0) is the key of the address.)
func (w *Worker) classify4(frame []byte, p *pkt) {
	s := w.snap
	f := &p.f
	ip := packet.IPv4(p.l3)
	dst := ip.DestinationUint32()
	if f.Frag && !f.FirstFrag {
		if isTCPUDP(f.Proto) {
			p.vi = s.cls4.addr4.get(key4(dst, f.Proto, 0))
		}
		return
	}
	sp, dp, ok := ports(frame, f)
	if !ok {
		return
	}
	vi := s.cls4.exact4.get(key4(dst, f.Proto, dp))
	if vi < 0 {
		if vi = s.cls4.exact4.get(key4(dst, f.Proto, 0)); vi < 0 {
			return
		}
	}
	p.vi = vi
	if f.Frag {
		return // a first fragment: stateless (pick4)
	}
	v := &s.vips[vi]
	src := ip.SourceUint32()
	p.h = hashing.Flow4(src, dst, sp, dp, f.Proto, s.seed)
	p.hp = p.h
	if v.srcHash {
		p.hp = hashing.Src4(src, s.seed)
	}
	p.key = conntrack.Key{SrcPort: sp, DstPort: dp, VIP: v.id, Proto: f.Proto}
	binary.BigEndian.PutUint32(p.key.Src[:], src)
	p.tracked = true
}

// ipv4 acts on an IPv4 packet: to a VIP, a NAT reply, or none of ours.
func (w *Worker) ipv4(d *Desc, frame []byte, p *pkt) {
	s := w.snap
	f := &p.f
	ip := packet.IPv4(p.l3)
	dst := ip.DestinationUint32()
	vi := p.vi
	if vi == ambiguous {
		w.checkedDrop(d, ip, DropFragAmbiguous)
		return
	}
	if vi >= 0 {
		if !ip.IsChecksumValid() {
			w.drop(d, DropBadIPChecksum)
			return
		}
		if s.cls4.addr4.get(key4(ip.SourceUint32(), 0, 0)) >= 0 {
			w.drop(d, DropSrcIsVIP)
			return
		}
		w.forward4(d, frame, p, int(vi))
		return
	}
	if s.cls4.addr4.get(key4(dst, 0, 0)) >= 0 {
		// A VIP address, but no VIP of this protocol and port.
		if !ip.IsChecksumValid() {
			w.drop(d, DropBadIPChecksum)
			return
		}
		switch {
		case f.Proto == packet.ProtoICMPv4 && f.HasL4:
			w.icmpToVIP4(d, frame, f)
		case f.Proto == packet.ProtoTCP || f.Proto == packet.ProtoUDP:
			w.drop(d, DropVIPPort)
		default:
			w.drop(d, DropVIPProto)
		}
		return
	}
	if w.natReply4(d, frame, f) {
		return
	}
	w.kernel(d)
}

// checkedDrop drops a packet for reason r, unless its header checksum is
// wrong, which is reported first: a corrupt header says nothing reliable.
func (w *Worker) checkedDrop(d *Desc, ip packet.IPv4, r DropReason) {
	if !ip.IsChecksumValid() {
		r = DropBadIPChecksum
	}
	w.drop(d, r)
}
