package dataplane

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/google/gopacket/layers"
)

// previousSpec is testSpec with its DSR VIPs in GUE and a fourth backend
// added to each: Previous holds the three they had before. It returns the
// spec and, for the oracle, the spec as it was before the change.
func previousSpec(udp bool) (now, before *Spec) {
	before = testSpec()
	now = testSpec()
	for _, s := range []*Spec{before, now} {
		for i := range s.VIPs {
			if s.VIPs[i].Mode == ModeDSR {
				s.VIPs[i].Encap = EncapGUE
				if udp {
					s.VIPs[i].Proto = 17
				}
			}
		}
	}
	for i := range now.VIPs {
		vs := &now.VIPs[i]
		if vs.Mode != ModeDSR {
			continue
		}
		for _, b := range vs.Backends {
			vs.Previous = append(vs.Previous, PreviousBackend{Addr: b.Addr, Port: b.Port, Weight: b.Weight})
		}
		vs.PreviousUDP = udp
		add := netip.MustParseAddr("198.18.1.29")
		if vs.Addr.Is6() {
			add = netip.MustParseAddr("2001:2:1::29")
		}
		ref := uint32(40 + i)
		vs.Backends = append(append([]BackendSpec(nil), vs.Backends...), BackendSpec{Ref: ref, Addr: add, Weight: 1, State: BackendUp, MAC: macOf(ref)})
	}
	return now, before
}

// guePayload decodes a DSR frame vipd sent: the outer destination and the
// UDP payload (GUE), checking the outer header with gopacket (decode).
func guePayload(t *testing.T, frame []byte) (dst netip.Addr, payload []byte) {
	t.Helper()
	out := decode(t, frame)
	udp := layerOf[*layers.UDP](t, out, 0)
	if udp.DstPort != 6080 || udp.SrcPort < 49152 {
		t.Fatalf("UDP %d -> %d", udp.SrcPort, udp.DstPort)
	}
	if ip, ok := out.Layer(layers.LayerTypeIPv4).(*layers.IPv4); ok {
		if ip.TTL != 64 || ip.Flags&layers.IPv4DontFragment == 0 {
			t.Fatalf("outer IPv4 TTL %d flags %v", ip.TTL, ip.Flags)
		}
		dst = addrOf(ip.DstIP)
	} else {
		dst = addrOf(layerOf[*layers.IPv6](t, out, 0).DstIP)
	}
	return dst, udp.Payload
}

// hintOf reads a previous-owner hint from a GUE payload by the layout
// encap documents, written out here by hand: ok is false for variant 1
// (no hint). It returns the inner packet after the hint.
func hintOf(t *testing.T, g []byte, v6 bool) (prev netip.Addr, inner []byte, ok bool) {
	t.Helper()
	if g[0]>>6 == 1 {
		return netip.Addr{}, g, false
	}
	hlen, proto, alen := 2, byte(4), 4
	if v6 {
		hlen, proto, alen = 5, 41, 16
	}
	if g[0] != byte(hlen) || g[1] != proto || g[2] != 0 || g[3] != 0 || g[4] != 'v' || g[5] != 'p' || g[6] != 1 || g[7] != 0 {
		t.Fatalf("GUE header % x", g[:8])
	}
	prev, _ = netip.AddrFromSlice(g[8 : 8+alen])
	return prev, g[4+4*hlen:], true
}

// TestPreviousOwnerHints: after a fourth backend joined a GUE DSR VIP, a
// flow that misses the connection table mid-stream (TCP without SYN)
// carries a hint exactly when the previous table (the oracle: a snapshot
// of the spec before the change) gives it another backend, to the
// current owner, naming the previous one; the entry keeps the hint for
// later packets; a SYN never gets one; UDP only when the VIP says so; and
// the hint goes with Previous.
func TestPreviousOwnerHints(t *testing.T) {
	for _, tc := range []struct {
		name string
		udp  bool
	}{{"tcp", false}, {"udp", true}} {
		t.Run(tc.name, func(t *testing.T) {
			spec, before := previousSpec(tc.udp)
			old, err := NewSnapshot(before)
			if err != nil {
				t.Fatal(err)
			}
			h := newHarness(t, spec)
			proto, flags := layers.IPProtocolTCP, "A"
			if tc.udp {
				proto, flags = layers.IPProtocolUDP, ""
			}
			hinted, plain := 0, 0
			for _, fam := range []struct{ client, vip netip.Addr }{{client4, vipDSR4}, {client6, vipDSR6}} {
				for fl := uint16(0); fl < 200; fl++ {
					p := pk{src: fam.client, dst: fam.vip, sport: 30000 + fl, dport: 80, proto: proto, flags: flags, payload: []byte("mid-stream")}
					cur, ok1 := h.snap.Where(fam.vip, uint8(proto), 80, netip.AddrPortFrom(fam.client, p.sport))
					was, ok2 := old.Where(fam.vip, uint8(proto), 80, netip.AddrPortFrom(fam.client, p.sport))
					if !ok1 || !ok2 {
						t.Fatal("Where found no backend")
					}
					curAddr, wasAddr := backendAddr(t, spec, cur), backendAddr(t, before, was)
					for pass := 0; pass < 2; pass++ { // a miss, then a hit
						in := build(t, p)
						inner := append([]byte(nil), in[14:14+ipLen(in[14:])]...)
						d := h.run(in)[0]
						if d.Verdict != VerdictTX {
							t.Fatalf("%v: verdict %v %v", p, d.Verdict, d.Reason)
						}
						dst, g := guePayload(t, d.frame())
						if dst != curAddr {
							t.Fatalf("flow %d sent to %v, the current owner is %v", fl, dst, curAddr)
						}
						prev, got, ok := hintOf(t, g, fam.vip.Is6())
						if want := wasAddr != curAddr; ok != want {
							t.Fatalf("flow %d pass %d (owner %v, previous %v): hint %v, want %v", fl, pass, curAddr, wasAddr, ok, want)
						}
						if ok && prev != wasAddr {
							t.Fatalf("flow %d: hint %v, previous owner %v", fl, prev, wasAddr)
						}
						if !bytes.Equal(got, inner) {
							t.Fatalf("flow %d: the inner packet changed", fl)
						}
						if pass == 0 && ok {
							hinted++
						} else if pass == 0 {
							plain++
						}
					}
				}
			}
			// Three backends to four moves about a quarter of the flows.
			if hinted < 50 || plain < 200 {
				t.Fatalf("%d flows hinted, %d not: the test does not cover both", hinted, plain)
			}
			if c := h.w.Counters(); c.HintedFlows != uint64(hinted) || c.HintedPackets != 2*uint64(hinted) {
				t.Errorf("counters: %d flows, %d packets hinted; want %d, %d", c.HintedFlows, c.HintedPackets, hinted, 2*hinted)
			}
			// A hinted flow's tuple reused by a new connection (a SYN on
			// the entry): the new connection starts here, without a hint,
			// and keeps none.
			for fl := uint16(0); fl < 200; fl++ {
				for i, f := range []string{"S", "A"} {
					if tc.udp {
						break
					}
					d := h.run(build(t, pk{src: client4, dst: vipDSR4, sport: 30000 + fl, dport: 80, proto: proto, flags: f}))[0]
					if _, g := guePayload(t, d.frame()); func() bool { _, _, ok := hintOf(t, g, false); return ok }() {
						t.Fatalf("flow %d reused, packet %d (%s): a hint", fl, i, f)
					}
				}
			}
			// Previous expired: the entries stay, the hints go.
			spec2, _ := previousSpec(tc.udp)
			for i := range spec2.VIPs {
				spec2.VIPs[i].Previous = nil
			}
			h.setSpec(spec2)
			for fl := uint16(0); fl < 200; fl++ {
				d := h.run(build(t, pk{src: client4, dst: vipDSR4, sport: 30000 + fl, dport: 80, proto: proto, flags: flags}))[0]
				_, g := guePayload(t, d.frame())
				if _, _, ok := hintOf(t, g, false); ok {
					t.Fatalf("flow %d: a hint without a previous table", fl)
				}
			}
		})
	}
}

// TestPreviousOwnerNotOnStart: a SYN, and a UDP packet of a VIP without
// PreviousUDP, never carry a hint, nor do the flow's later packets.
func TestPreviousOwnerNotOnStart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		udp   bool
		first string
	}{{"syn", false, "S"}, {"udp off", true, ""}} {
		t.Run(tc.name, func(t *testing.T) {
			spec, _ := previousSpec(tc.udp)
			proto := layers.IPProtocolTCP
			if tc.udp {
				proto = layers.IPProtocolUDP
				for i := range spec.VIPs {
					spec.VIPs[i].PreviousUDP = false
				}
			}
			h := newHarness(t, spec)
			for fl := uint16(0); fl < 200; fl++ {
				for i, f := range []string{tc.first, "A"} {
					if tc.udp {
						f = ""
					}
					d := h.run(build(t, pk{src: client4, dst: vipDSR4, sport: 30000 + fl, dport: 80, proto: proto, flags: f}))[0]
					_, g := guePayload(t, d.frame())
					if _, _, ok := hintOf(t, g, false); ok {
						t.Fatalf("flow %d packet %d (%q): a hint", fl, i, f)
					}
				}
			}
			if c := h.w.Counters(); c.HintedFlows != 0 || c.HintedPackets != 0 {
				t.Errorf("counters: %d flows, %d packets hinted", c.HintedFlows, c.HintedPackets)
			}
		})
	}
}

// TestPreviousOwnerSpecErrors: hints need a GUE DSR VIP and previous
// backends of its family.
func TestPreviousOwnerSpecErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		vip  int
		set  func(vs *VIPSpec)
	}{
		{"ipip", 1, func(vs *VIPSpec) { vs.Encap = EncapIPIP }},
		{"nat", 0, func(vs *VIPSpec) {}},
		{"family", 1, func(vs *VIPSpec) { vs.Previous[0].Addr = netip.MustParseAddr("2001:2:1::9") }},
		{"weights", 1, func(vs *VIPSpec) {
			for i := range vs.Previous {
				vs.Previous[i].Weight = 0
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, _ := previousSpec(false)
			vs := &spec.VIPs[tc.vip]
			if vs.Previous == nil {
				vs.Previous = []PreviousBackend{{Addr: vs.Backends[0].Addr, Weight: 1}}
			}
			tc.set(vs)
			if _, err := NewSnapshot(spec); err == nil {
				t.Fatal("NewSnapshot accepted it")
			} else {
				t.Log(err)
			}
		})
	}
}

// TestPreviousOwnerReuse: a snapshot built from the last one with the
// same Previous reuses its previous table rather than building it again
// (a health event must not cost a Maglev build per VIP with hints).
func TestPreviousOwnerReuse(t *testing.T) {
	spec, _ := previousSpec(false)
	s1, err := NewSnapshot(spec)
	if err != nil {
		t.Fatal(err)
	}
	spec2, _ := previousSpec(false)
	spec2.VIPs[1].Backends[0].State = BackendDown // a health event
	s2, err := NewSnapshotFrom(s1, spec2)
	if err != nil {
		t.Fatal(err)
	}
	if s1.vips[1].prev == nil || s2.vips[1].prev != s1.vips[1].prev {
		t.Errorf("previous table rebuilt: %p then %p", s1.vips[1].prev, s2.vips[1].prev)
	}
}
