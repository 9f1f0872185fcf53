package dataplane

import (
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// FuzzProcess feeds arbitrary frames to the pipeline. Properties:
//   - it never panics and never allocates a verdict it cannot justify;
//   - every frame it transmits (the frame itself and any fragment it
//     emits) decodes with gopacket, has correct IPv4 header checksums and
//     consistent lengths;
//   - it preserves transport checksums: when the input's transport checksum
//     is right, so is the output's (vipd, like a router, does not verify
//     them, but it never breaks one).
func FuzzProcess(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	spec := testSpec()
	spec.MTU[PortEgress] = 1400
	spec.ClientOnLink = []netip.Prefix{netip.MustParsePrefix("198.18.0.0/24")}
	spec.Neighbors = map[netip.Addr][6]byte{client4: macClient}
	h := newHarness(f, spec)
	f.Fuzz(func(t *testing.T, frame []byte) {
		inOK := l4ChecksumOK(frame)
		for _, rx := range []uint8{PortIngress, PortEgress} {
			h.now += 2e6 // keep the ICMP limiter open
			d := h.runOn(rx, frame)
			if d.Verdict == VerdictDrop && (d.Reason == DropNone || d.Reason >= numDropReasons) {
				t.Fatalf("drop without a reason")
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
			}
		}
	})
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
	return s
}
