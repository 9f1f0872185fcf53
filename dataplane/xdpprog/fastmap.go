package xdpprog

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/cilium/ebpf"
)

// The fast path: the XDP program forwards frames of established flows
// itself, with the translation (NAT) or encapsulation (DSR, IPIP) the
// pipeline chose for the flow, instead of handing them to vipd's AF_XDP
// socket. See "The fast path" in doc.go.

// Map names of the fast path.
const (
	mapFast     = "vipd_fast4"
	mapFast6    = "vipd_fast6"
	mapFastGen  = "vipd_fastgen"
	mapFastStat = "vipd_faststat"
	mapFastRef  = "vipd_fastref"
)

// xdpTX sends the frame back out of the interface it came in on.
const xdpTX = 3

// FastKey4 is an IPv4 flow as it arrives from the client: the key of the
// fast path's flow map. Proto is 6 (TCP) or 17 (UDP).
type FastKey4 struct {
	Src, Dst         [4]byte
	SrcPort, DstPort uint16
	Proto            uint8
}

// FastEntry4 is what the program does to a frame of a FastKey4 flow: the
// destination translation nat.DNAT4Sum makes, or (SNAT) the source
// translation nat.SNAT4 makes, with the sums it adds to the checksums
// computed ahead, or (Encap) the IPIP encapsulation dsr.Encap4 makes;
// and the Ethernet addresses of the next hop. Encap and SNAT exclude each
// other (with both, Encap is done).
type FastEntry4 struct {
	// Gen is the generation the entry was computed under; the program
	// uses it only while the generation set by Fast.SetGeneration equals
	// it, so that one store retires every entry at once.
	Gen uint32
	// Expires is the CLOCK_MONOTONIC time from which the program no
	// longer uses the entry and hands the flow's frames to vipd again,
	// which sees the flow alive and renews the entry. The program may
	// read the clock up to Fast.ClockSlack late (fastClock): an entry
	// that must not serve past a time T expires at T - ClockSlack.
	Expires uint64
	// Addr and Port are the new destination; Port 0 keeps the port.
	Addr [4]byte
	Port uint16
	// IPSum and L4Sum are what the rewrite adds to the IPv4 header
	// checksum and to the TCP or UDP checksum: unfolded ones' complement
	// sums in network order, as nat.DNAT4Sum adds them (the address change,
	// the TTL decrement for IPSum, the port change for L4Sum).
	IPSum, L4Sum uint32
	// MACs are the new destination and source Ethernet addresses.
	MACs [12]byte
	// MaxLen is the largest IPv4 total length the program forwards (the
	// egress MTU); a longer packet goes to vipd, which knows what to do.
	MaxLen uint16
	// Ifindex is the egress interface; 0 sends the frame back out of the
	// one it arrived on (XDP_TX), any other index through bpf_redirect.
	Ifindex uint32
	// In is the interface the flow's frames arrive on: the program
	// forwards a frame only when it came in there (0: on any interface),
	// so that an entry written for one interface's program is not taken
	// by another's sharing the map (Options.ShareFast).
	In uint32
	// Ref is the counting slot: the program counts the flow's frames in
	// slot Ref of its counters (Fast.Forwarded), when Ref < MaxFastRefs.
	Ref uint32
	// SNAT translates the source address and port instead of the
	// destination's, as nat.SNAT4 does (a NAT backend's reply, made to
	// come from the VIP): Addr and Port are the new source, and IPSum
	// and L4Sum what that change adds.
	SNAT bool
	// Encap wraps the frame's packet untouched in an outer IPv4 header
	// from EncapSrc to Addr (protocol 4, DF, TTL dsr.OuterTTL, the
	// inner TOS) instead of translating it; Port, IPSum and L4Sum are then
	// unused, and MaxLen is the longest inner packet (the egress MTU
	// less the outer header). OuterSum is dsr.Outer4Sum of the outer
	// header.
	Encap    bool
	EncapSrc [4]byte
	OuterSum uint32
	// GUE (with Encap) puts a UDP header from GUESrcPort to GUEDstPort,
	// without a checksum, between the outer header (protocol UDP) and
	// the packet, as dsr.GUE4 does; MaxLen is then the egress MTU less
	// both headers, and OuterSum dsr.Outer4Sum for protocol UDP.
	GUE                    bool
	GUESrcPort, GUEDstPort uint16
}

// FastKey6 is FastKey4 for IPv6: the key of the fast path's IPv6 flow
// map.
type FastKey6 struct {
	Src, Dst         [16]byte
	SrcPort, DstPort uint16
	Proto            uint8
}

// FastEntry6 is FastEntry4 for an IPv6 flow: of a NAT VIP, the
// destination translation nat.DNAT6 makes, or (SNAT) the source
// translation nat.SNAT6 makes, the hop limit decremented; or (Encap) of
// a DSR VIP, the IPv6-in-IPv6 encapsulation dsr.Encap6 makes; and the
// next hop's Ethernet addresses. IPv6 has no header checksum: L4Sum
// (nat.Sums6) is all a translation adds.
type FastEntry6 struct {
	Gen     uint32
	Expires uint64
	// Addr is the new destination (the backend; with SNAT the new
	// source, the VIP); Port as in FastEntry4.
	Addr  [16]byte
	Port  uint16
	L4Sum uint32
	MACs  [12]byte
	// MaxLen is the largest IPv6 packet (40 + payload length) the
	// program forwards: the egress MTU, less the outer header with
	// Encap.
	MaxLen      uint16
	Ifindex, In uint32
	Ref         uint32
	SNAT        bool
	// Encap wraps the packet untouched in an outer IPv6 header from
	// EncapSrc to Addr (next header 41, hop limit dsr.OuterTTL, the
	// inner traffic class, flow label FlowLabel's low 20 bits), as
	// dsr.Encap6 does; Port, L4Sum and SNAT are then unused.
	Encap     bool
	EncapSrc  [16]byte
	FlowLabel uint32
}

// Layout of a fast map value (fastValueSize bytes). The program reads
// fields by these offsets; Go writes them in marshal. Fields the program
// compares or adds in native order are native; the ones it copies into
// the frame, or adds to checksums loaded from it, are in network order
// (a ones' complement sum of byte-swapped words is the byte-swapped sum,
// so native loads of both sides give the byte-swapped checksum, stored
// back as it was loaded).
const (
	fvGen     = 0  // u32, native
	fvAddr    = 4  // [4]byte, network
	fvExpires = 8  // u64, native
	fvMACs    = 16 // [12]byte
	fvPort    = 28 // u16, network; 0 keeps the port
	fvIPSum   = 30 // u16, network: the folded IPSum
	fvL4Sum   = 32 // u16, network: the folded L4Sum
	fvMaxLen  = 34 // u16, native
	fvIfindex = 36 // u32, native
	fvRef     = 40 // u32, native: the backend's reference, its slot in vipd_fastref
	fvSrc     = 44 // [4]byte, network: the outer source (Encap)
	fvMode    = 48 // u8: modeDNAT, modeIPIP, modeSNAT or modeGUE
	fvOutSum  = 50 // u16, native: OuterSum, folded (Encap)
	fvIn      = 52 // u32, native: In

	// GUE's UDP ports (network order) take the translation's slots,
	// which an encapsulation does not use.
	fvGUEDstPort = fvPort
	fvGUESrcPort = fvIPSum

	fastValueSize = 56

	// An IPv6 entry's value is an IPv4 one (fvIPSum, fvSrc and fvOutSum
	// unused; fvAddr holds the flow label) followed by the 16-byte
	// address and the outer source.
	fvLabel6       = fvAddr        // u32, native: FlowLabel&0xfffff (Encap)
	fvAddr6        = fastValueSize // [16]byte, network
	fvSrc6         = fvAddr6 + 16  // [16]byte, network: the outer source (Encap)
	fastValueSize6 = fvSrc6 + 16
)

// Values of fvMode.
const (
	modeDNAT = 0
	modeIPIP = 1
	modeSNAT = 2
	modeGUE  = 3
)

// The frame offset of an encapsulated frame's outer IPv4 header, after
// Ethernet; the inner packet follows it (IPIP) or the UDP header after it
// (GUE).
const (
	eOuter = ethHdrLen
	udpHdr = 8 // a UDP header's size
)

// MaxFastRefs is the number of counting slots of the fast path
// (vipd_fastref): an entry whose Ref is larger is forwarded and counted
// in the totals only, so vipd hands down no such flow. vipd counts a
// backend's flows in the slot of its reference (below 1<<18) and its NAT
// replies in the slot 1<<18 above it; package dataplane's MaxFastRef and
// FastSlots, held equal by a daemon test.
const MaxFastRefs = 2 << 18

// fastRefSize is the size of a vipd_fastref slot: frames, then bytes.
const fastRefSize = 16

// Layout of the fast path's counters (vipd_faststat, one value per CPU).
const (
	fsPackets = 0 // u64: frames the fast path forwarded
	fsBytes   = 8 // u64: their IPv4 total lengths

	fastStatSize = 16
)

// fastKey is the binary key: source, destination, source port,
// destination port (all as on the wire), protocol, three zero bytes.
type fastKey [16]byte

type fastValue [fastValueSize]byte

// fastKey6 is the IPv6 binary key: source, destination, ports, protocol,
// three zero bytes.
type fastKey6 [40]byte

type fastValue6 [fastValueSize6]byte

func (k FastKey6) marshal() fastKey6 {
	var b fastKey6
	copy(b[0:16], k.Src[:])
	copy(b[16:32], k.Dst[:])
	binary.BigEndian.PutUint16(b[32:], k.SrcPort)
	binary.BigEndian.PutUint16(b[34:], k.DstPort)
	b[36] = k.Proto
	return b
}

func (v *FastEntry6) marshal() fastValue6 {
	var b fastValue6
	binary.NativeEndian.PutUint32(b[fvGen:], v.Gen)
	binary.NativeEndian.PutUint64(b[fvExpires:], v.Expires)
	copy(b[fvMACs:fvMACs+12], v.MACs[:])
	binary.BigEndian.PutUint16(b[fvPort:], v.Port)
	binary.BigEndian.PutUint16(b[fvL4Sum:], fold(v.L4Sum))
	binary.NativeEndian.PutUint16(b[fvMaxLen:], v.MaxLen)
	binary.NativeEndian.PutUint32(b[fvIfindex:], v.Ifindex)
	binary.NativeEndian.PutUint32(b[fvRef:], v.Ref)
	binary.NativeEndian.PutUint32(b[fvIn:], v.In)
	switch {
	case v.Encap:
		b[fvMode] = modeIPIP
		binary.NativeEndian.PutUint32(b[fvLabel6:], v.FlowLabel&0xfffff)
		copy(b[fvSrc6:], v.EncapSrc[:])
	case v.SNAT:
		b[fvMode] = modeSNAT
	}
	copy(b[fvAddr6:], v.Addr[:])
	return b
}

func (k FastKey4) marshal() fastKey {
	var b fastKey
	copy(b[0:4], k.Src[:])
	copy(b[4:8], k.Dst[:])
	binary.BigEndian.PutUint16(b[8:], k.SrcPort)
	binary.BigEndian.PutUint16(b[10:], k.DstPort)
	b[12] = k.Proto
	return b
}

// fold is the ones' complement sum x folded to 16 bits, 0 only for x = 0:
// adding it to a checksum equals adding x (see packet.ChecksumAdd).
func fold(x uint32) uint16 {
	for x > 0xffff {
		x = x>>16 + x&0xffff
	}
	return uint16(x)
}

func (v *FastEntry4) marshal() fastValue {
	var b fastValue
	binary.NativeEndian.PutUint32(b[fvGen:], v.Gen)
	copy(b[fvAddr:fvAddr+4], v.Addr[:])
	binary.NativeEndian.PutUint64(b[fvExpires:], v.Expires)
	copy(b[fvMACs:fvMACs+12], v.MACs[:])
	binary.BigEndian.PutUint16(b[fvPort:], v.Port)
	binary.BigEndian.PutUint16(b[fvIPSum:], fold(v.IPSum))
	binary.BigEndian.PutUint16(b[fvL4Sum:], fold(v.L4Sum))
	binary.NativeEndian.PutUint16(b[fvMaxLen:], v.MaxLen)
	binary.NativeEndian.PutUint32(b[fvIfindex:], v.Ifindex)
	binary.NativeEndian.PutUint32(b[fvRef:], v.Ref)
	binary.NativeEndian.PutUint32(b[fvIn:], v.In)
	switch {
	case v.Encap:
		b[fvMode] = modeIPIP
		copy(b[fvSrc:fvSrc+4], v.EncapSrc[:])
		binary.NativeEndian.PutUint16(b[fvOutSum:], fold(v.OuterSum))
		if v.GUE {
			b[fvMode] = modeGUE
			binary.BigEndian.PutUint16(b[fvGUEDstPort:], v.GUEDstPort)
			binary.BigEndian.PutUint16(b[fvGUESrcPort:], v.GUESrcPort)
		}
	case v.SNAT:
		b[fvMode] = modeSNAT
	}
	return b
}

// FastStats are the fast path's counters since Load: frames it forwarded
// and their bytes (IPv4 total lengths, as vipd counts a backend's bytes).
type FastStats struct {
	Packets, Bytes uint64
}

// Fast is the fast path's flow map. Its methods may be called from several
// goroutines; each Writer is for one.
type Fast struct {
	flows, flows6, gen, stat, ref *ebpf.Map
	slack                         time.Duration // ClockSlack
	// refs is vipd_fastref, mapped into this process: reading a slot is a
	// copy, not a system call.
	refs *ebpf.Memory
}

// Forwarded returns what the fast path forwarded for backend reference
// ref since Load: frames, and their IPv4 total lengths. ok is false for a
// reference it does not count (ref >= MaxFastRefs). Safe from any
// goroutine; the program adds to the slot while it is read, so the two
// numbers may be a frame apart.
func (f *Fast) Forwarded(ref uint32) (packets, bytes uint64, ok bool) {
	if ref >= MaxFastRefs {
		return 0, 0, false
	}
	var b [fastRefSize]byte
	if _, err := f.refs.ReadAt(b[:], int64(ref)*fastRefSize); err != nil {
		return 0, 0, false
	}
	return binary.NativeEndian.Uint64(b[0:]), binary.NativeEndian.Uint64(b[8:]), true
}

// CoarseClockSlack bounds how far behind CLOCK_MONOTONIC the coarse clock
// the fast path may read is: one timer tick, 10 ms at the lowest HZ
// (100), doubled for margin.
const CoarseClockSlack = 20 * time.Millisecond

// IPv6 reports whether the fast path takes IPv6 flows (Options.FastFlows6).
func (f *Fast) IPv6() bool { return f.flows6 != nil }

// flows6Size is the IPv6 map's size, 0 for none.
func (f *Fast) flows6Size() int {
	if f.flows6 == nil {
		return 0
	}
	return int(f.flows6.MaxEntries())
}

// ClockSlack is how late the program may read the time: CoarseClockSlack
// with the coarse clock, else 0. An entry that must not serve past T gets
// Expires T - ClockSlack.
func (f *Fast) ClockSlack() time.Duration { return f.slack }

// Fast returns the program's fast path, or nil if it was loaded without
// one (Options.FastFlows 0).
func (p *Program) Fast() *Fast { return p.fast }

// SetGeneration makes gen the generation whose entries the program uses:
// every entry computed under another one is ignored from now on.
func (f *Fast) SetGeneration(gen uint32) error {
	if err := f.gen.Put(uint32(0), gen); err != nil {
		return fmt.Errorf("xdpprog: set fast generation: %w", err)
	}
	return nil
}

// Stats sums the fast path's per-CPU counters.
func (f *Fast) Stats() (FastStats, error) {
	var per [][fastStatSize]byte
	if err := f.stat.Lookup(uint32(0), &per); err != nil {
		return FastStats{}, fmt.Errorf("xdpprog: read fast path counters: %w", err)
	}
	var st FastStats
	for _, c := range per {
		st.Packets += binary.NativeEndian.Uint64(c[fsPackets:])
		st.Bytes += binary.NativeEndian.Uint64(c[fsBytes:])
	}
	return st, nil
}

// Writer puts entries into the flow map in batches, from buffers it keeps,
// so that a worker can hand over its flows without allocating.
type Writer struct {
	f     *Fast
	keys  []fastKey
	vals  []fastValue
	keys6 []fastKey6
	vals6 []fastValue6
}

// NewWriter returns a Writer that holds up to n entries of each family
// between Flushes (no IPv6 ones without IPv6 in the fast path).
func (f *Fast) NewWriter(n int) *Writer {
	w := &Writer{f: f, keys: make([]fastKey, 0, n), vals: make([]fastValue, 0, n)}
	if f.IPv6() {
		w.keys6, w.vals6 = make([]fastKey6, 0, n), make([]fastValue6, 0, n)
	}
	return w
}

// Add queues an entry; it reports false, queuing nothing, when n are
// already queued.
func (w *Writer) Add(k FastKey4, v *FastEntry4) bool {
	if len(w.keys) == cap(w.keys) {
		return false
	}
	w.keys = append(w.keys, k.marshal())
	w.vals = append(w.vals, v.marshal())
	return true
}

// Add6 is Add for an IPv6 flow; false, always, without IPv6 in the fast
// path.
func (w *Writer) Add6(k FastKey6, v *FastEntry6) bool {
	if len(w.keys6) == cap(w.keys6) {
		return false
	}
	w.keys6 = append(w.keys6, k.marshal())
	w.vals6 = append(w.vals6, v.marshal())
	return true
}

// Flush writes the queued entries with one system call per family and
// empties the queue, whether or not the kernel took them all. An entry
// replaces the flow's previous one.
func (w *Writer) Flush() error {
	var err, err6 error
	if n := len(w.keys); n > 0 {
		if _, err = w.f.flows.BatchUpdate(w.keys, w.vals, nil); err != nil {
			err = fmt.Errorf("xdpprog: put %d fast flows: %w", n, err)
		}
		w.keys, w.vals = w.keys[:0], w.vals[:0]
	}
	if n := len(w.keys6); n > 0 {
		if _, err6 = w.f.flows6.BatchUpdate(w.keys6, w.vals6, nil); err6 != nil {
			err6 = fmt.Errorf("xdpprog: put %d IPv6 fast flows: %w", n, err6)
		}
		w.keys6, w.vals6 = w.keys6[:0], w.vals6[:0]
	}
	if err == nil {
		return err6
	}
	return err
}
