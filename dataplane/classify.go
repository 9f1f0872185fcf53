package dataplane

import (
	"encoding/binary"
	"unsafe"

	"github.com/vipd/vipd/conntrack"
	"github.com/vipd/vipd/hashing"
	"github.com/vipd/vipd/internal/prefetch"
	"github.com/vipd/vipd/nat"
	"github.com/vipd/vipd/packet"
)

// classify is the first stage of the pipeline: it parses the frame, finds
// the VIP it is for, and for a flow that conntrack tracks computes the
// flow's key, hashes and location in the shard. It reads only the frame,
// the snapshot and the shard's fixed geometry, so it may run for every
// frame of a batch before act runs for any.
func (w *Worker) classify(d *Desc, p *pkt) {
	d.Verdict, d.Reason, d.Port = VerdictDrop, DropNone, 0
	p.vi, p.is = empty, 0
	frame := d.Buf[d.Off : d.Off+d.Len]
	if !w.noCommon && packet.ParseCommon(frame, &p.f) {
		w.classifyCommon(d, frame, p)
	} else if err := packet.Parse(frame, &p.f); err != nil {
		p.err, p.is = err, isMalformed
		return
	} else {
		switch p.f.EtherType {
		case packet.EtherTypeIPv4:
			p.l3 = p.f.L3(frame)
			w.classify4(frame, p)
		case packet.EtherTypeIPv6:
			p.l3 = p.f.L3(frame)
			w.classify6(frame, p)
		}
		if p.vi >= 0 {
			w.headroom(d, w.snap.vips[p.vi].over)
		}
	}
}

// classifyCommon is classify4 for a frame packet.ParseCommon took (IPv4
// without options, TCP or UDP, not a fragment), which is nearly every
// frame: it finds the same VIP and flags, and besides marks isClean a
// packet for a VIP whose header checksum is valid and whose source is no
// VIP, which act forwards without ip's checks.
func (w *Worker) classifyCommon(d *Desc, frame []byte, p *pkt) {
	s := w.snap
	f := &p.f
	// ParseCommon checked that the frame holds these 38 bytes (Ethernet,
	// IPv4 without options, the ports) and more.
	h := (*[packet.EthernetSize + packet.IPv4MinSize + 4]byte)(frame)
	ip := (*[packet.IPv4MinSize]byte)(h[packet.EthernetSize:])
	p.eth = (*[packet.EthernetSize]byte)(h[:])
	p.l3 = frame[packet.EthernetSize : packet.EthernetSize+f.L3Len]
	src, dst := binary.BigEndian.Uint32(ip[12:]), binary.BigEndian.Uint32(ip[16:])
	sp, dp := binary.BigEndian.Uint16(h[34:]), binary.BigEndian.Uint16(h[36:])
	if p.vi = s.cls4.exact4.get(key4(dst, f.Proto, dp)); p.vi < 0 {
		if p.vi = s.cls4.exact4.get(key4(dst, f.Proto, 0)); p.vi < 0 {
			if s.cls4.addr4.get(key4(dst, 0, 0)) >= 0 {
				p.is = isDstVIP
			}
			return
		}
	}
	switch {
	case s.cls4.vipAddrs4.mayHave(src) && s.cls4.addr4.get(key4(src, 0, 0)) >= 0:
		p.is = isSrcVIP
	case packet.ChecksumValid20(ip):
		p.is = isClean
	}
	v := &s.vips[p.vi]
	p.v = v
	w.flow4(p, v, src, dst, sp, dp)
	if v.over > 0 {
		w.headroom(d, v.over)
	}
}

// headroom starts loading the line in front of frame d that an
// encapsulation adding o bytes writes its outer headers into (o is 0 for a
// VIP that does not encapsulate). Nothing has touched that line since the
// frame's last use, so a driver's frame seldom has it cached, and act's
// writes there, and the transmit's reads, would wait for it. (Measured in
// the bench's box-limited rig: with DSR, the read-back of an outer header
// written there was 40% of vipd's user time.) It runs in classify, a batch
// ahead of act; a frame without o bytes of headroom gets none.
func (w *Worker) headroom(d *Desc, o int) {
	if o > 0 && d.Off >= o {
		prefetch.Line(unsafe.Pointer(&d.Buf[d.Off-o]))
	}
}

// flow4 sets the key, hashes, location and isTracked of an IPv4 flow for
// VIP v. A packet of the flow the worker's last IPv4 one was of (a
// burst's frames follow each other) takes that one's hashes and location
// (memo4): they are functions of the key (whose VIP has one address, the
// destination), the snapshot's seed and the shard, and adopt forgets
// them with the snapshot.
func (w *Worker) flow4(p *pkt, v *vip, src, dst uint32, sp, dp uint16) {
	p.is |= isTracked
	p.key = conntrack.Key{SrcPort: sp, DstPort: dp, VIP: v.id, Proto: p.f.Proto}
	binary.BigEndian.PutUint32(p.key.Src[:], src)
	// The key's fields compared in registers, not the key just stored
	// (its words, read back across narrower stores, would wait for them).
	m := &w.memo4
	tag := uint64(sp) | uint64(dp)<<16 | uint64(v.id)<<32 | uint64(p.f.Proto)<<48
	if tag == m.tag && src == m.src {
		p.h, p.hp, p.loc, p.serial = m.h, m.hp, m.loc, m.serial
		return
	}
	s := w.snap
	p.h = hashing.Flow4(src, dst, sp, dp, p.f.Proto, s.seed)
	p.hp = p.h
	if v.srcHash {
		p.hp = hashing.Src4(src, s.seed)
	}
	p.loc = w.ct.Locate(p.h)
	w.serials++
	m.src, m.tag, m.h, m.hp, m.loc, m.serial, p.serial = src, tag, p.h, p.hp, p.loc, w.serials, w.serials
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

// isSynAck reports whether the frame is a TCP SYN-ACK (neither RST nor FIN
// set): a backend's answer to a handshake.
func isSynAck(frame []byte, f *packet.Frame) bool {
	const want = packet.TCPFlagSYN | packet.TCPFlagACK
	return f.Proto == packet.ProtoTCP && f.HasL4 &&
		frame[f.L4Off+13]&(want|packet.TCPFlagRST|packet.TCPFlagFIN) == want
}

// synAck is isSynAck on the transport header natReply4 already sliced
// (empty without one): the reply path's test, cheaper than the frame's.
func synAck(l4 *nat.L4) bool {
	const want = packet.TCPFlagSYN | packet.TCPFlagACK
	return l4.Proto == packet.ProtoTCP && len(l4.Hdr) > 13 && l4.Hdr[13]&(want|packet.TCPFlagRST|packet.TCPFlagFIN) == want
}

// classify4 is classify for IPv4: p.vi is the VIP the packet is for, or
// empty, or ambiguous (a non-first fragment for an address several VIPs of
// its protocol share). Fragments after the first carry no ports: they are
// classified by address and protocol alone. A first fragment has its ports
// and is classified like a whole packet; all fragments are hashed on
// addresses and protocol, so a datagram's fragments that are forwarded
// land on one backend. (Only TCP and UDP: VIPs serve nothing else, and
// (address, 0, 0) is the key of the address.)
func (w *Worker) classify4(frame []byte, p *pkt) {
	s := w.snap
	f := &p.f
	ip := packet.IPv4(p.l3)
	_ = ip[packet.IPv4MinSize-1] // Parse checked it; one bounds check for what follows
	src, dst := ip.SourceUint32(), ip.DestinationUint32()
	var sp, dp uint16
	var ok bool
	if f.Frag && !f.FirstFrag {
		if isTCPUDP(f.Proto) {
			p.vi = s.cls4.addr4.get(key4(dst, f.Proto, 0))
		}
	} else if sp, dp, ok = ports(frame, f); ok {
		if p.vi = s.cls4.exact4.get(key4(dst, f.Proto, dp)); p.vi < 0 {
			p.vi = s.cls4.exact4.get(key4(dst, f.Proto, 0))
		}
	}
	if p.vi < 0 {
		if p.vi == empty && s.cls4.addr4.get(key4(dst, 0, 0)) >= 0 {
			p.is = isDstVIP
		}
		return
	}
	if s.cls4.vipAddrs4.mayHave(src) && s.cls4.addr4.get(key4(src, 0, 0)) >= 0 {
		p.is = isSrcVIP
	}
	v := &s.vips[p.vi]
	if !f.Frag {
		w.flow4(p, v, src, dst, sp, dp)
		return
	}
	p.hp = hashing.Frag4(src, dst, f.Proto, s.seed)
	if v.srcHash {
		p.hp = hashing.Src4(src, s.seed)
	}
}
