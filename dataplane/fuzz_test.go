package dataplane

import (
	"bytes"
	"net/netip"
	"reflect"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/vipd/vipd/testing/framegen"
)

// FuzzProcess feeds arbitrary frames to the pipeline. Properties:
//   - it never panics and never drops without a reason;
//   - it gives the kernel verdict to exactly the frames the steering rule
//     (Snapshot.Claims) does not claim, so that AF_PACKET and AF_XDP (whose
//     XDP program is checked against Claims by a differential test) take
//     the same frames;
//   - every frame it transmits (the frame itself and any fragment it
//     emits) decodes with gopacket, has correct IPv4 header checksums and
//     consistent lengths, and is one the configuration allows (checkPolicy:
//     forwarded to a backend of a VIP the input matched, a NAT reply from
//     that VIP, vipd's own ICMP back to the sender, or an ICMP error steered
//     to the flow's backend);
//   - it preserves transport checksums: when the input's transport checksum
//     is right, so is the output's (vipd, like a router, does not verify
//     them, but it never breaks one).
//
// Every input runs on a fresh worker and connection table (the snapshot
// is immutable), so a failure reproduces from its input alone.
func FuzzProcess(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	spec := fuzzSpec()
	snap, err := NewSnapshot(spec)
	if err != nil {
		f.Fatal(err)
	}
	// fuzzSpec's on-link clients send NAT packets down forward4; without
	// them forwardClean translates them itself.
	plain, err := NewSnapshot(testSpec())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		// The snapshot is immutable and shared; the worker and its
		// connection table are the input's own.
		checkProcess(t, spec, newHarnessOf(t, snap, 64), frame)
		checkShortcuts(t, snap, frame)
		checkShortcuts(t, plain, frame)
	})
}

// checkShortcuts runs frame, received on each port, through a worker with
// classifyCommon's shortcuts and one without, and fails t unless both give
// the same verdict, bytes, emitted frames and counters.
func checkShortcuts(t *testing.T, snap *Snapshot, frame []byte) {
	t.Helper()
	fast, general := newHarnessOf(t, snap, 64), newHarnessOf(t, snap, 64)
	general.w.noCommon = true
	for _, rx := range []uint8{PortIngress, PortEgress} {
		a, b := fast.runOn(rx, frame), general.runOn(rx, frame)
		if a.Verdict != b.Verdict || a.Reason != b.Reason || a.Port != b.Port || !bytes.Equal(a.frame(), b.frame()) {
			t.Fatalf("port %d: with shortcuts %v/%v port %d, general path %v/%v port %d (bytes equal: %v)\n% x",
				rx, a.Verdict, a.Reason, a.Port, b.Verdict, b.Reason, b.Port, bytes.Equal(a.frame(), b.frame()), frame)
		}
		if !reflect.DeepEqual(fast.emit.frames, general.emit.frames) {
			t.Fatalf("port %d: emitted frames differ\n% x", rx, frame)
		}
	}
	if a, b := fast.w.Counters(), general.w.Counters(); !reflect.DeepEqual(a, b) {
		t.Fatalf("counters differ:\nshortcuts %+v\ngeneral   %+v\n% x", a, b, frame)
	}
}

// checkProcess runs frame through h, received on each port in turn, and
// applies FuzzProcess's properties to what the pipeline does with it. It
// reports whether the steering rule claims the frame.
func checkProcess(t *testing.T, spec *Spec, h *harness, frame []byte) bool {
	t.Helper()
	inOK := l4ChecksumOK(frame)
	claims := h.snap.Claims(frame)
	for _, rx := range []uint8{PortIngress, PortEgress} {
		h.now += 2e6 // keep the ICMP limiter open
		d := h.runOn(rx, frame)
		if d.Verdict == VerdictDrop && (d.Reason == DropNone || d.Reason >= numDropReasons) {
			t.Fatalf("drop without a reason\n% x", frame)
		}
		if (d.Verdict == VerdictKernel) == claims {
			t.Fatalf("verdict %v (%v), but the steering rule claims the frame: %v\n% x", d.Verdict, d.Reason, claims, frame)
		}
		if d.Verdict != VerdictTX && d.Verdict != VerdictReply {
			if len(h.emit.frames) != 0 {
				t.Fatalf("fragments emitted for a frame with verdict %v", d.Verdict)
			}
			continue
		}
		if d.Off < 0 || d.Off+d.Len > len(d.Buf) || d.Len < 14 {
			t.Fatalf("output outside its buffer: off %d len %d cap %d", d.Off, d.Len, len(d.Buf))
		}
		outs := [][]byte{d.frame()}
		for _, e := range h.emit.frames {
			outs = append(outs, e.data)
		}
		for _, out := range outs {
			checkOutput(t, out, inOK && len(outs) == 1)
			if err := checkPolicy(spec, frame, out); err != nil {
				t.Fatalf("policy: %v\n% x", err, frame)
			}
		}
	}
	return claims
}

// fuzzSpec is the configuration FuzzProcess runs: testSpec with a smaller
// egress MTU (so fragmentation and frag-needed paths run), on-link clients
// with a known MAC, a local address besides the ports' own, the IPv6
// DSR VIP in GUE with a previous table, every scheduler, and the QUIC-LB
// VIPs.
func fuzzSpec() *Spec {
	spec := testSpec()
	spec.MTU[PortEgress] = 1400
	spec.ClientOnLink = []netip.Prefix{netip.MustParsePrefix("198.18.0.0/24")}
	spec.Neighbors = map[netip.Addr][6]byte{client4: macClient}
	spec.Addr6 = [2]netip.Addr{own6In, {}}
	spec.Local = []netip.Addr{netip.MustParseAddr("198.18.9.1")}
	for i := range spec.VIPs {
		// Every scheduler on the miss path (nat4 keeps Maglev).
		switch vs := &spec.VIPs[i]; vs.Name {
		case "dsr4":
			vs.Scheduler = SchedMaglevBounded
		case "udp4":
			vs.Scheduler = SchedLC
		case "all4":
			vs.Scheduler = SchedP2C
		case "nat6":
			vs.Scheduler = SchedWRR
		}
		if vs := &spec.VIPs[i]; vs.Name == "dsr6" {
			vs.Encap = EncapGUE // both encapsulations fuzzed
			// and previous-owner hints: a table of two of its backends
			// and one that left
			vs.Previous = []PreviousBackend{
				{Addr: vs.Backends[0].Addr, Weight: 1}, {Addr: vs.Backends[1].Addr, Weight: 1},
				{Addr: netip.MustParseAddr("2001:2:1::29"), Weight: 2},
			}
		}
	}
	// And the QUIC-LB VIPs, NAT and DSR (quic_test.go).
	spec.VIPs = append(spec.VIPs, quicVIPs(nil)...)
	return spec
}

// checkOutput applies the fuzz properties to one transmitted frame.
func checkOutput(t *testing.T, frame []byte, wantL4 bool) {
	t.Helper()
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	if el := p.ErrorLayer(); el != nil && !afterTransport(p) {
		t.Fatalf("transmitted a frame gopacket rejects: %v\n%s", el.Error(), p.Dump())
	}
	ok, hasL4 := checksums(t, p)
	if wantL4 && hasL4 && !ok {
		t.Fatalf("transport checksum broken by the pipeline\n%s", p.Dump())
	}
}

// afterTransport reports whether a decoding failure lies beyond the
// transport header (an application protocol gopacket guessed from a port).
func afterTransport(p gopacket.Packet) bool {
	for _, l := range p.Layers() {
		switch l.(type) {
		case *layers.TCP, *layers.UDP, *layers.ICMPv4, *layers.ICMPv6:
			return true
		}
	}
	return false
}

// checksums verifies every IPv4 header checksum and length (fatal) and
// reports whether the innermost transport checksum is right, if there is
// one that can be checked (not in a fragment).
func checksums(t *testing.T, p gopacket.Packet) (ok, hasL4 bool) {
	t.Helper()
	var lastIP gopacket.Layer
	frag := false
	for _, l := range p.Layers() {
		switch x := l.(type) {
		case *layers.IPv4:
			if refSum(x.Contents, 0) != 0xffff {
				t.Fatalf("transmitted an IPv4 header with a wrong checksum\n%s", p.Dump())
			}
			if int(x.Length) != len(x.Contents)+len(x.Payload) {
				t.Fatalf("IPv4 length %d for %d bytes\n%s", x.Length, len(x.Contents)+len(x.Payload), p.Dump())
			}
			lastIP, frag = x, x.Flags&layers.IPv4MoreFragments != 0 || x.FragOffset != 0
			hasL4 = false
		case *layers.IPv6:
			if int(x.Length) != len(x.Payload) {
				t.Fatalf("IPv6 payload length %d for %d bytes\n%s", x.Length, len(x.Payload), p.Dump())
			}
			lastIP, frag, hasL4 = x, false, false
		case *layers.IPv6Fragment:
			frag = true
		case *layers.TCP, *layers.UDP, *layers.ICMPv4, *layers.ICMPv6:
			if frag || lastIP == nil || hasL4 {
				continue
			}
			b := append(append([]byte{}, l.LayerContents()...), l.LayerPayload()...)
			var init uint32
			switch x := l.(type) {
			case *layers.TCP:
				init = pseudo(lastIP, 6, len(b))
			case *layers.UDP:
				if x.Checksum == 0 {
					continue
				}
				if int(x.Length) != len(b) {
					continue // gopacket trims to the UDP length; leave odd ones
				}
				init = pseudo(lastIP, 17, len(b))
			case *layers.ICMPv6:
				init = pseudo(lastIP, 58, len(b))
			}
			hasL4 = true
			ok = refSum(b, init) == 0xffff
		}
	}
	return ok, hasL4
}

// l4ChecksumOK reports whether the input's transport checksum is right (or
// there is none to check).
func l4ChecksumOK(frame []byte) bool {
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	var lastIP gopacket.Layer
	for _, l := range p.Layers() {
		switch x := l.(type) {
		case *layers.IPv4:
			if x.Flags&layers.IPv4MoreFragments != 0 || x.FragOffset != 0 {
				return false
			}
			lastIP = x
		case *layers.IPv6:
			lastIP = x
		case *layers.IPv6Fragment:
			return false
		case *layers.TCP, *layers.UDP, *layers.ICMPv4, *layers.ICMPv6:
			if lastIP == nil {
				return false
			}
			b := append(append([]byte{}, l.LayerContents()...), l.LayerPayload()...)
			var init uint32
			switch x := l.(type) {
			case *layers.TCP:
				init = pseudo(lastIP, 6, len(b))
			case *layers.UDP:
				if x.Checksum == 0 {
					return true
				}
				init = pseudo(lastIP, 17, len(b))
			case *layers.ICMPv6:
				init = pseudo(lastIP, 58, len(b))
			}
			return refSum(b, init) == 0xffff
		}
	}
	return true
}

// fuzzSeeds are meaningful frames for every path of the pipeline.
func fuzzSeeds(tb testing.TB) [][]byte {
	t := tb
	var s [][]byte
	add := func(f []byte) { s = append(s, f) }
	add(build(t, pk{src: client4, dst: vipNAT4, sport: 1000, dport: 80, flags: "S"}))
	add(build(t, pk{src: client4, dst: vipDSR4, sport: 1000, dport: 80, flags: "PA", payload: []byte("GET /")}))
	add(build(t, pk{src: client4, dst: vipUDP4, sport: 1000, dport: 7000, proto: layers.IPProtocolUDP, payload: []byte("q")}))
	add(build(t, pk{src: client4, dst: vipAll4, sport: 1000, dport: 22, flags: "S", vlan: 5}))
	add(build(t, pk{src: client6, dst: vipNAT6, sport: 1000, dport: 80, flags: "S"}))
	add(build(t, pk{src: client6, dst: vipDSR6, sport: 1000, dport: 80, flags: "A", payload: payloadOf(1380)}))
	add(build(t, pk{src: netip.MustParseAddr("198.18.1.11"), dst: client4, sport: 8080, dport: 1000, flags: "SA"}))
	add(build(t, pk{src: netip.MustParseAddr("2001:2:1::12"), dst: client6, sport: 8080, dport: 1000, flags: "SA"}))
	add(build(t, pk{src: client4, dst: vipNAT4, sport: 1000, dport: 80, flags: "A", payload: payloadOf(1400)}))
	add(build(t, pk{src: client4, dst: vipDSR4, sport: 1000, dport: 80, flags: "A", payload: payloadOf(2000), noDF: true}))
	add(build(t, pk{src: client4, dst: vipUDP4, sport: 1000, dport: 7000, proto: layers.IPProtocolUDP, mf: true, noDF: true, payload: payloadOf(64)}))
	add(icmpError(t, router4, vipNAT4, quotedTCP(t, vipNAT4, client4, 80, 1000)))
	add(icmpError(t, router6, vipDSR6, quotedTCP(t, vipDSR6, client6, 80, 1000)))
	// The edges of the policy (policy_test.go).
	add(build(t, pk{src: client4, dst: vipUDP4, sport: 1000, dport: 9999, proto: layers.IPProtocolUDP, mf: true, noDF: true, payload: payloadOf(64)}))
	add(build(t, pk{src: nat4Backend, dst: client4, sport: 9999, dport: 1000, flags: "PA", mf: true, noDF: true, payload: payloadOf(64)}))
	add(build(t, pk{src: nat4Backend, dst: own4In, sport: 8080, dport: 40000, flags: "SA"}))
	add(frag6(build(t, pk{src: client6, dst: vipNAT6, sport: 1000, dport: 443, flags: "PA", payload: payloadOf(64)}), 0, true))
	add(frag6(build(t, pk{src: nat6Backend, dst: client6, sport: 8080, dport: 1000, flags: "PA", payload: payloadOf(64)}), 64, false))
	add(icmpErrorOf(t, router4, vipNAT4, 4, 0, quotedTCP(t, vipNAT4, client4, 80, 1000)))
	add(icmpErrorOf(t, router4, client4, 3, 4, quotedTo(t, client4, nat4Backend, 1000, 8080, layers.IPProtocolTCP)))
	add(icmpErrorOf(t, router6, client6, 2, 0, quotedTo(t, client6, nat6Backend, 1000, 8080, layers.IPProtocolTCP)))
	add(routed6(build(t, pk{src: client6, dst: vipNAT6, sport: 1000, dport: 80, flags: "S"}), 1))
	add(routed6(build(t, pk{src: client6, dst: vipDSR6, sport: 1000, dport: 80, flags: "S"}), 0))
	add(sourceRouted4(build(t, pk{src: client4, dst: vipNAT4, sport: 1000, dport: 80, flags: "S"}), 4))
	// QUIC-LB (quic_test.go): a routable 1-RTT packet, a client's Initial,
	// and an ICMP error quoting a server's Handshake packet.
	add(quicPacket(t, vipQUIC4, 1000, shortHeader(serverCID(t, 1, 2, 7))))
	add(quicPacket(t, vipQUICDSR4, 1000, longHeader(0, []byte{1, 2, 3, 4, 5, 6, 7, 8}, []byte{8, 7, 6, 5, 4, 3, 2, 1})))
	q := build(t, pk{src: vipQUIC4, dst: client4, sport: 443, dport: 1000, proto: layers.IPProtocolUDP, payload: longHeader(2, []byte{9, 9, 9, 9, 9, 9, 9, 9}, serverCID(t, 0, 1, 3))})
	add(icmpError(t, router4, vipQUIC4, q[14:14+ipLen(q[14:])]))
	return s
}

// TestPolicyCorpus runs FuzzProcess's properties over a generated corpus
// of 12,000 frames (testing/framegen) aimed at fuzzSpec's VIPs, backends
// and local addresses: what the fuzzer reaches by luck, every run.
func TestPolicyCorpus(t *testing.T) {
	spec := fuzzSpec()
	st := spec.Steering()
	addrs := append(append(append([]netip.Addr{}, st.VIPs...), st.NextHops...), st.Local...)
	addrs = append(addrs, client4, client6, router4, router6, netip.MustParseAddr("198.18.0.9"), netip.MustParseAddr("2001:2::9"))
	n := 12000
	if testing.Short() {
		n = 3000
	}
	corpus, err := framegen.Generate(framegen.Params{Addrs: addrs, Ports: []uint16{0, 22, 80, 443, 1000, 7000, 7001, 8080}, N: n, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := NewSnapshot(spec)
	if err != nil {
		t.Fatal(err)
	}
	claimed := 0
	for _, frame := range corpus {
		if checkProcess(t, spec, newHarnessOf(t, snap, 64), frame) {
			claimed++
		}
	}
	t.Logf("%d frames, %d claimed", len(corpus), claimed)
}
