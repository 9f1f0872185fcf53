package xdpprog

import (
	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"
	"github.com/vipd/vipd/dsr"
	"github.com/vipd/vipd/packet"
)

// The fast path's half of the XDP program: fast and fast6 emit, at the
// program's start, the blocks that forward a frame of a flow found in the
// fast path's maps (fastmap.go has their layout and the Go side).

// fastClock is the helper the fast path reads the time with:
// bpf_ktime_get_coarse_ns where the kernel has it (5.11), else
// bpf_ktime_get_ns. The coarse clock is CLOCK_MONOTONIC as of the last
// timer tick, and reading it costs a load where the fine one reads the
// clock source: measured on this project's VM (BenchmarkFast, 4 runs),
// a fast-path translation took 64-76 ns in the kernel with
// bpf_ktime_get_ns and 44-52 ns with the coarse one (medians).
func fastClock() asm.BuiltinFunc {
	if features.HaveProgramHelper(ebpf.XDP, asm.FnKtimeGetCoarseNs) == nil {
		return asm.FnKtimeGetCoarseNs
	}
	return asm.FnKtimeGetNs
}

// Offsets in the frame of the fields the fast path reads (untagged
// Ethernet, then IPv4 without options).
const (
	fEthType = 12
	fIP      = ethHdrLen
	fVersIHL = fIP + 0
	fTotLen  = fIP + 2
	fFrag    = fIP + 6
	fTTL     = fIP + 8
	fProto   = fIP + 9
	fIPCsum  = fIP + 10
	fSrc     = fIP + 12
	fDst     = fIP + 16
	fL4      = fIP + ipv4MinLen
	fPorts   = fL4     // source port, destination port
	fDstPort = fL4 + 2 //
	fTCPCsum = fL4 + 16
	fUDPCsum = fL4 + 6

	tcpMinLen = 20
	udpLen    = 8

	// The TCP flags that change a flow's state: FIN, SYN, RST. A segment
	// carrying one goes to vipd.
	tcpStateFlags = 0x07
)

// Offsets in the frame of the fields the IPv6 fast path reads (untagged
// Ethernet, then the fixed IPv6 header, then TCP or UDP).
const (
	f6Vers    = fIP + 0 // version in the high nibble
	f6PayLen  = fIP + 4
	f6Next    = fIP + 6
	f6Hop     = fIP + 7
	f6Src     = fIP + 8
	f6Dst     = fIP + 24
	f6L4      = fIP + ipv6HdrLen
	f6Ports   = f6L4
	f6DstPort = f6L4 + 2
	f6TCPCsum = f6L4 + 16
	f6UDPCsum = f6L4 + 6
)

// stackFastKey is where the fast path builds its 16-byte key, below the
// steering keys (which it does not touch: it runs first); stackFastZero
// a word for the keys of the array maps; stackFastLen the total length of
// the packet being forwarded.
const (
	stackFastKey  = -56
	stackFastZero = -60
	stackFastLen  = -64
	stackFastKey6 = -104 // 40 bytes, below stackFastLen
)

// fastOpening emits the block fast and fast6 both open with, after their
// label: the frame's bounds into rPkt and rEnd, the frame long enough for
// the headers before the transport header (l4 bytes; the protocol is
// checked within them first, so a frame too short for this protocol's
// transport header may be long enough for the next one's), and the
// EtherType, which continues at other unless it is etherType. It
// returns the transport header's minimum length and its checksum's
// offset in the frame (tcpCsum or udpCsum, by proto).
func (b *builder) fastOpening(proto int32, l4 int32, etherType uint16, other string, tcpCsum, udpCsum int16) (l4Len int32, csumOff int16) {
	l4Len, csumOff = udpLen, udpCsum
	if proto == protoTCP {
		l4Len, csumOff = tcpMinLen, tcpCsum
	}
	b.emit(
		asm.LoadMem(rPkt, rCtx, mdData, asm.Word),
		asm.LoadMem(rEnd, rCtx, mdDataEnd, asm.Word),
	)
	b.need(rPkt, l4, lblSteer)
	b.emit(
		asm.LoadMem(rT1, rPkt, fEthType, asm.Half),
		asm.JNE.Imm(rT1, be16(etherType), other),
	)
	return l4Len, csumOff
}

// fast emits the IPv4 fast path for one transport protocol, at the start
// of the program: any frame it does not forward continues at lblSteer with
// nothing changed; a frame of another protocol continues at next, one of
// another EtherType at notIPv4. R6 holds the context; R7–R9 are the fast
// path's until it steers.
func (b *builder) fast(name string, proto int32, next, notIPv4 string) {
	steer := lblSteer
	b.label(name)
	l4Len, csumOff := b.fastOpening(proto, fL4, etherTypeIPv4, notIPv4, fTCPCsum, fUDPCsum)
	b.emit(
		asm.LoadMem(rT1, rPkt, fVersIHL, asm.Byte),
		asm.JNE.Imm(rT1, 0x45, steer), // IPv4, no options
		asm.LoadMem(rT1, rPkt, fProto, asm.Byte),
		asm.JNE.Imm(rT1, proto, next),
	)
	b.need(rPkt, fL4+l4Len, steer)
	b.emit(
		asm.LoadMem(rT1, rPkt, fFrag, asm.Half),
		asm.And.Imm(rT1, be16(0x3fff)), // MF, offset: a fragment
		asm.JNE.Imm(rT1, 0, steer),
		asm.LoadMem(rT1, rPkt, fTTL, asm.Byte),
		asm.JLE.Imm(rT1, 1, steer), // vipd answers Time Exceeded
		// The total length (rT2) covers the headers and no more than
		// the frame holds (Ethernet padding after it is trimmed below),
		// as packet.ParseCommon requires.
		asm.LoadMem(rT2, rPkt, fTotLen, asm.Half),
		asm.HostTo(asm.BE, rT2, asm.Half),
		asm.JLT.Imm(rT2, ipv4MinLen+l4Len, steer),
		asm.Mov.Reg(rT1, rEnd),
		asm.Sub.Reg(rT1, rPkt),
		asm.Sub.Imm(rT1, ethHdrLen),
		asm.JGT.Reg(rT2, rT1, steer),
		asm.Sub.Imm(rT2, ipv4MinLen), // rT2 = the L4 length
	)
	b.l4Checks(fL4, proto)
	// The IPv4 header checksum must verify, as the pipeline requires of
	// what it forwards this way: the five words and their carries folded
	// to 16 bits give 0xffff.
	b.emit(asm.LoadMem(rT1, rPkt, fIP, asm.Word))
	for off := int16(4); off < ipv4MinLen; off += 4 {
		b.emit(
			asm.LoadMem(rT2, rPkt, fIP+off, asm.Word),
			asm.Add.Reg(rT1, rT2),
		)
	}
	b.emit(
		asm.Mov.Reg(rT2, rT1),
		asm.RSh.Imm(rT2, 32),
		asm.Mov.Reg32(rT1, rT1), // the low 32 bits
		asm.Add.Reg(rT1, rT2),
	)
	b.fold16(rT1, rT2, 3) // < 2^33 → < 2^18 → < 2^16 + 4 → <= 0xffff
	b.emit(asm.JNE.Imm(rT1, 0xffff, steer))
	// The key: addresses and ports as on the wire, protocol, zero pad.
	b.emit(
		asm.LoadMem(rT1, rPkt, fSrc, asm.Word),
		asm.StoreMem(asm.RFP, stackFastKey, rT1, asm.Word),
		asm.LoadMem(rT1, rPkt, fDst, asm.Word),
		asm.StoreMem(asm.RFP, stackFastKey+4, rT1, asm.Word),
		asm.LoadMem(rT1, rPkt, fPorts, asm.Word),
		asm.StoreMem(asm.RFP, stackFastKey+8, rT1, asm.Word),
		asm.StoreImm(asm.RFP, stackFastKey+12, 0, asm.Word),
		asm.StoreImm(asm.RFP, stackFastKey+12, int64(proto), asm.Byte),
	)
	b.lookup(mapFast, stackFastKey)
	b.fastCommit(name, fL4+l4Len, func() {
		b.emit(
			asm.LoadMem(asm.R3, rPkt, fTotLen, asm.Half),
			asm.HostTo(asm.BE, asm.R3, asm.Half),
		)
	})
	b.emit(
		asm.LoadMem(asm.R1, asm.R9, fvMode, asm.Byte),
		asm.JEq.Imm(asm.R1, modeIPIP, name+"_ipip"),
		asm.JEq.Imm(asm.R1, modeSNAT, name+"_snat"),
		asm.JEq.Imm(asm.R1, modeGUE, name+"_gue"),
	)
	b.translate(name+"_dnat", name+"_count", fDst, fDstPort, csumOff, proto == protoUDP)
	b.translate(name+"_snat", name+"_count", fSrc, fPorts, csumOff, proto == protoUDP)
	b.encapsulate(name+"_ipip", name+"_count", false)
	b.encapsulate(name+"_gue", name+"_count", true)
	b.fastCount(name + "_count")
}

// fast6 is fast for IPv6: a NAT VIP's flow (DNAT), a NAT backend's
// replies (SNAT), or a DSR VIP's flow in IPv6 in IPv6; no extension
// headers. A frame of another protocol continues at next.
func (b *builder) fast6(name string, proto int32, next string) {
	steer := lblSteer
	b.label(name)
	l4Len, csumOff := b.fastOpening(proto, f6L4, etherTypeIPv6, steer, f6TCPCsum, f6UDPCsum)
	b.emit(
		asm.LoadMem(rT1, rPkt, f6Vers, asm.Byte),
		asm.And.Imm(rT1, 0xf0),
		asm.JNE.Imm(rT1, 0x60, steer),
		// The transport header right after the fixed header: no
		// extension headers (a fragment has one).
		asm.LoadMem(rT1, rPkt, f6Next, asm.Byte),
		asm.JNE.Imm(rT1, proto, next),
	)
	b.need(rPkt, f6L4+l4Len, steer)
	b.emit(
		asm.LoadMem(rT1, rPkt, f6Hop, asm.Byte),
		asm.JLE.Imm(rT1, 1, steer), // vipd answers Time Exceeded
		// The payload length (rT2, the L4 length) covers the transport
		// header and no more than the frame holds, as packet.Parse
		// requires.
		asm.LoadMem(rT2, rPkt, f6PayLen, asm.Half),
		asm.HostTo(asm.BE, rT2, asm.Half),
		asm.JLT.Imm(rT2, l4Len, steer),
		asm.Mov.Reg(rT1, rEnd),
		asm.Sub.Reg(rT1, rPkt),
		asm.Sub.Imm(rT1, f6L4),
		asm.JGT.Reg(rT2, rT1, steer),
	)
	b.l4Checks(f6L4, proto)
	if proto == protoUDP {
		// A zero checksum, which IPv6 forbids (RFC 8200 §8.1), is the
		// pipeline's to drop.
		b.emit(
			asm.LoadMem(rT1, rPkt, f6UDPCsum, asm.Half),
			asm.JEq.Imm(rT1, 0, steer),
		)
	}
	// The key: addresses and ports as on the wire, protocol, zero pad.
	for off := int16(0); off < 32; off += 4 {
		b.emit(
			asm.LoadMem(rT1, rPkt, f6Src+off, asm.Word),
			asm.StoreMem(asm.RFP, stackFastKey6+off, rT1, asm.Word),
		)
	}
	b.emit(
		asm.LoadMem(rT1, rPkt, f6Ports, asm.Word),
		asm.StoreMem(asm.RFP, stackFastKey6+32, rT1, asm.Word),
		asm.StoreImm(asm.RFP, stackFastKey6+36, 0, asm.Word),
		asm.StoreImm(asm.RFP, stackFastKey6+36, int64(proto), asm.Byte),
	)
	b.lookup(mapFast6, stackFastKey6)
	b.fastCommit(name, f6L4+l4Len, func() {
		b.emit(
			asm.LoadMem(asm.R3, rPkt, f6PayLen, asm.Half),
			asm.HostTo(asm.BE, asm.R3, asm.Half),
			asm.Add.Imm(asm.R3, ipv6HdrLen),
		)
	})
	b.emit(
		asm.LoadMem(asm.R1, asm.R9, fvMode, asm.Byte),
		asm.JEq.Imm(asm.R1, modeSNAT, name+"_snat"),
		asm.JEq.Imm(asm.R1, modeIPIP, name+"_ipip"),
	)
	b.translate6(name+"_dnat", name+"_count", f6Dst, f6DstPort, csumOff, proto == protoUDP)
	b.translate6(name+"_snat", name+"_count", f6Src, f6Ports, csumOff, proto == protoUDP)
	b.encapsulate6(name+"_ipip", name+"_count")
	b.fastCount(name + "_count")
}

// encapsulate6 is encapsulate for IPv6 in IPv6: room in front for an
// outer IPv6 header, the next hop's Ethernet header, and the outer header
// as dsr.Encap6 writes it (version 6, the inner traffic class, the
// entry's flow label, the inner packet's length, next header 41, hop
// limit dsr.OuterTTL, the entry's source and destination).
func (b *builder) encapsulate6(name, count string) {
	const over = ipv6HdrLen
	inner := int16(eOuter + over) // the inner packet's offset, after the move
	b.label(name)
	b.pushHead(over)
	b.need(rPkt, int32(inner)+8, lblSteer) // never fails: the frame grew
	b.copyMACs()
	for off := int16(0); off < 16; off += 4 {
		b.emit(
			asm.LoadMem(asm.R1, asm.R9, fvSrc6+off, asm.Word),
			asm.StoreMem(rPkt, eOuter+8+off, asm.R1, asm.Word),
			asm.LoadMem(asm.R1, asm.R9, fvAddr6+off, asm.Word),
			asm.StoreMem(rPkt, eOuter+24+off, asm.R1, asm.Word),
		)
	}
	b.emit(
		asm.StoreImm(rPkt, fEthType, int64(be16(etherTypeIPv6)), asm.Half),
		// Version 6, the inner traffic class, the entry's label.
		asm.LoadMem(asm.R1, rPkt, inner, asm.Word),
		asm.HostTo(asm.BE, asm.R1, asm.Word),
		asm.And.Imm(asm.R1, 0x0ff00000),
		asm.LoadMem(asm.R2, asm.R9, fvLabel6, asm.Word),
		asm.Or.Reg(asm.R1, asm.R2),
		asm.Or.Imm(asm.R1, 0x60000000),
		asm.HostTo(asm.BE, asm.R1, asm.Word),
		asm.StoreMem(rPkt, eOuter, asm.R1, asm.Word),
		// The payload length: the inner packet, 40 + its own.
		asm.LoadMem(asm.R1, rPkt, inner+4, asm.Half),
		asm.HostTo(asm.BE, asm.R1, asm.Half),
		asm.Add.Imm(asm.R1, ipv6HdrLen),
		asm.HostTo(asm.BE, asm.R1, asm.Half),
		asm.StoreMem(rPkt, eOuter+4, asm.R1, asm.Half),
		asm.StoreImm(rPkt, eOuter+6, int64(be16(uint16(packet.ProtoIPv6)<<8|dsr.OuterTTL)), asm.Half),
		asm.Ja.Label(count),
	)
}

// translate6 is translate for IPv6, as nat's rewrite6 makes it: the
// entry's MACs, its 16-byte address at addrOff, its port (unless 0) at
// portOff, the hop limit decremented, and its sum added to the TCP or UDP
// checksum at csumOff (udp: a computed 0 is sent as 0xffff).
func (b *builder) translate6(name, count string, addrOff, portOff, csumOff int16, udp bool) {
	b.label(name)
	b.copyMACs()
	for off := int16(0); off < 16; off += 4 {
		b.emit(
			asm.LoadMem(asm.R1, asm.R9, fvAddr6+off, asm.Word),
			asm.StoreMem(rPkt, addrOff+off, asm.R1, asm.Word),
		)
	}
	b.emit(
		asm.LoadMem(asm.R1, rPkt, f6Hop, asm.Byte),
		asm.Sub.Imm(asm.R1, 1),
		asm.StoreMem(rPkt, f6Hop, asm.R1, asm.Byte),
	)
	b.portAndSum(name, portOff, csumOff, udp)
	b.emit(asm.Ja.Label(count))
}

// Offsets within a TCP or UDP header that l4Checks reads.
const (
	tcpDataOff = 12 // data offset, in the high nibble
	tcpFlags   = 13
	udpLenOff  = 4
)

// l4Checks emits the transport header's checks for a frame whose TCP or
// UDP header is at l4 and whose L4 length is in rT2: a TCP data offset
// of 5 words at least, within the L4 length, and none of the flags that
// change the flow's state (those segments go to vipd); a UDP length of
// the header at least, within the L4 length.
func (b *builder) l4Checks(l4 int16, proto int32) {
	if proto == protoTCP {
		b.emit(
			asm.LoadMem(rT1, rPkt, l4+tcpDataOff, asm.Byte),
			asm.RSh.Imm(rT1, 4),
			asm.LSh.Imm(rT1, 2),
			asm.JLT.Imm(rT1, tcpMinLen, lblSteer),
			asm.JGT.Reg(rT1, rT2, lblSteer),
			asm.LoadMem(rT1, rPkt, l4+tcpFlags, asm.Byte),
			asm.And.Imm(rT1, tcpStateFlags),
			asm.JNE.Imm(rT1, 0, lblSteer),
		)
		return
	}
	b.emit(
		asm.LoadMem(rT1, rPkt, l4+udpLenOff, asm.Half),
		asm.HostTo(asm.BE, rT1, asm.Half),
		asm.JLT.Imm(rT1, udpLen, lblSteer),
		asm.JGT.Reg(rT1, rT2, lblSteer),
	)
}

// copyMACs writes the entry's (R9) Ethernet addresses into the frame.
func (b *builder) copyMACs() {
	for off := int16(0); off < 12; off += 4 {
		b.emit(
			asm.LoadMem(asm.R1, asm.R9, fvMACs+off, asm.Word),
			asm.StoreMem(rPkt, off, asm.R1, asm.Word),
		)
	}
}

// portAndSum writes the entry's port at portOff unless it is 0, and adds
// its L4 sum to the TCP or UDP checksum at csumOff (addToChecksum).
func (b *builder) portAndSum(name string, portOff, csumOff int16, udp bool) {
	b.emit(
		asm.LoadMem(asm.R1, asm.R9, fvPort, asm.Half),
		asm.JEq.Imm(asm.R1, 0, name+"_port_kept"),
		asm.StoreMem(rPkt, portOff, asm.R1, asm.Half),
	)
	b.label(name + "_port_kept")
	b.emit(asm.LoadMem(asm.R2, asm.R9, fvL4Sum, asm.Half))
	b.addToChecksum(csumOff, udp, name+"_l4sum")
}

// pushHead makes room for over bytes in front of the frame
// (bpf_xdp_adjust_head) and reloads the packet pointers; refused (no
// headroom), the frame has lost only its padding, which the pipeline
// drops too, and goes to the steering rule.
func (b *builder) pushHead(over int32) {
	b.emit(
		asm.Mov.Reg(asm.R1, rCtx),
		asm.Mov.Imm(asm.R2, -over),
		asm.FnXdpAdjustHead.Call(),
		asm.JNE.Imm(asm.R0, 0, lblSteer),
		asm.LoadMem(rPkt, rCtx, mdData, asm.Word),
		asm.LoadMem(rEnd, rCtx, mdDataEnd, asm.Word),
	)
}

// fastCommit emits what follows the flow map's lookup (R0: the entry or
// 0) for every family: the entry must be of the current generation, for
// the interface the frame came in on (when it names one), unexpired, and
// the packet's length, which loadLen puts in R3 from the frame at rPkt,
// within its MaxLen; the Ethernet padding after the packet goes, and the
// verifier is told again that minLen bytes of the frame are there. Then
// the frame is committed: R9 holds the entry, the length waits on the
// stack (stackFastLen) for fastCount, and what follows changes the frame.
func (b *builder) fastCommit(name string, minLen int32, loadLen func()) {
	steer := lblSteer
	b.emit(
		asm.JEq.Imm(asm.R0, 0, steer),
		asm.Mov.Reg(asm.R9, asm.R0), // the entry, past the next calls
		asm.StoreImm(asm.RFP, stackFastZero, 0, asm.Word),
	)
	b.lookup(mapFastGen, stackFastZero)
	b.emit(
		asm.JEq.Imm(asm.R0, 0, steer),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.Word),
		asm.LoadMem(asm.R2, asm.R9, fvGen, asm.Word),
		asm.JNE.Reg(asm.R1, asm.R2, steer),
		// The interface it came in on, when the entry names one.
		asm.LoadMem(asm.R2, asm.R9, fvIn, asm.Word),
		asm.JEq.Imm(asm.R2, 0, name+"_any_in"),
		asm.LoadMem(asm.R1, rCtx, mdIngressIfindex, asm.Word),
		asm.JNE.Reg(asm.R1, asm.R2, steer),
	)
	b.label(name + "_any_in")
	b.emit(
		b.clock.Call(),
		asm.LoadMem(asm.R1, asm.R9, fvExpires, asm.DWord),
		asm.JGE.Reg(asm.R0, asm.R1, steer),
	)
	loadLen()
	b.emit(
		asm.LoadMem(asm.R1, asm.R9, fvMaxLen, asm.Half),
		asm.JGT.Reg(asm.R3, asm.R1, steer),
	)
	// Ethernet padding after the IP packet goes, as the pipeline drops
	// it (bpf_xdp_adjust_tail, which invalidates the packet pointers);
	// if the kernel refuses, nothing has changed yet.
	b.emit(
		asm.Mov.Reg(asm.R2, rPkt),
		asm.Add.Imm(asm.R2, ethHdrLen),
		asm.Add.Reg(asm.R2, asm.R3),
		asm.Sub.Reg(asm.R2, rEnd), // minus the padding, <= 0
		asm.JEq.Imm(asm.R2, 0, name+"_unpadded"),
		asm.Mov.Reg(asm.R1, rCtx),
		asm.FnXdpAdjustTail.Call(),
		asm.JNE.Imm(asm.R0, 0, steer),
		asm.LoadMem(rPkt, rCtx, mdData, asm.Word),
		asm.LoadMem(rEnd, rCtx, mdDataEnd, asm.Word),
	)
	// The bound again for the verifier, which forgot it with the
	// pointers: the frame has not shrunk below the length checked
	// above, so this never steers a changed frame.
	b.need(rPkt, minLen, steer)
	loadLen()
	b.label(name + "_unpadded")
	// Committed: from here on the frame is changed and forwarded. The
	// length waits on the stack for the counters, since an encapsulation
	// moves the packet.
	b.emit(asm.StoreMem(asm.RFP, stackFastLen, asm.R3, asm.Word))
}

// fastCount emits, labelled name, the end of a forwarded frame for the
// entry at R9: it is counted by its length on the stack (stackFastLen),
// in this CPU's counters and in the entry's counting slot, and sent out
// of the entry's interface (XDP_TX, or bpf_redirect).
func (b *builder) fastCount(name string) {
	// Count it in this CPU's counters (no other CPU writes them), by the
	// packet's length as it arrived.
	b.label(name)
	b.emit(asm.StoreImm(asm.RFP, stackFastZero, 0, asm.Word))
	b.lookup(mapFastStat, stackFastZero)
	b.emit(
		asm.JEq.Imm(asm.R0, 0, name+"_counted"), // cannot happen: key 0 of a 1-entry array
		asm.LoadMem(asm.R1, asm.R0, fsPackets, asm.DWord),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(asm.R0, fsPackets, asm.R1, asm.DWord),
		asm.LoadMem(asm.R3, asm.RFP, stackFastLen, asm.Word),
		asm.LoadMem(asm.R1, asm.R0, fsBytes, asm.DWord),
		asm.Add.Reg(asm.R1, asm.R3),
		asm.StoreMem(asm.R0, fsBytes, asm.R1, asm.DWord),
	)
	b.label(name + "_counted")
	// And in the entry's slot, which frames of other CPUs share: atomic
	// adds. A reference past the array is counted in the totals only.
	b.emit(
		asm.LoadMem(asm.R1, asm.R9, fvRef, asm.Word),
		asm.StoreMem(asm.RFP, stackFastZero, asm.R1, asm.Word),
	)
	b.lookup(mapFastRef, stackFastZero)
	b.emit(
		asm.JEq.Imm(asm.R0, 0, name+"_ref_counted"),
		asm.Mov.Imm(asm.R1, 1),
		asm.AddAtomic.Mem(asm.R0, asm.R1, asm.DWord, 0),
		asm.LoadMem(asm.R3, asm.RFP, stackFastLen, asm.Word),
		asm.AddAtomic.Mem(asm.R0, asm.R3, asm.DWord, 8),
	)
	b.label(name + "_ref_counted")
	b.emit(
		asm.LoadMem(asm.R1, asm.R9, fvIfindex, asm.Word),
		asm.JNE.Imm(asm.R1, 0, lblFastRedirect),
		asm.Mov.Imm(asm.R0, xdpTX),
		asm.Return(),
	)
}

// translate emits the address translation of the frame at rPkt, whose
// Ethernet padding is gone, for the entry at R9, as nat's rewrite4 makes
// it: the entry's MACs, its address at addrOff (the destination's or the
// source's) and, unless 0, its port at portOff, the TTL decremented, and
// the entry's sums added to the header checksum and to the TCP or UDP
// one at csumOff (udp: 0, no checksum, stays 0). It is labelled name and
// continues at count.
func (b *builder) translate(name, count string, addrOff, portOff, csumOff int16, udp bool) {
	b.label(name)
	b.copyMACs()
	b.emit(
		asm.LoadMem(asm.R1, asm.R9, fvAddr, asm.Word),
		asm.StoreMem(rPkt, addrOff, asm.R1, asm.Word),
		asm.LoadMem(asm.R1, rPkt, fTTL, asm.Byte),
		asm.Sub.Imm(asm.R1, 1),
		asm.StoreMem(rPkt, fTTL, asm.R1, asm.Byte),
		asm.LoadMem(asm.R2, asm.R9, fvIPSum, asm.Half),
	)
	b.addToChecksum(fIPCsum, false, name+"_ipsum")
	b.portAndSum(name, portOff, csumOff, udp)
	b.emit(asm.Ja.Label(count))
}

// encapsulate emits the encapsulation of the frame at rPkt, whose
// Ethernet padding is gone, for the entry at R9: room in front for an
// outer IPv4 header (bpf_xdp_adjust_head), and with gue for a UDP header
// after it, then the next hop's Ethernet header, the outer header as
// dsr.Encap4 writes it (protocol IPIP) or as dsr.GUE4 does (protocol
// UDP, then the entry's ports, the length, no checksum). It is labelled
// name and continues at count.
func (b *builder) encapsulate(name, count string, gue bool) {
	over, proto := int16(ipv4MinLen), uint16(packet.ProtoIPIP)
	if gue {
		over, proto = ipv4MinLen+udpHdr, uint16(packet.ProtoUDP)
	}
	inner := eOuter + over // the inner packet's offset, after the move
	b.label(name)
	b.pushHead(int32(over))
	b.need(rPkt, int32(inner)+4, lblSteer) // never fails: the frame grew
	b.copyMACs()
	b.emit(
		asm.StoreImm(rPkt, fEthType, int64(be16(etherTypeIPv4)), asm.Half),
		asm.LoadMem(asm.R1, rPkt, inner+1, asm.Byte), // the inner TOS
		asm.LoadMem(asm.R3, rPkt, inner+2, asm.Half), // and total length
		asm.HostTo(asm.BE, asm.R3, asm.Half),
	)
	if gue {
		b.emit(
			asm.LoadMem(asm.R2, asm.R9, fvGUESrcPort, asm.Half),
			asm.StoreMem(rPkt, eOuter+ipv4MinLen, asm.R2, asm.Half),
			asm.LoadMem(asm.R2, asm.R9, fvGUEDstPort, asm.Half),
			asm.StoreMem(rPkt, eOuter+ipv4MinLen+2, asm.R2, asm.Half),
			asm.Mov.Reg(asm.R2, asm.R3),
			asm.Add.Imm(asm.R2, udpHdr), // the UDP length
			asm.HostTo(asm.BE, asm.R2, asm.Half),
			asm.StoreMem(rPkt, eOuter+ipv4MinLen+4, asm.R2, asm.Half),
			asm.StoreImm(rPkt, eOuter+ipv4MinLen+6, 0, asm.Half), // no checksum
		)
	}
	b.emit(
		asm.Add.Imm(asm.R3, int32(over)), // the outer total length
		asm.StoreImm(rPkt, eOuter, 0x45, asm.Byte),
		asm.StoreMem(rPkt, eOuter+1, asm.R1, asm.Byte),
		asm.Mov.Reg(asm.R2, asm.R3),
		asm.HostTo(asm.BE, asm.R2, asm.Half),
		asm.StoreMem(rPkt, eOuter+2, asm.R2, asm.Half),
		asm.StoreImm(rPkt, eOuter+4, int64(be32(0x4000)), asm.Word), // ID 0, DF
		asm.StoreImm(rPkt, eOuter+8, int64(be16(uint16(dsr.OuterTTL)<<8|proto)), asm.Half),
		asm.LoadMem(asm.R2, asm.R9, fvSrc, asm.Word),
		asm.StoreMem(rPkt, eOuter+12, asm.R2, asm.Word),
		asm.LoadMem(asm.R2, asm.R9, fvAddr, asm.Word),
		asm.StoreMem(rPkt, eOuter+16, asm.R2, asm.Word),
		// The checksum: ^fold(OuterSum + TOS + total length), in host
		// order, stored in network order.
		asm.LoadMem(asm.R2, asm.R9, fvOutSum, asm.Half),
		asm.Add.Reg(asm.R2, asm.R1),
		asm.Add.Reg(asm.R2, asm.R3),
	)
	b.fold16(asm.R2, asm.R4, 2) // < 2^18 → < 2^16 + 4 → <= 0xffff
	b.emit(
		asm.Xor.Imm(asm.R2, 0xffff),
		asm.HostTo(asm.BE, asm.R2, asm.Half),
		asm.StoreMem(rPkt, eOuter+10, asm.R2, asm.Half),
		asm.Ja.Label(count),
	)
}

// fold16 folds the ones' complement sum in x toward 16 bits, times
// times: x = x&0xffff + x>>16, with tmp clobbered. Each fold takes a sum
// below 2^(16+k) to one below 2^16 + 2^k, so the callers say how many
// their largest sum needs to end at most 0xffff.
func (b *builder) fold16(x, tmp asm.Register, times int) {
	for range times {
		b.emit(
			asm.Mov.Reg(tmp, x),
			asm.RSh.Imm(tmp, 16),
			asm.And.Imm(x, 0xffff),
			asm.Add.Reg(x, tmp),
		)
	}
}

// addToChecksum adds the folded sum in R2 to the 16-bit checksum at
// rPkt+off, both in the native order of network bytes, as
// packet.ChecksumAdd does: ^fold(^c + sum). A UDP checksum of 0 (none,
// RFC 768) stays 0, and a computed 0 is sent as 0xffff. R3 is kept.
func (b *builder) addToChecksum(off int16, udp bool, name string) {
	b.emit(asm.LoadMem(asm.R1, rPkt, off, asm.Half))
	if udp {
		b.emit(asm.JEq.Imm(asm.R1, 0, name+"_done"))
	}
	b.emit(
		asm.Xor.Imm(asm.R1, 0xffff),
		asm.Add.Reg(asm.R1, asm.R2),
	)
	b.fold16(asm.R1, asm.R2, 2) // <= 0x1fffe → <= 0x10000 → <= 0xffff
	b.emit(asm.Xor.Imm(asm.R1, 0xffff))
	if udp {
		b.emit(
			asm.JNE.Imm(asm.R1, 0, name+"_store"),
			asm.Mov.Imm(asm.R1, 0xffff),
		)
		b.label(name + "_store")
	}
	b.emit(asm.StoreMem(rPkt, off, asm.R1, asm.Half))
	if udp {
		b.label(name + "_done")
	}
}

// Labels of the fast path.
const (
	lblSteer        = "steer"
	lblFastRedirect = "fast_redirect"
)

// fastRedirect is bpf_redirect(ifindex in R1, 0): the frame leaves by
// another interface.
func (b *builder) fastRedirect() {
	b.label(lblFastRedirect)
	b.emit(
		asm.Mov.Imm(asm.R2, 0),
		asm.FnRedirect.Call(),
		asm.Return(),
	)
}
