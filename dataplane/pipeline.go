package dataplane

import (
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

// act is the second stage: the verdict, from what classify found.
func (w *Worker) act(d *Desc, p *pkt) {
	w.hint = -1 // track sets it for a client packet that carries one
	if p.is&isClean != 0 {
		w.forwardClean(d, p) // all ip would do
		return
	}
	frame := d.Buf[d.Off : d.Off+d.Len]
	if p.is&isMalformed != 0 {
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
	case packet.EtherTypeIPv4, packet.EtherTypeIPv6:
		w.ip(d, frame, p)
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

// ip acts on an IPv4 or IPv6 packet as classify found it: to a VIP, to a
// VIP address but no VIP of its protocol and port, a NAT reply, or none of
// vipd's business.
func (w *Worker) ip(d *Desc, frame []byte, p *pkt) {
	f := &p.f
	v4 := f.EtherType == packet.EtherTypeIPv4
	switch {
	case p.is&isMapped != 0:
		// Not on the wire (RFC 4291 §2.5.5.2); the steering rule leaves
		// them to the kernel rather than let one alias an IPv4 entry.
		w.kernel(d)
	case p.vi == ambiguous && v4:
		w.checkedDrop4(d, packet.IPv4(p.l3), DropFragAmbiguous)
	case p.vi == ambiguous:
		w.drop(d, DropFragAmbiguous)
	case p.vi >= 0:
		switch {
		case v4 && !packet.IPv4(p.l3).IsChecksumValid():
			w.drop(d, DropBadIPChecksum)
		case p.is&isSrcVIP != 0:
			w.drop(d, DropSrcIsVIP)
		case f.Routed:
			// The VIP is a waypoint of a source route: vipd is not the
			// router that would process it (RFC 791 §3.1, RFC 8200
			// §4.4), a NAT rewrite would break the checksum, which
			// covers the last address, and a DSR backend would route
			// the packet on.
			w.drop(d, DropSourceRoute)
		default:
			w.forward(d, frame, p, int(p.vi))
		}
	case p.is&isDstVIP != 0:
		switch {
		case v4 && !packet.IPv4(p.l3).IsChecksumValid():
			w.drop(d, DropBadIPChecksum)
		case f.Proto == packet.ProtoICMPv4 && v4 && f.HasL4:
			w.icmpToVIP4(d, frame, f)
		case f.Proto == packet.ProtoICMPv6 && !v4 && f.HasL4:
			w.icmpToVIP6(d, frame, f)
		case isTCPUDP(f.Proto):
			w.drop(d, DropVIPPort)
		default:
			w.drop(d, DropVIPProto)
		}
	case v4 && w.natReply4(d, frame, f), !v4 && w.natReply6(d, frame, f):
	default:
		w.kernel(d)
	}
}

// checkedDrop4 drops an IPv4 packet for reason r, unless its header
// checksum is wrong, which is reported first: a corrupt header says
// nothing reliable. (IPv6 has no header checksum.)
func (w *Worker) checkedDrop4(d *Desc, ip packet.IPv4, r DropReason) {
	if !ip.IsChecksumValid() {
		r = DropBadIPChecksum
	}
	w.drop(d, r)
}
