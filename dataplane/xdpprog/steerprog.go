package xdpprog

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"strings"

	"github.com/cilium/ebpf/asm"
	"github.com/vipd/vipd/packet"
)

// XDP verdicts (enum xdp_action in <linux/bpf.h>). The program returns
// only these two: it never drops.
const (
	xdpPass     = 2
	xdpRedirect = 4
)

// Offsets of the fields of struct xdp_md the program reads; each is a u32.
const (
	mdData           = 0
	mdDataEnd        = 4
	mdIngressIfindex = 12
	mdRxQueueIndex   = 16
)

// Wire constants. Everything the Go statement of the steering rule
// (dataplane.Snapshot.Claims) compares against comes from package packet,
// so the two cannot drift apart by a typo; the differential test in this
// package checks the rest.
const (
	etherTypeIPv4  = packet.EtherTypeIPv4
	etherTypeIPv6  = packet.EtherTypeIPv6
	etherType8021Q = packet.EtherTypeVLAN

	ethHdrLen   = packet.EthernetSize
	vlanTagLen  = packet.VLANTagSize
	ipv4MinLen  = packet.IPv4MinSize
	ipv6HdrLen  = packet.IPv6Size
	ipv6FragLen = packet.IPv6FragmentSize
	icmpHdrLen  = packet.ICMPSize // type, code, checksum, 4 bytes before the quoted packet (ICMPv4 and ICMPv6)

	protoICMP   = int32(packet.ProtoICMPv4)
	protoTCP    = int32(packet.ProtoTCP)
	protoUDP    = int32(packet.ProtoUDP)
	protoFrag6  = int32(packet.ProtoFragment)
	protoICMPv6 = int32(packet.ProtoICMPv6)

	icmp6NDPFirst = int32(packet.ICMPv6NDPFirst) // router solicitation
	icmp6NDPLast  = int32(packet.ICMPv6NDPLast)  // redirect

	icmp6ErrFirst = int32(packet.ICMPv6FlowErrorFirst)
	icmp6ErrLast  = int32(packet.ICMPv6FlowErrorLast)
)

// Stack layout (offsets from the frame pointer R10; the verifier wants
// every stack access naturally aligned: the keys are written in 32-bit
// words at multiples of 4 and the 16-bit port sits at an even offset).
//
//	fp-40 .. fp-25  reply key: source address (16 bytes, IPv4 mapped)
//	fp-24           reply key: protocol
//	fp-23           reply key: zero pad
//	fp-22 .. fp-21  reply key: source port, network order (0 = any port)
//	fp-16 .. fp-1   address key: destination address (16 bytes, IPv4 mapped)
//
// The two keys have exactly the layouts of addrKey and replyKey in maps.go.
const (
	stackDstKey     = -16
	stackReplyKey   = -40
	stackReplyProto = stackReplyKey + 16
	stackReplyPad   = stackReplyKey + 17
	stackReplyPort  = stackReplyKey + 18
)

// Register roles. R6–R9 survive helper calls; R0–R5 do not (R1–R5 carry
// helper arguments, R0 the result), so parsing, which calls no helper,
// uses them as scratch and nothing in them outlives the parse. Only rCtx
// and rKind are read after the first call.
const (
	rCtx  = asm.R6 // *xdp_md, for the whole program
	rPkt  = asm.R7 // packet cursor: start of the header being parsed
	rEnd  = asm.R8 // data_end; nothing at or past it may be read
	rKind = asm.R9 // how a NAT reply is looked up: kindNone, kindPorts or kindHost

	rChk = asm.R0 // scratch for bounds checks
	rT1  = asm.R1 // scratch
	rT2  = asm.R2 // scratch; holds the protocol while the L4 header is parsed
	rT3  = asm.R3 // scratch; the IPv4 header length
	rL4  = asm.R4 // start of the L4 (or ICMP) header
	rQ   = asm.R5 // cursor into the packet quoted by an ICMP error
)

// Values of rKind. A packet that is not a NAT-reply candidate keeps
// kindNone; only VIP destinations can steer it.
const (
	kindNone  = 0 // not TCP/UDP, no ports, or not parsed: never a NAT reply
	kindPorts = 1 // the reply key holds a real port: try it, then port 0
	kindHost  = 2 // a fragment: look up (address, protocol) in the reply hosts
)

// Label names shared by every block.
const (
	lblPass     = "pass"
	lblRedirect = "redirect"
	lblClassify = "classify"
	lblIPv4     = "ipv4"
	lblIPv6     = "ipv6"
	lblICMP4    = "icmp4"
	lblICMP6    = "icmp6"
)

// be16 and be32 return what a native-endian load of the network-order
// bytes of v yields. The program compares loaded header fields against
// these instead of byte-swapping every load; the program is built on the
// host that runs it, so the native order is the kernel's.
func be16(v uint16) int32 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return int32(binary.NativeEndian.Uint16(b[:]))
}

func be32(v uint32) int32 {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return int32(binary.NativeEndian.Uint32(b[:]))
}

// builder accumulates instructions; a label names the next instruction
// emitted.
type builder struct {
	insns   asm.Instructions
	pending string
	// source is the builder method that placed the pending label, and
	// lastSource the one named last: the first instruction of a block
	// placed by another method than the previous block carries it as a
	// source comment (asm.Comment), which the golden listings under
	// testdata/ show. Loading ignores it.
	source, lastSource string
	// clock is the helper the fast path reads the time with
	// (fastClock).
	clock asm.BuiltinFunc
}

func (b *builder) label(name string) {
	if b.pending != "" {
		panic(fmt.Sprintf("xdpprog: labels %q and %q on one instruction", b.pending, name))
	}
	b.pending = name
	b.source = callerName(2)
}

func (b *builder) emit(insns ...asm.Instruction) {
	for _, ins := range insns {
		if b.pending != "" {
			ins = ins.WithSymbol(b.pending)
			if b.source != b.lastSource {
				ins = ins.WithSource(asm.Comment(b.source))
				b.lastSource = b.source
			}
			b.pending = ""
		}
		b.insns = append(b.insns, ins)
	}
}

// callerName names the function skip frames up the stack as Go prints
// it, without the package path: "(*builder).ipv4".
func callerName(skip int) string {
	pc, _, _, ok := runtime.Caller(skip)
	if !ok {
		return "?"
	}
	name := runtime.FuncForPC(pc).Name()
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	if i := strings.IndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	return name
}

// need jumps to fail unless n bytes starting at ptr lie before data_end.
// On the fall-through path the verifier knows [ptr, ptr+n) is readable,
// for ptr and every pointer derived from ptr by a constant.
func (b *builder) need(ptr asm.Register, n int32, fail string) {
	b.emit(
		asm.Mov.Reg(rChk, ptr),
		asm.Add.Imm(rChk, n),
		asm.JGT.Reg(rChk, rEnd, fail),
	)
}

// mapped4Key writes the IPv4 address at ptr+off into the 16-byte key at
// stack offset key as ::ffff:a.b.c.d.
func (b *builder) mapped4Key(key int16, ptr asm.Register, off int16) {
	b.emit(
		asm.StoreImm(asm.RFP, key, 0, asm.Word), // asm has no 64-bit immediate store
		asm.StoreImm(asm.RFP, key+4, 0, asm.Word),
		asm.StoreImm(asm.RFP, key+8, int64(be32(0x0000ffff)), asm.Word),
		asm.LoadMem(rT1, ptr, off, asm.Word),
		asm.StoreMem(asm.RFP, key+12, rT1, asm.Word),
	)
}

// copy16Key copies the IPv6 address at ptr+off into the key at stack
// offset key. Word loads: packet fields are only 2-byte aligned.
func (b *builder) copy16Key(key int16, ptr asm.Register, off int16) {
	for i := int16(0); i < 16; i += 4 {
		b.emit(
			asm.LoadMem(rT1, ptr, off+i, asm.Word),
			asm.StoreMem(asm.RFP, key+i, rT1, asm.Word),
		)
	}
}

// rejectMapped jumps to fail if the IPv6 address at ptr+off is
// IPv4-mapped (::ffff:0:0/96). Such addresses must not appear on the wire
// (RFC 4291 §2.5.5.2); refusing them keeps an IPv6 packet from matching
// the key of an IPv4 address.
func (b *builder) rejectMapped(name string, ptr asm.Register, off int16, fail string) {
	ok := name + "_unmapped"
	b.emit(
		asm.LoadMem(rT1, ptr, off, asm.Word),
		asm.JNE.Imm(rT1, 0, ok),
		asm.LoadMem(rT1, ptr, off+4, asm.Word),
		asm.JNE.Imm(rT1, 0, ok),
		asm.LoadMem(rT1, ptr, off+8, asm.Word),
		asm.JEq.Imm32(rT1, be32(0x0000ffff), fail),
	)
	b.label(ok)
}

// replyTail writes the protocol in rT2 and a zero pad and port into the
// reply key.
func (b *builder) replyTail() {
	b.emit(
		asm.StoreMem(asm.RFP, stackReplyProto, rT2, asm.Byte),
		asm.StoreImm(asm.RFP, stackReplyPad, 0, asm.Byte),
		asm.StoreImm(asm.RFP, stackReplyPort, 0, asm.Half),
	)
}

// fragment classifies a fragment whose protocol is in rT2: TCP and UDP
// fragments are matched on (source address, protocol) alone, every
// fragment of a datagram alike, since only the first carries ports.
func (b *builder) fragment(name string) {
	host := name + "_host"
	b.emit(
		asm.JEq.Imm(rT2, protoTCP, host),
		asm.JNE.Imm(rT2, protoUDP, lblClassify),
	)
	b.label(host)
	b.emit(
		asm.Mov.Imm(rKind, kindHost),
		asm.Ja.Label(lblClassify),
	)
}

// ports copies the source port of a TCP or UDP header at rL4 (protocol in
// rT2) into the reply key and marks the packet kindPorts. Other protocols,
// and headers too short to hold the ports, stay kindNone.
func (b *builder) ports(name string) {
	tcpUDP := name + "_tcpudp"
	b.emit(
		asm.JEq.Imm(rT2, protoTCP, tcpUDP),
		asm.JNE.Imm(rT2, protoUDP, lblClassify),
	)
	b.label(tcpUDP)
	b.need(rL4, 4, lblClassify)
	b.emit(
		asm.LoadMem(rT1, rL4, 0, asm.Half), // source port
		asm.StoreMem(asm.RFP, stackReplyPort, rT1, asm.Half),
		asm.Mov.Imm(rKind, kindPorts),
		asm.Ja.Label(lblClassify),
	)
}

// ethernet parses the Ethernet header and at most one 802.1Q tag, leaves
// rPkt at the L3 header and dispatches on the EtherType; anything but IPv4
// and IPv6 (ARP, LLDP, a second tag) passes.
func (b *builder) ethernet() {
	b.emit(
		asm.LoadMem(rPkt, rCtx, mdData, asm.Word),
		asm.LoadMem(rEnd, rCtx, mdDataEnd, asm.Word),
	)
	b.need(rPkt, ethHdrLen, lblPass)
	b.emit(
		asm.LoadMem(rT2, rPkt, 12, asm.Half), // EtherType
		asm.Add.Imm(rPkt, ethHdrLen),
		asm.JNE.Imm(rT2, be16(etherType8021Q), "l3"),
	)
	b.need(rPkt, vlanTagLen, lblPass)
	b.emit(
		asm.LoadMem(rT2, rPkt, 2, asm.Half), // EtherType after the tag
		asm.Add.Imm(rPkt, vlanTagLen),
	)
	b.label("l3")
	b.emit(
		asm.JEq.Imm(rT2, be16(etherTypeIPv4), lblIPv4),
		asm.JEq.Imm(rT2, be16(etherTypeIPv6), lblIPv6),
		asm.Ja.Label(lblPass),
	)
}

// ipv4 parses an IPv4 header at rPkt. Both keys are complete before any
// jump to classify; the verifier checks that on every path.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Version|  IHL  |Type of Service|          Total Length         |
//	|         Identification        |Flags|      Fragment Offset    |
//	|  Time to Live |    Protocol   |         Header Checksum       |
//	|                       Source Address                          |
//	|                    Destination Address                        |
func (b *builder) ipv4() {
	b.label(lblIPv4)
	b.need(rPkt, ipv4MinLen, lblPass)
	b.emit(
		asm.LoadMem(rT3, rPkt, 0, asm.Byte),
		asm.Mov.Reg(rT1, rT3),
		asm.RSh.Imm(rT1, 4),
		asm.JNE.Imm(rT1, 4, lblPass), // version
		asm.And.Imm(rT3, 0x0f),
		asm.JLT.Imm(rT3, 5, lblPass),
		asm.LSh.Imm(rT3, 2), // rT3 = header length in bytes, 20..60
	)
	b.mapped4Key(stackDstKey, rPkt, 16)
	b.mapped4Key(stackReplyKey, rPkt, 12)
	b.emit(asm.LoadMem(rT2, rPkt, 9, asm.Byte)) // protocol
	b.replyTail()
	// A nonzero offset: a later fragment, matched on (source, protocol).
	// MF with offset 0: a first fragment, matched on its ports like a
	// whole packet, except that a fragmented ICMP error is never relayed.
	b.emit(
		asm.Mov.Reg(rL4, rPkt),
		asm.Add.Reg(rL4, rT3), // rL4 = rPkt + 20..60: its own bounds check follows before any read
		asm.LoadMem(rT1, rPkt, 6, asm.Half),
		asm.And.Imm(rT1, be16(0x1fff)),
		asm.JEq.Imm(rT1, 0, "ipv4_first"),
	)
	b.fragment("ipv4")
	b.label("ipv4_first")
	b.emit(
		asm.JNE.Imm(rT2, protoICMP, "ipv4_ports"),
		asm.LoadMem(rT1, rPkt, 6, asm.Half),
		asm.And.Imm(rT1, be16(0x2000)), // MF
		asm.JEq.Imm(rT1, 0, lblICMP4),
		asm.Ja.Label(lblClassify),
	)
	b.label("ipv4_ports")
	b.ports("ipv4")
}

// icmp4 steers an ICMPv4 error (destination unreachable, time exceeded,
// parameter problem) about a TCP or UDP packet that was sent to a NAT
// backend: the key is the quoted destination, protocol and destination
// port, i.e. the backend as the source of its replies. Such errors come
// from the backend or a router in front of it and are addressed to the
// client.
func (b *builder) icmp4() {
	b.label(lblICMP4)
	b.need(rL4, icmpHdrLen+ipv4MinLen, lblClassify)
	b.emit(asm.LoadMem(rT1, rL4, 0, asm.Byte)) // type
	for _, t := range packet.ICMPv4FlowErrors {
		b.emit(asm.JEq.Imm(rT1, int32(t), "icmp4_error"))
	}
	b.emit(asm.Ja.Label(lblClassify))
	b.label("icmp4_error")
	b.emit(
		asm.Mov.Reg(rQ, rL4),
		asm.Add.Imm(rQ, icmpHdrLen), // rQ = quoted IPv4 header, 20 bytes readable
		asm.LoadMem(rT3, rQ, 0, asm.Byte),
		asm.Mov.Reg(rT1, rT3),
		asm.RSh.Imm(rT1, 4),
		asm.JNE.Imm(rT1, 4, lblClassify),
		asm.And.Imm(rT3, 0x0f),
		asm.JLT.Imm(rT3, 5, lblClassify),
		asm.LSh.Imm(rT3, 2), // quoted header length, 20..60
		// A quoted non-first fragment has no ports.
		asm.LoadMem(rT1, rQ, 6, asm.Half),
		asm.And.Imm(rT1, be16(0x1fff)),
		asm.JNE.Imm(rT1, 0, lblClassify),
		asm.LoadMem(rT2, rQ, 9, asm.Byte), // quoted protocol
		asm.JEq.Imm(rT2, protoTCP, "icmp4_tcpudp"),
		asm.JNE.Imm(rT2, protoUDP, lblClassify),
	)
	b.label("icmp4_tcpudp")
	b.mapped4Key(stackReplyKey, rQ, 16) // quoted destination: the backend
	b.emit(
		asm.StoreMem(asm.RFP, stackReplyProto, rT2, asm.Byte),
		asm.Add.Reg(rQ, rT3), // quoted L4 header
	)
	b.need(rQ, 4, lblClassify)
	b.emit(
		asm.LoadMem(rT1, rQ, 2, asm.Half), // quoted destination port: the backend's
		asm.StoreMem(asm.RFP, stackReplyPort, rT1, asm.Half),
		asm.Mov.Imm(rKind, kindPorts),
		asm.Ja.Label(lblClassify),
	)
}

// ipv6 parses the fixed IPv6 header at rPkt and, when it follows directly,
// a Fragment header. Other extension headers are not walked: such a packet
// has no ports here and can only be steered as a VIP destination.
//
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Version| Traffic Class |           Flow Label                  |
//	|         Payload Length        |  Next Header  |   Hop Limit   |
//	|                Source Address (16 bytes, offset 8)            |
//	|             Destination Address (16 bytes, offset 24)         |
func (b *builder) ipv6() {
	b.label(lblIPv6)
	b.need(rPkt, ipv6HdrLen, lblPass)
	b.emit(
		asm.LoadMem(rT1, rPkt, 0, asm.Byte),
		asm.RSh.Imm(rT1, 4),
		asm.JNE.Imm(rT1, 6, lblPass),
	)
	b.rejectMapped("ipv6_dst", rPkt, 24, lblPass)
	b.rejectMapped("ipv6_src", rPkt, 8, lblPass)
	b.copy16Key(stackDstKey, rPkt, 24)
	b.copy16Key(stackReplyKey, rPkt, 8)
	b.emit(asm.LoadMem(rT2, rPkt, 6, asm.Byte)) // next header
	b.replyTail()
	b.emit(
		asm.Mov.Reg(rL4, rPkt),
		asm.Add.Imm(rL4, ipv6HdrLen),
		asm.JEq.Imm(rT2, protoFrag6, "ipv6_frag"),
		asm.JEq.Imm(rT2, protoICMPv6, lblICMP6),
	)
	b.ports("ipv6")

	// Fragment header: next header, reserved, offset(13) res(2) M(1), id.
	b.label("ipv6_frag")
	b.need(rL4, ipv6FragLen, lblClassify)
	b.emit(
		asm.LoadMem(rT2, rL4, 0, asm.Byte), // protocol of the fragmented payload
		asm.StoreMem(asm.RFP, stackReplyProto, rT2, asm.Byte),
		asm.LoadMem(rT1, rL4, 2, asm.Half),
		asm.And.Imm(rT1, be16(0xfff8)),
		asm.JEq.Imm(rT1, 0, "ipv6_atomic"),
	)
	b.fragment("ipv6")
	// Offset 0: a first fragment, or an atomic one (M clear, a whole
	// packet: RFC 6946); either is matched on the ports that follow the
	// Fragment header, like a whole packet.
	b.label("ipv6_atomic")
	b.emit(asm.Add.Imm(rL4, ipv6FragLen))
	b.ports("ipv6_atomic")
}

// icmp6 is icmp4 for ICMPv6 errors (types 1–4: destination unreachable,
// packet too big, time exceeded, parameter problem) quoting an IPv6 packet
// whose next header is TCP or UDP.
//
// Neighbour discovery (types 133–137) passes before any lookup, even to a
// VIP: vipd's NDP responder (package arp) reads it from an AF_PACKET
// socket, which sees only what XDP passes, and unicast solicitations for a
// VIP (neighbour unreachability detection) must reach it.
func (b *builder) icmp6() {
	b.label(lblICMP6)
	b.need(rL4, 1, lblClassify)
	b.emit(
		asm.LoadMem(rT1, rL4, 0, asm.Byte), // type
		asm.JLT.Imm(rT1, icmp6NDPFirst, "icmp6_not_ndp"),
		asm.JLE.Imm(rT1, icmp6NDPLast, lblPass),
	)
	b.label("icmp6_not_ndp")
	b.need(rL4, icmpHdrLen+ipv6HdrLen, lblClassify)
	b.emit(
		asm.JLT.Imm(rT1, icmp6ErrFirst, lblClassify),
		asm.JGT.Imm(rT1, icmp6ErrLast, lblClassify),
		asm.Mov.Reg(rQ, rL4),
		asm.Add.Imm(rQ, icmpHdrLen), // rQ = quoted IPv6 header, 40 bytes readable
		asm.LoadMem(rT2, rQ, 6, asm.Byte),
		asm.JEq.Imm(rT2, protoTCP, "icmp6_tcpudp"),
		asm.JNE.Imm(rT2, protoUDP, lblClassify),
	)
	b.label("icmp6_tcpudp")
	b.rejectMapped("icmp6_dst", rQ, 24, lblClassify)
	b.copy16Key(stackReplyKey, rQ, 24) // quoted destination: the backend
	b.emit(
		asm.StoreMem(asm.RFP, stackReplyProto, rT2, asm.Byte),
		asm.Add.Imm(rQ, ipv6HdrLen), // quoted L4 header
	)
	b.need(rQ, 4, lblClassify)
	b.emit(
		asm.LoadMem(rT1, rQ, 2, asm.Half), // quoted destination port
		asm.StoreMem(asm.RFP, stackReplyPort, rT1, asm.Half),
		asm.Mov.Imm(rKind, kindPorts),
		asm.Ja.Label(lblClassify),
	)
}

// lookup emits map_lookup_elem(m, fp+key); R0 is then the value pointer or
// 0. R1–R5 are clobbered.
func (b *builder) lookup(m string, key int16) {
	b.emit(
		asm.LoadMapPtr(asm.R1, 0).WithReference(m),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, int32(key)),
		asm.FnMapLookupElem.Call(),
	)
}

// classify runs the lookups on the keys the parsers left on the stack
// and ends the program.
func (b *builder) classify() {
	b.label(lblClassify)
	b.lookup(mapVIPs, stackDstKey)
	b.emit(
		asm.JNE.Imm(asm.R0, 0, lblRedirect),
		asm.JEq.Imm(rKind, kindNone, lblPass),
	)
	// A reply is steered only on its way to someone else: replies to the
	// box itself (health checks) belong to the kernel.
	b.lookup(mapLocal, stackDstKey)
	b.emit(
		asm.JNE.Imm(asm.R0, 0, lblPass),
		asm.JEq.Imm(rKind, kindHost, "by_host"),
	)
	b.lookup(mapReplies, stackReplyKey)
	b.emit(
		asm.JNE.Imm(asm.R0, 0, lblRedirect),
		asm.LoadMem(asm.R1, asm.RFP, stackReplyPort, asm.Half),
		asm.JEq.Imm(asm.R1, 0, lblPass), // port 0 was the key just tried
		asm.StoreImm(asm.RFP, stackReplyPort, 0, asm.Half),
	)
	b.lookup(mapReplies, stackReplyKey)
	b.emit(
		asm.JNE.Imm(asm.R0, 0, lblRedirect),
		asm.Ja.Label(lblPass),
	)
	b.label("by_host")
	b.lookup(mapReplyHosts, stackReplyKey)
	b.emit(asm.JNE.Imm(asm.R0, 0, lblRedirect))

	b.label(lblPass)
	b.emit(
		asm.Mov.Imm(asm.R0, xdpPass),
		asm.Return(),
	)

	// bpf_redirect_map(xsks, rx_queue_index, XDP_PASS): the low bits of the
	// flags are the verdict when the queue has no socket (kernel 5.9+), so
	// a queue without a socket hands its packets to the kernel instead of
	// dropping them.
	b.label(lblRedirect)
	b.emit(
		asm.LoadMapPtr(asm.R1, 0).WithReference(mapXSKs),
		asm.LoadMem(asm.R2, rCtx, mdRxQueueIndex, asm.Word),
		asm.Mov.Imm(asm.R3, xdpPass),
		asm.FnRedirectMap.Call(),
		asm.Return(),
	)
}

// instructions returns the steering program, with the fast path in front
// of it when fast is set (and its IPv6 block with fast6), reading the time
// with clock (fastClock).
func instructions(fast, fast6 bool, clock asm.BuiltinFunc) asm.Instructions {
	b := builder{clock: clock}
	b.emit(asm.Mov.Reg(rCtx, asm.R1).WithSymbol(progName))
	if fast {
		notIPv4 := lblSteer
		if fast6 {
			notIPv4 = "fast6_tcp"
		}
		b.fast("fast_tcp", protoTCP, "fast_udp", notIPv4)
		b.fast("fast_udp", protoUDP, lblSteer, lblSteer)
		if fast6 {
			b.fast6("fast6_tcp", protoTCP, "fast6_udp")
			b.fast6("fast6_udp", protoUDP, lblSteer)
		}
	}
	b.label(lblSteer)
	b.emit(asm.Mov.Imm(rKind, kindNone))
	b.ethernet()
	b.ipv4()
	b.icmp4()
	b.ipv6()
	b.icmp6()
	b.classify()
	if fast {
		b.fastRedirect()
	}
	return b.insns
}
