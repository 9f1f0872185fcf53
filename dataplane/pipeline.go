package dataplane

import (
	"encoding/binary"

	"github.com/vipd/vipd/packet"
)

// Process runs the pipeline on one frame and records the verdict in d. It
// is pure with respect to the outside world (no I/O, no clock, no
// allocation): everything it needs is the snapshot and time given to Begin,
// the worker's conntrack shard and the frame itself.
func (w *Worker) Process(d *Desc) {
	w.c.RxFrames++
	w.c.RxBytes += uint64(d.Len)
	w.process(d)
}

// process is Process without the receive counters, for frames another
// worker received (serveRelays).
func (w *Worker) process(d *Desc) {
	d.Verdict, d.Reason, d.Port = VerdictDrop, DropNone, 0
	frame := d.Buf[d.Off : d.Off+d.Len]
	var f packet.Frame
	if err := packet.Parse(frame, &f); err != nil {
		// Malformed: dropped if the steering rule makes it vipd's (the
		// XDP program would have redirected it), else the kernel's, as
		// the XDP program would have passed it.
		if w.snap.Claims(frame) {
			w.drop(d, reasonOf(err))
		} else {
			w.kernel(d)
		}
		return
	}
	switch f.EtherType {
	case packet.EtherTypeIPv4:
		w.ipv4(d, frame, &f)
	case packet.EtherTypeIPv6:
		w.ipv6(d, frame, &f)
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

// ipv4 classifies an IPv4 packet: to a VIP, a NAT reply, or none of ours.
func (w *Worker) ipv4(d *Desc, frame []byte, f *packet.Frame) {
	s := w.snap
	ip := f.IPv4(frame)
	dst := ip.DestinationUint32()
	vi := int32(-1)
	if f.Frag && !f.FirstFrag && isTCPUDP(f.Proto) {
		// Fragments after the first carry no ports: they are classified by
		// address and protocol alone. A first fragment has its ports and
		// is classified like a whole packet; all fragments are hashed on
		// addresses and protocol (pick4), so a datagram's fragments that
		// are forwarded land on one backend. (Only TCP and UDP: VIPs serve
		// nothing else, and (address, 0, 0) is the key of the address.)
		vi = s.cls4.addr4.get(key4(dst, f.Proto, 0))
		if vi == ambiguous {
			w.checkedDrop(d, ip, DropFragAmbiguous)
			return
		}
	} else if _, dp, ok := ports(frame, f); ok {
		if vi = s.cls4.exact4.get(key4(dst, f.Proto, dp)); vi < 0 {
			vi = s.cls4.exact4.get(key4(dst, f.Proto, 0))
		}
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
		w.forward4(d, frame, f, int(vi))
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
