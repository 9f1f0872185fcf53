package dataplane

import (
	"github.com/vipd/vipd/hashing"
	"github.com/vipd/vipd/nat"
	"github.com/vipd/vipd/packet"
)

// classify6 is classify4 for IPv6. IPv4-mapped addresses are not
// classified: ip hands them to the kernel.
func (w *Worker) classify6(frame []byte, p *pkt) {
	s := w.snap
	f := &p.f
	ip := packet.IPv6(p.l3)
	_ = ip[packet.IPv6Size-1] // Parse checked it; one bounds check for what follows
	src, dst := ip.SourceAddress(), ip.DestinationAddress()
	if mapped(dst[:]) || mapped(src[:]) {
		p.is = isMapped
		return
	}
	var sp, dp uint16
	var ok bool
	if f.Frag && !f.FirstFrag {
		if isTCPUDP(f.Proto) {
			p.vi = s.cls6.addr6.get(mkKey6(dst, f.Proto, 0))
		}
	} else if sp, dp, ok = ports(frame, f); ok {
		if p.vi = s.cls6.exact6.get(mkKey6(dst, f.Proto, dp)); p.vi < 0 {
			p.vi = s.cls6.exact6.get(mkKey6(dst, f.Proto, 0))
		}
	}
	if p.vi < 0 {
		if p.vi == empty && s.cls6.addr6.get(mkKey6(dst, 0, 0)) >= 0 {
			p.is = isDstVIP
		}
		return
	}
	if s.cls6.addr6.get(mkKey6(src, 0, 0)) >= 0 {
		p.is = isSrcVIP
	}
	v := &s.vips[p.vi]
	if f.Frag {
		p.hp = hashing.Frag6(src, dst, f.Proto, s.seed)
		if v.srcHash {
			p.hp = hashing.Src6(src, s.seed)
		}
		return
	}
	p.is |= isTracked
	// Field by field: a literal would be built on the stack and
	// copied (see Desc.Set).
	k := &p.key
	k.Src, k.SrcPort, k.DstPort, k.VIP, k.Proto, k.IPv6 = *src, sp, dp, v.id, f.Proto, true
	// A packet of the IPv6 flow hashed last takes its hashes, location
	// and serial, as flow4 does (the VIP id fixes the destination).
	m := &w.memo6
	tag := uint64(sp) | uint64(dp)<<16 | uint64(v.id)<<32 | uint64(f.Proto)<<48
	if tag == m.tag && *src == m.src {
		p.h, p.hp, p.loc, p.serial = m.h, m.hp, m.loc, m.serial
		return
	}
	p.h = hashing.Flow6(src, dst, sp, dp, f.Proto, s.seed)
	p.hp = p.h
	if v.srcHash {
		p.hp = hashing.Src6(src, s.seed)
	}
	p.loc = w.ct.Locate(p.h)
	w.serials++
	m.src, m.tag, m.h, m.hp, m.loc, m.serial, p.serial = *src, tag, p.h, p.hp, p.loc, w.serials, w.serials
}

// l4Of returns the transport part of a packet for the nat functions.
func l4Of(frame []byte, f *packet.Frame) nat.L4 {
	l4 := nat.L4{Proto: f.Proto}
	if f.HasL4 {
		l4.Hdr = frame[f.L4Off : f.L3Off+f.L3Len]
	}
	return l4
}
