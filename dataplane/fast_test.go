package dataplane

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/gopacket/layers"
	"github.com/vipd/vipd/packet"
)

// recordingFast is a FastPath that keeps what it is offered.
type recordingFast struct {
	flows   []FastFlow
	limit   int // Offer refuses beyond this many queued flows when > 0
	flushes int
	err     error
	// forwarded[slot] is what Forwarded reports: packets, bytes.
	forwarded map[uint32][2]uint64
	no6       bool // IPv6 reports false
}

func (r *recordingFast) Offer(f *FastFlow) bool {
	if r.limit > 0 && len(r.flows) >= r.limit {
		return false
	}
	r.flows = append(r.flows, *f)
	return true
}

func (r *recordingFast) Flush() error { r.flushes++; return r.err }
func (r *recordingFast) IPv6() bool   { return !r.no6 }

func (r *recordingFast) Forwarded(slot uint32) (uint64, uint64, bool) {
	c, ok := r.forwarded[slot]
	return c[0], c[1], ok
}

// replayFast translates frame as a fast path holding flow f would: the
// rewrite xdpprog's program makes, written here from FastFlow's fields
// alone (destination or, SNAT, source address and port, TTL, the two
// sums, MACs, padding dropped; or the encapsulation). A flow whose fields
// are wrong gives other bytes than the pipeline.
func replayFast(t *testing.T, frame []byte, f FastFlow) []byte {
	t.Helper()
	if f.V6 {
		return replayFast6(t, frame, f)
	}
	out := append([]byte(nil), frame...)
	ip := out[14:]
	src, dst := [4]byte(ip[12:16]), [4]byte(ip[16:20])
	sport, dport := binary.BigEndian.Uint16(ip[20:]), binary.BigEndian.Uint16(ip[22:])
	if src != f.Src || dst != f.Dst || sport != f.SrcPort || dport != f.DstPort || ip[9] != f.Proto {
		t.Fatalf("frame %v:%d → %v:%d proto %d is not flow %+v", src, sport, dst, dport, ip[9], f)
	}
	if f.Encap {
		// IPIP (RFC 2003): an outer header of the inner TOS, the total
		// length, ID 0, DF, TTL 64, protocol 4, checksummed here. GUE:
		// protocol 17, then UDP between the flow's ports, of the inner
		// packet's length and 8, without a checksum.
		inner := ip[:binary.BigEndian.Uint16(ip[2:])]
		var udp []byte
		proto := byte(4)
		if f.GUE {
			proto = 17
			udp = binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, f.GUESrcPort), f.GUEDstPort)
			udp = append(binary.BigEndian.AppendUint16(udp, uint16(8+len(inner))), 0, 0)
		}
		outer := []byte{0x45, inner[1], 0, 0, 0, 0, 0x40, 0, 64, proto, 0, 0}
		binary.BigEndian.PutUint16(outer[2:], uint16(20+len(udp)+len(inner)))
		outer = append(append(outer, f.EncapSrc[:]...), f.Addr[:]...)
		binary.BigEndian.PutUint16(outer[10:], ^uint16(refSum(outer, 0)))
		return append(append(append(append(append([]byte(nil), f.MACs[:]...), 0x08, 0x00), outer...), udp...), inner...)
	}
	addr, port := 16, 22 // the destination's
	if f.SNAT {
		addr, port = 12, 20
	}
	copy(ip[addr:addr+4], f.Addr[:])
	ip[8]--
	binary.BigEndian.PutUint16(ip[10:], packet.ChecksumAdd(binary.BigEndian.Uint16(ip[10:]), f.IPSum))
	if f.Port != 0 {
		binary.BigEndian.PutUint16(ip[port:], f.Port)
	}
	csum := 20 + 16
	if f.Proto == packet.ProtoUDP {
		csum = 20 + 6
	}
	if c := binary.BigEndian.Uint16(ip[csum:]); f.Proto != packet.ProtoUDP || c != 0 {
		c = packet.ChecksumAdd(c, f.L4Sum)
		if f.Proto == packet.ProtoUDP && c == 0 {
			c = 0xffff
		}
		binary.BigEndian.PutUint16(ip[csum:], c)
	}
	copy(out, f.MACs[:])
	return out[:14+int(binary.BigEndian.Uint16(ip[2:]))]
}

// replayFast6 is replayFast for an IPv6 flow (V6): the untagged frame's
// destination (SNAT: source) address and port, the hop limit, the
// transport checksum by the flow's sum, the MACs, and the frame cut at
// the end of the IPv6 packet.
func replayFast6(t *testing.T, frame []byte, f FastFlow) []byte {
	t.Helper()
	out := append([]byte(nil), frame...)
	ip := out[14:]
	src, dst := [16]byte(ip[8:24]), [16]byte(ip[24:40])
	sport, dport := binary.BigEndian.Uint16(ip[40:]), binary.BigEndian.Uint16(ip[42:])
	if src != f.Src6 || dst != f.Dst6 || sport != f.SrcPort || dport != f.DstPort || ip[6] != f.Proto || f.GUE {
		t.Fatalf("frame %v:%d → %v:%d next header %d is not flow %+v", netip.AddrFrom16(src), sport, netip.AddrFrom16(dst), dport, ip[6], f)
	}
	if f.Encap {
		// IPv6 in IPv6 (RFC 2473): version 6, the inner traffic class,
		// the flow's label, the inner packet's length, next header 41,
		// hop limit 64, the flow's outer source, the backend.
		inner := ip[:40+int(binary.BigEndian.Uint16(ip[4:]))]
		tc := binary.BigEndian.Uint32(inner) >> 20 & 0xff
		outer := binary.BigEndian.AppendUint32(nil, 6<<28|tc<<20|f.FlowLabel&0xfffff)
		outer = binary.BigEndian.AppendUint16(outer, uint16(len(inner)))
		outer = append(append(append(outer, 41, 64), f.EncapSrc6[:]...), f.Addr6[:]...)
		return append(append(append(append([]byte(nil), f.MACs[:]...), 0x86, 0xdd), outer...), inner...)
	}
	addr, port := 24, 42 // the destination's
	if f.SNAT {
		addr, port = 8, 40
	}
	copy(ip[addr:addr+16], f.Addr6[:])
	ip[7]--
	if f.Port != 0 {
		binary.BigEndian.PutUint16(ip[port:], f.Port)
	}
	csum := 40 + 16
	if f.Proto == packet.ProtoUDP {
		csum = 40 + 6
	}
	c := packet.ChecksumAdd(binary.BigEndian.Uint16(ip[csum:]), f.L4Sum)
	if f.Proto == packet.ProtoUDP && c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(ip[csum:], c)
	copy(out, f.MACs[:])
	return out[:14+40+int(binary.BigEndian.Uint16(ip[4:]))]
}

// withHopByHop returns an IPv6 frame with an empty Hop-by-Hop Options
// header (a PadN option) inserted after the fixed header: the same flow,
// which the pipeline forwards and the fast path cannot take.
func withHopByHop(frame []byte) []byte {
	out := append([]byte(nil), frame[:54]...)
	out = append(out, frame[20], 0, 1, 4, 0, 0, 0, 0)
	out = append(out, frame[54:]...)
	out[20] = 0 // Hop-by-Hop
	binary.BigEndian.PutUint16(out[18:], binary.BigEndian.Uint16(frame[18:])+8)
	return out
}

// More VIPs for the fast path's tests: DSR in GUE, and IPIP from a
// source per flow; IPv6 UDP and every-port NAT.
var (
	vipGUE4 = netip.MustParseAddr("198.18.0.104")
	vipSrc4 = netip.MustParseAddr("198.18.0.105")
	vipUDP6 = netip.MustParseAddr("2001:2::102")
	vipAll6 = netip.MustParseAddr("2001:2::103")
	vipGUE6 = netip.MustParseAddr("2001:2::104")
	vipSrc6 = netip.MustParseAddr("2001:2::105")
)

const (
	idUDP6 = 23
	idAll6 = 24
	idGUE6 = 25
	idSrc6 = 26
	idSrcU = 27
)

// fastSpec is testSpec with vipGUE4 (TCP and UDP), vipSrc4, vipUDP6 and
// vipAll6.
func fastSpec() *Spec {
	spec := testSpec()
	spec.VIPs = append(spec.VIPs,
		VIPSpec{ID: idUDP6, Name: "udp6", Addr: vipUDP6, Port: 7000, Proto: 17, Mode: ModeNAT, TableSize: 65537,
			Backends: backends("2001:2:1::3", 29, 7001)},
		VIPSpec{ID: idAll6, Name: "all6", Addr: vipAll6, Port: 0, Proto: 6, Mode: ModeNAT, TableSize: 65537,
			Backends: backends("2001:2:1::4", 32, 0)},
		VIPSpec{ID: idGUE6, Name: "gue6", Addr: vipGUE6, Port: 80, Proto: 6, Mode: ModeDSR, TableSize: 65537, EncapSrc: encap6,
			Encap: EncapGUE, Backends: backends("2001:2:1::5", 35, 0)},
		VIPSpec{ID: idSrc6, Name: "src6", Addr: vipSrc6, Port: 80, Proto: 6, Mode: ModeDSR, TableSize: 65537, EncapSrc: encap6,
			EncapSrcPrefix: netip.MustParsePrefix("2001:2:1::/120"), Backends: backends("2001:2:1::6", 38, 0)},
		VIPSpec{ID: idSrcU, Name: "src6u", Addr: vipSrc6, Port: 80, Proto: 17, Mode: ModeDSR, TableSize: 65537, EncapSrc: encap6,
			Backends: backends("2001:2:1::7", 41, 0)},
		VIPSpec{ID: 20, Name: "gue4", Addr: vipGUE4, Port: 80, Proto: 6, Mode: ModeDSR, TableSize: 65537, EncapSrc: encap4,
			Encap: EncapGUE, GUEPort: 7777, Backends: backends("198.18.1.6", 20, 0)},
		VIPSpec{ID: 21, Name: "gue4u", Addr: vipGUE4, Port: 80, Proto: 17, Mode: ModeDSR, TableSize: 65537, EncapSrc: encap4,
			Encap: EncapGUE, Backends: backends("198.18.1.6", 23, 0)},
		VIPSpec{ID: 22, Name: "src4", Addr: vipSrc4, Port: 80, Proto: 6, Mode: ModeDSR, TableSize: 65537, EncapSrc: encap4,
			EncapSrcPrefix: netip.MustParsePrefix("198.18.1.0/24"), Backends: backends("198.18.1.7", 26, 0)})
	return spec
}

// TestFastOffers follows flows through their lives and checks what the
// worker offers the fast path: not the packet that creates the flow, then
// every packet that the fast path could forward alone, described so that
// replaying the description on the packet gives the pipeline's own output
// byte for byte, NAT and DSR alike. The ticks advance, so the flows go
// through every conntrack state short of Closing.
func TestFastOffers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		p      pk
		offers bool // from the second packet on; else never
	}{
		{"tcp", pk{src: client4, dst: vipNAT4, sport: 40000, dport: 80, flags: "A", payload: []byte("data")}, true},
		{"tcp, padded frame", pk{src: client4, dst: vipNAT4, sport: 40001, dport: 80, flags: "A"}, true},
		{"udp", pk{src: client4, dst: vipUDP4, sport: 40000, dport: 7000, proto: layers.IPProtocolUDP, payload: []byte("dns?")}, true},
		{"udp without checksum", pk{src: client4, dst: vipUDP4, sport: 40001, dport: 7000, proto: layers.IPProtocolUDP, udpNoCsum: true}, true},
		{"every-port vip, port kept", pk{src: client4, dst: vipAll4, sport: 40000, dport: 443, flags: "A"}, true},
		{"dsr", pk{src: client4, dst: vipDSR4, sport: 40000, dport: 80, flags: "A"}, true},
		{"dsr, padded frame, TOS", pk{src: client4, dst: vipDSR4, sport: 40001, dport: 80, flags: "A", tos: 0xb8}, true},
		{"dsr, gue", pk{src: client4, dst: vipGUE4, sport: 40002, dport: 80, flags: "A", payload: []byte("data")}, true},
		{"dsr, gue, udp", pk{src: client4, dst: vipGUE4, sport: 40003, dport: 80, proto: layers.IPProtocolUDP, payload: []byte("q")}, true},
		{"dsr, source per flow", pk{src: client4, dst: vipSrc4, sport: 40004, dport: 80, flags: "A"}, true},
		{"tcp6", pk{src: client6, dst: vipNAT6, sport: 40000, dport: 80, flags: "A", payload: []byte("data")}, true},
		{"udp6", pk{src: client6, dst: vipUDP6, sport: 40000, dport: 7000, proto: layers.IPProtocolUDP, payload: []byte("dns?")}, true},
		{"every-port vip6, port kept", pk{src: client6, dst: vipAll6, sport: 40000, dport: 443, flags: "A"}, true},
		{"dsr6", pk{src: client6, dst: vipDSR6, sport: 40000, dport: 80, flags: "A"}, true},
		{"dsr6, udp", pk{src: client6, dst: vipSrc6, sport: 40001, dport: 80, proto: layers.IPProtocolUDP, payload: []byte("q")}, true},
		{"dsr6, source per flow", pk{src: client6, dst: vipSrc6, sport: 40002, dport: 80, flags: "A"}, true},
		{"dsr6, gue", pk{src: client6, dst: vipGUE6, sport: 40003, dport: 80, flags: "A"}, false},
		{"tcp6, VLAN tag", pk{src: client6, dst: vipNAT6, sport: 40001, dport: 80, flags: "A", vlan: 7}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, fastSpec())
			fast := &recordingFast{}
			h.w.SetFastPath(fast, false)
			frame := build(t, tc.p)
			offeredAt := -1
			for i := range 8 {
				h.now += 1e9 // a tick later: the flow proves itself
				n := len(fast.flows)
				d := h.run(frame)[0]
				if d.Verdict != VerdictTX {
					t.Fatalf("packet %d: verdict %v %v", i, d.Verdict, d.Reason)
				}
				if len(fast.flows) == n {
					if offeredAt >= 0 {
						t.Fatalf("packet %d not offered, packet %d was", i, offeredAt)
					}
					continue
				}
				if len(fast.flows) != n+1 {
					t.Fatalf("packet %d offered %d times", i, len(fast.flows)-n)
				}
				if offeredAt < 0 {
					offeredAt = i
				}
				f := fast.flows[n]
				if got := replayFast(t, frame, f); !bytes.Equal(got, d.frame()) {
					t.Fatalf("packet %d: replaying offered flow %+v gives\n% x\nthe pipeline sent\n% x", i, f, got, d.frame())
				}
				maxLen := uint16(1500)
				if f.Encap && f.V6 {
					maxLen -= 40 // the outer header
				} else if f.Encap {
					maxLen -= 20
				}
				if f.GUE {
					maxLen -= 8 // and UDP
				}
				if f.Gen != h.snap.Generation() || f.RxPort != PortIngress || f.TxPort != d.Port || f.MaxLen != maxLen {
					t.Errorf("packet %d: flow %+v (generation %d, sent on port %d)", i, f, h.snap.Generation(), d.Port)
				}
				if b := h.snap.backends[f.Slot]; !f.V6 && b.addr4 != f.Addr || f.V6 && b.addr6 != f.Addr6 {
					t.Errorf("packet %d: backend ref %d is %v %v, the flow goes to %v %v", i, f.Slot, b.addr4, b.addr6, f.Addr, f.Addr6)
				}
			}
			switch {
			case !tc.offers && offeredAt >= 0:
				t.Fatalf("offered from packet %d on", offeredAt)
			case tc.offers && offeredAt != 1:
				t.Fatalf("offered from packet %d on, want the second", offeredAt)
			}
			if got := h.w.c.FastOffered; got != uint64(len(fast.flows)) {
				t.Errorf("FastOffered = %d, want %d", got, len(fast.flows))
			}
		})
	}
}

// TestFastOffersNoExtHeaders6: an IPv6 flow whose frames carry an
// extension header (Hop-by-Hop here) is forwarded by the pipeline and
// never offered: the fast path reads the transport header right after the
// fixed one. (A NAT reply with one goes to the kernel: see natReply6.)
func TestFastOffersNoExtHeaders6(t *testing.T) {
	h := newHarness(t, fastSpec())
	fast := &recordingFast{}
	h.w.SetFastPath(fast, false)
	p := pk{src: client6, dst: vipNAT6, sport: 40000, dport: 80, flags: "A", payload: []byte("data")}
	frame := withHopByHop(build(t, p))
	for i := range 4 {
		h.now += 1e9
		if d := h.run(frame)[0]; d.Verdict != VerdictTX {
			t.Fatalf("packet %d: verdict %v %v", i, d.Verdict, d.Reason)
		}
	}
	if len(fast.flows) != 0 {
		t.Fatalf("offered %+v", fast.flows)
	}
	// The same flow without the header is offered.
	if d := h.run(build(t, p))[0]; d.Verdict != VerdictTX || len(fast.flows) != 1 {
		t.Fatalf("without the header: verdict %v %v, %d offers", d.Verdict, d.Reason, len(fast.flows))
	}
}

// TestFastOffersNoIPv6: to a fast path without IPv6 a worker offers no
// IPv6 flow (NAT, its replies, DSR) and still offers IPv4 ones.
func TestFastOffersNoIPv6(t *testing.T) {
	h := newHarness(t, fastSpec())
	fast := &recordingFast{no6: true}
	h.w.SetFastPath(fast, false)
	for _, c := range []struct {
		p  pk
		rx uint8
	}{
		{pk{src: client6, dst: vipNAT6, sport: 40000, dport: 80, flags: "A"}, PortIngress},
		{pk{src: client6, dst: vipDSR6, sport: 40000, dport: 80, flags: "A"}, PortIngress},
		{pk{src: netip.MustParseAddr("2001:2:1::12"), dst: client6, sport: 8080, dport: 40000, flags: "A"}, PortEgress},
	} {
		frame := build(t, c.p)
		for i := range 3 {
			h.now += 1e9
			if d := h.runOn(c.rx, frame); d.Verdict != VerdictTX {
				t.Fatalf("%v packet %d: verdict %v %v", c.p.dst, i, d.Verdict, d.Reason)
			}
		}
	}
	if len(fast.flows) != 0 {
		t.Fatalf("offered %+v", fast.flows)
	}
	frame := build(t, pk{src: client4, dst: vipNAT4, sport: 40000, dport: 80, flags: "A"})
	for range 2 {
		h.now += 1e9
		h.run(frame)
	}
	if len(fast.flows) != 1 || fast.flows[0].V6 {
		t.Fatalf("IPv4 flow: %d offers", len(fast.flows))
	}
}

// TestFastOffersNotStateChanges checks that a flow's packets that change
// its conntrack state (SYN, RST, FIN), come in on the egress port, or
// exceed the egress MTU are not offered, nor any packet of the flow once
// it is closing; a handshake's ACK is. The first RST or FIN retires the
// flow instead (TestReusedTupleLeavesDrainingBackend).
func TestFastOffersNotStateChanges(t *testing.T) {
	spec := testSpec()
	spec.MTU = [2]int{1500, 1400}
	base := pk{src: client4, dst: vipNAT4, sport: 40000, dport: 80, flags: "A"}
	h := newHarness(t, spec)
	fast := &recordingFast{}
	h.w.SetFastPath(fast, false)
	syn := base
	syn.flags = "S"
	h.run(build(t, syn))
	if len(fast.flows) != 0 {
		t.Fatalf("the SYN was offered: %+v", fast.flows)
	}
	h.run(build(t, base))
	n := len(fast.flows)
	if n != 1 {
		t.Fatalf("the handshake's ACK was offered %d times, want once", n)
	}
	with := func(f func(*pk)) []byte { p := base; f(&p); return build(t, p) }
	for _, tc := range []struct {
		name   string
		frame  []byte
		port   uint8
		retire bool
	}{
		{"over the egress MTU", with(func(p *pk) { p.payload = make([]byte, 1400) }), PortIngress, false},
		{"from the egress port", build(t, base), PortEgress, false},
		{"SYN", with(func(p *pk) { p.flags = "S" }), PortIngress, false},
		{"RST", with(func(p *pk) { p.flags = "RA" }), PortIngress, true},
		{"FIN", with(func(p *pk) { p.flags = "FA" }), PortIngress, false},
		{"after the FIN", build(t, base), PortIngress, false},
	} {
		h.runOn(tc.port, tc.frame)
		want := n
		if tc.retire {
			want++
		}
		if len(fast.flows) != want || tc.retire && !fast.flows[n].Retire {
			t.Errorf("%s: offered %+v", tc.name, fast.flows[n:])
		}
		n = len(fast.flows)
	}
}

// TestFastFlush checks Run's side: offered flows are flushed after the
// batch is sent, once per batch with offers, and a failed flush is
// counted, not fatal.
func TestFastFlush(t *testing.T) {
	h := newHarness(t, testSpec())
	fast := &recordingFast{err: errors.New("map full")}
	h.w.SetFastPath(fast, false)
	frame := build(t, pk{src: client4, dst: vipNAT4, sport: 40000, dport: 80, flags: "A"})
	offering := 0
	for range 3 {
		h.now += 1e9
		n := len(fast.flows)
		h.run(frame, frame)
		if h.w.fastPending {
			h.w.flushFast()
		}
		if len(fast.flows) > n {
			offering++
		}
	}
	if offering == 0 || fast.flushes != offering || h.w.fastPending {
		t.Errorf("%d flushes for %d batches that offered flows (%d flows)", fast.flushes, offering, len(fast.flows))
	}
	if h.w.c.FastFlushErrors != uint64(fast.flushes) {
		t.Errorf("FastFlushErrors = %d, want %d", h.w.c.FastFlushErrors, fast.flushes)
	}
	// A full queue: the flow is not counted as offered.
	full := &recordingFast{limit: 1}
	h.w.SetFastPath(full, false)
	before := h.w.c.FastOffered
	h.now += 1e9
	h.run(frame, frame, frame)
	if len(full.flows) != 1 || h.w.c.FastOffered != before+1 {
		t.Errorf("a queue of one took %d flows, FastOffered +%d", len(full.flows), h.w.c.FastOffered-before)
	}
}

// TestFastHarvest checks that the harvesting worker adds what the fast
// path forwarded to the backends' and VIPs' counters, once per second at
// most, by difference (so a count read twice is added once), and that a
// worker that does not harvest adds nothing.
func TestFastHarvest(t *testing.T) {
	h := newHarness(t, testSpec())
	other := newHarnessOf(t, h.snap, 1024)
	nat := h.snap.vips[h.snap.byID[idNAT4]]
	ref := nat.refs[0]
	udp := h.snap.vips[h.snap.byID[idUDP4]]
	udpRef := udp.refs[0]
	fast := &recordingFast{forwarded: map[uint32][2]uint64{ref: {}, fastReplySlot(udpRef): {}}}
	h.w.SetFastPath(fast, true)
	other.w.SetFastPath(fast, false)
	for _, x := range []*harness{h, other} {
		x.w.Begin(x.snap, x.now, x.emit)
	}
	fast.forwarded[ref] = [2]uint64{10, 1000}
	fast.forwarded[fastReplySlot(udpRef)] = [2]uint64{3, 300} // replies
	h.w.Publish()
	other.w.Publish()
	if c := h.w.c.VIPs[idUDP4]; c.Packets != 0 || c.OutPackets != 3 || c.OutBytes != 300 || h.w.c.Replies != 3 {
		t.Errorf("UDP VIP after a harvest of its replies: %+v, %d replies", c, h.w.c.Replies)
	}
	if c := h.w.c.Backends[udpRef]; c.Packets != 0 || c.OutPackets != 3 || c.OutBytes != 300 {
		t.Errorf("UDP backend %d after a harvest of its replies: %+v", udpRef, c)
	}
	for r, c := range h.w.c.Backends {
		if uint32(r) != ref && c.Packets != 0 || uint32(r) != udpRef && c.OutPackets != 0 {
			t.Errorf("backend %d counted %+v", r, c)
		}
	}
	if c := h.w.c.Backends[ref]; c.Packets != 10 || c.Bytes != 1000 {
		t.Errorf("backend %d after a harvest: %+v", ref, c)
	}
	if c := h.w.c.VIPs[idNAT4]; c.Packets != 10 || c.Bytes != 1000 {
		t.Errorf("VIP after a harvest: %+v", c)
	}
	if c := other.w.c.Backends[ref]; c.Packets != 0 {
		t.Errorf("a worker that does not harvest counted %+v", c)
	}
	// Within the second: nothing read again. After it: the difference.
	fast.forwarded[ref] = [2]uint64{15, 1500}
	h.now += 5e8
	h.w.Begin(h.snap, h.now, h.emit)
	h.w.Publish()
	if c := h.w.c.Backends[ref]; c.Packets != 10 {
		t.Errorf("harvested again within a second: %+v", c)
	}
	h.now += 6e8
	h.w.Begin(h.snap, h.now, h.emit)
	h.w.Publish()
	if c := h.w.c.Backends[ref]; c.Packets != 15 || c.Bytes != 1500 {
		t.Errorf("backend %d after the second harvest: %+v", ref, c)
	}
	if c := h.w.Published().VIPs[idNAT4]; c.Packets != 15 {
		t.Errorf("published VIP counters: %+v", c)
	}
}

// TestFastOffersReplies checks what a worker offers for a NAT backend's
// replies: every reply the fast path could translate alone, from the
// first one (replies are no tracked flow), described so that replaying
// the description gives the pipeline's own output byte for byte, counted
// in its backend's reply slot and sent out of the ingress port; and none of those
// it could not (state flags, fragments, tagged, over the ingress MTU),
// in the two-armed layout and the one-armed one.
func TestFastOffersReplies(t *testing.T) {
	be := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	for _, twoArmed := range []bool{true, false} {
		spec := fastSpec()
		spec.TwoArmed = twoArmed
		rx := PortEgress
		if !twoArmed {
			rx = PortIngress
		}
		for _, tc := range []struct {
			name   string
			p      pk
			vip    int
			offers bool
		}{
			{"tcp", pk{src: be("198.18.1.12"), dst: client4, sport: 8080, dport: 40001, flags: "A", payload: []byte("hello")}, idNAT4, true},
			{"tcp, padded frame", pk{src: be("198.18.1.12"), dst: client4, sport: 8080, dport: 40002, flags: "A"}, idNAT4, true},
			{"tcp, SYN-ACK", pk{src: be("198.18.1.12"), dst: client4, sport: 8080, dport: 40003, flags: "SA"}, idNAT4, false},
			{"tcp, FIN", pk{src: be("198.18.1.12"), dst: client4, sport: 8080, dport: 40004, flags: "FA"}, idNAT4, false},
			{"udp", pk{src: be("198.18.1.31"), dst: client4, sport: 7001, dport: 5000, proto: layers.IPProtocolUDP, payload: []byte("answer")}, idUDP4, true},
			{"udp without checksum", pk{src: be("198.18.1.31"), dst: client4, sport: 7001, dport: 5001, proto: layers.IPProtocolUDP, udpNoCsum: true}, idUDP4, true},
			{"every-port VIP, port kept", pk{src: be("198.18.1.42"), dst: client4, sport: 4443, dport: 5002, flags: "A"}, idAll4, true},
			{"udp, first fragment", pk{src: be("198.18.1.31"), dst: client4, sport: 7001, dport: 5003, proto: layers.IPProtocolUDP, payload: make([]byte, 64), mf: true, noDF: true}, idUDP4, false},
			{"over the ingress MTU", pk{src: be("198.18.1.12"), dst: client4, sport: 8080, dport: 40005, flags: "A", payload: make([]byte, 1500), noDF: true}, idNAT4, false},
			{"tcp6", pk{src: be("2001:2:1::12"), dst: client6, sport: 8080, dport: 40001, flags: "A", payload: []byte("hello")}, idNAT6, true},
			{"tcp6, FIN", pk{src: be("2001:2:1::12"), dst: client6, sport: 8080, dport: 40002, flags: "FA"}, idNAT6, false},
			{"udp6", pk{src: be("2001:2:1::32"), dst: client6, sport: 7001, dport: 5000, proto: layers.IPProtocolUDP, payload: []byte("answer")}, idUDP6, true},
			{"every-port VIP6, port kept", pk{src: be("2001:2:1::42"), dst: client6, sport: 4443, dport: 5002, flags: "A"}, idAll6, true},
		} {
			t.Run(fmt.Sprintf("two-armed=%v/%s", twoArmed, tc.name), func(t *testing.T) {
				h := newHarness(t, spec)
				fast := &recordingFast{}
				h.w.SetFastPath(fast, false)
				tc.p.srcMAC = macOf(1)
				frame := build(t, tc.p)
				for i := range 4 {
					n := len(fast.flows)
					if i == 3 {
						// The same reply, within offerRepeat of the
						// last offer (the rest of a burst): forwarded,
						// not offered again.
						h.now += offerRepeat - 1
						if d := h.runOn(rx, frame); d.Verdict != VerdictTX || len(fast.flows) != n {
							t.Fatalf("a repeat within %d ns: verdict %v %v, %d offers", offerRepeat, d.Verdict, d.Reason, len(fast.flows)-n)
						}
						break
					}
					h.now += offerRepeat
					d := h.runOn(rx, frame)
					if d.Verdict != VerdictTX || d.Port != PortIngress {
						t.Fatalf("reply %d: verdict %v %v on port %d", i, d.Verdict, d.Reason, d.Port)
					}
					if !tc.offers {
						if len(fast.flows) != n {
							t.Fatalf("reply %d offered: %+v", i, fast.flows[n:])
						}
						continue
					}
					if len(fast.flows) != n+1 {
						t.Fatalf("reply %d offered %d times, want once", i, len(fast.flows)-n)
					}
					f := fast.flows[n]
					if got := replayFast(t, frame, f); !bytes.Equal(got, d.frame()) {
						t.Fatalf("reply %d: replaying offered flow %+v gives\n% x\nthe pipeline sent\n% x", i, f, got, d.frame())
					}
					if !f.SNAT || f.Encap || f.Gen != h.snap.Generation() || f.RxPort != rx || f.TxPort != PortIngress ||
						f.MaxLen != 1500 || f.Slot != fastReplySlot(replyRef(t, h.snap, tc.p.src, tc.p.sport)) {
						t.Errorf("reply %d: flow %+v (generation %d)", i, f, h.snap.Generation())
					}
				}
				if got := h.w.c.FastOffered; got != uint64(len(fast.flows)) {
					t.Errorf("FastOffered = %d, want %d", got, len(fast.flows))
				}
			})
		}
	}
}

// TestFastGeneration: a snapshot keeps its predecessor's generation, and
// so the fast path its handed-down flows, when it changes only what new
// flows get (a weight, a drain); it moves on when established flows'
// packets would be forwarded otherwise (a backend down, a MAC, the
// clients' router).
func TestFastGeneration(t *testing.T) {
	spec := testSpec()
	prev, err := NewSnapshot(spec)
	if err != nil {
		t.Fatal(err)
	}
	backend := func(s *Spec) *BackendSpec { return &s.VIPs[0].Backends[1] }
	for _, tc := range []struct {
		name  string
		edit  func(*Spec)
		moves bool
	}{
		{"weight", func(s *Spec) { backend(s).Weight = 7 }, false},
		{"draining", func(s *Spec) { backend(s).State = BackendDraining }, false},
		{"down", func(s *Spec) { backend(s).State = BackendDown }, true},
		{"up again", func(s *Spec) { backend(s).State = BackendUp }, true},
		{"backend MAC", func(s *Spec) { backend(s).MAC[5]++ }, true},
		{"clients' router", func(s *Spec) { s.ClientGateway4[5]++ }, true},
		{"egress MTU", func(s *Spec) { s.MTU[PortEgress] = 1400 }, true},
	} {
		next := *spec
		next.VIPs = slices.Clone(spec.VIPs)
		next.VIPs[0].Backends = slices.Clone(spec.VIPs[0].Backends)
		tc.edit(&next)
		s, err := NewSnapshotFrom(prev, &next)
		if err != nil {
			t.Fatal(err)
		}
		if moved := s.Generation() != prev.Generation(); moved != tc.moves || s.Generation() > prev.Generation()+1 {
			t.Errorf("%s: generation %d after %d, want it to move: %v", tc.name, s.Generation(), prev.Generation(), tc.moves)
		}
		spec, prev = &next, s
	}
}

// replyRef is the ref of the NAT backend at addr:port (port 0 for a
// backend of an every-port VIP) in snap.
func replyRef(t *testing.T, snap *Snapshot, addr netip.Addr, port uint16) uint32 {
	t.Helper()
	for ref, b := range snap.backends {
		if !b.live || b.port != port && b.port != 0 {
			continue
		}
		if addr.Is4() && b.addr4 == addr.As4() || addr.Is6() && b.addr6 == addr.As16() {
			return uint32(ref)
		}
	}
	t.Fatalf("no backend %v port %d", addr, port)
	return 0
}

// TestFastNoReplySlot: a NAT backend whose reference is past MaxFastRef
// has no reply slot: its replies are not offered (they would go
// uncounted), and the pipeline still translates them.
func TestFastNoReplySlot(t *testing.T) {
	spec := fastSpec()
	found := false
	for i := range spec.VIPs {
		v := &spec.VIPs[i]
		if v.ID != idNAT4 {
			continue
		}
		v.Backends = slices.Clone(v.Backends)
		for j := range v.Backends {
			if v.Backends[j].Addr == netip.MustParseAddr("198.18.1.12") {
				v.Backends[j].Ref, found = MaxFastRef, true
			}
		}
	}
	if !found {
		t.Fatal("no backend 198.18.1.12 in the NAT VIP")
	}
	h := newHarness(t, spec)
	fast := &recordingFast{}
	h.w.SetFastPath(fast, false)
	d := h.runOn(PortEgress, build(t, pk{src: netip.MustParseAddr("198.18.1.12"), dst: client4, sport: 8080, dport: 40001, flags: "A", srcMAC: macOf(1)}))
	if d.Verdict != VerdictTX || len(fast.flows) != 0 {
		t.Errorf("verdict %v %v, %d flows offered; want tx and none", d.Verdict, d.Reason, len(fast.flows))
	}
}
