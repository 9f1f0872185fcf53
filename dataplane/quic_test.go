package dataplane

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/gopacket/layers"

	"github.com/vipd/vipd/conntrack"
	"github.com/vipd/vipd/dataplane/quiclb"
)

// The QUIC-LB tests: a NAT and a DSR QUIC VIP whose three backends hold a
// server ID in each of two configurations, a plaintext one and an
// encrypted one, and client packets whose connection IDs are made by
// quiclb's encoder, as a backend would issue them.

var (
	vipQUIC4    = netip.MustParseAddr("198.18.0.104")
	vipQUICDSR4 = netip.MustParseAddr("198.18.0.105")
	quicKey     = []byte{0xfd, 0xf7, 0x26, 0xa9, 0x89, 0x3e, 0xc0, 0x5c, 0x06, 0x32, 0xd3, 0x95, 0x66, 0x80, 0xba, 0xf0}
	// The two configurations: 0 plaintext, 1 encrypted (server ID and
	// nonce of 2 + 6 octets: the four-pass network, three to decode).
	quicConfigs = []quiclb.Config{
		{Rotation: 0, ServerIDLen: 2, NonceLen: 6},
		{Rotation: 1, ServerIDLen: 2, NonceLen: 6, Key: quicKey},
	}
)

const (
	idQUIC4 = 40 + iota
	idQUICDSR4
)

// quicSID is backend i's server ID in configuration rot.
func quicSID(rot uint8, i int) string { return string([]byte{0xa0 + rot, byte(i + 1)}) }

// quicSpecOf is the QUICSpec of a QUIC VIP over bs: backend i holds
// quicSID(rot, i) in each configuration. tb may be nil (fuzzSpec): then
// it panics on error.
func quicSpecOf(tb testing.TB, bs []BackendSpec) *QUICSpec {
	fail := func(err error) {
		if tb == nil {
			panic(err)
		}
		tb.Fatal(err)
	}
	var codecs []*quiclb.Codec
	for _, c := range quicConfigs {
		codec, err := quiclb.NewCodec(c)
		if err != nil {
			fail(err)
		}
		codecs = append(codecs, codec)
	}
	dec, err := quiclb.NewDecoder(codecs...)
	if err != nil {
		fail(err)
	}
	q := &QUICSpec{Decoder: dec}
	for i, b := range bs {
		for _, c := range quicConfigs {
			q.Servers = append(q.Servers, QUICServer{Ref: b.Ref, Rotation: c.Rotation, ID: quicSID(c.Rotation, i)})
		}
	}
	return q
}

// quicVIPs are the two QUIC VIPs (tb as for quicSpecOf).
func quicVIPs(tb testing.TB) []VIPSpec {
	nat := backends("198.18.1.5", 40, 4433)
	dsr := backends("198.18.1.6", 43, 0)
	return []VIPSpec{
		{ID: idQUIC4, Name: "quic4", Addr: vipQUIC4, Port: 443, Proto: 17, Mode: ModeNAT, TableSize: 65537, Backends: nat, QUIC: quicSpecOf(tb, nat)},
		{ID: idQUICDSR4, Name: "quicdsr4", Addr: vipQUICDSR4, Port: 443, Proto: 17, Mode: ModeDSR, TableSize: 65537, EncapSrc: encap4, Backends: dsr, QUIC: quicSpecOf(tb, dsr)},
	}
}

// quicTestSpec is testSpec with the two QUIC VIPs.
func quicTestSpec(t testing.TB) *Spec {
	spec := testSpec()
	spec.VIPs = append(spec.VIPs, quicVIPs(t)...)
	return spec
}

// serverCID is a connection ID backend i issues in configuration rot.
func serverCID(t testing.TB, rot uint8, i int, nonce uint32) []byte {
	t.Helper()
	c, err := quiclb.NewCodec(quicConfigs[rot])
	if err != nil {
		t.Fatal(err)
	}
	cid := make([]byte, c.Config().CIDLen())
	n := make([]byte, c.Config().NonceLen)
	binary.BigEndian.PutUint32(n, nonce)
	var s quiclb.Scratch
	if err := c.Encode(cid, []byte(quicSID(rot, i)), n, byte(nonce), &s); err != nil {
		t.Fatal(err)
	}
	return cid
}

// shortHeader is a 1-RTT packet to dcid (the rest: stand-in ciphertext).
func shortHeader(dcid []byte) []byte {
	return append(append([]byte{0x41}, dcid...), payloadOf(40)...)
}

// longHeader is a QUIC v1 long header packet of type typ (0 Initial, 1
// 0-RTT, 2 Handshake) from scid to dcid.
func longHeader(typ byte, dcid, scid []byte) []byte {
	return longHeaderOf(1, typ, dcid, scid)
}

// longHeaderOf is longHeader for QUIC version version.
func longHeaderOf(version uint32, typ byte, dcid, scid []byte) []byte {
	b := []byte{0xc0 | typ<<4, 0, 0, 0, 0, byte(len(dcid))}
	binary.BigEndian.PutUint32(b[1:5], version)
	b = append(append(b, dcid...), byte(len(scid)))
	b = append(b, scid...)
	return append(b, payloadOf(40)...)
}

func quicPacket(t testing.TB, vip netip.Addr, sport uint16, payload []byte) []byte {
	return build(t, pk{src: client4, dst: vip, sport: sport, dport: 443, proto: layers.IPProtocolUDP, payload: payload})
}

// sentTo runs frame through h and returns the backend it went to: the
// destination of the NAT'ed packet, or of the DSR one's outer header.
func sentTo(t *testing.T, h *harness, frame []byte) netip.Addr {
	t.Helper()
	d := h.run(frame)[0]
	if d.Verdict != VerdictTX || d.Port != PortEgress {
		t.Fatalf("verdict %v port %d reason %v", d.Verdict, d.Port, d.Reason)
	}
	out := decode(t, d.frame())
	ip := layerOf[*layers.IPv4](t, out, 0)
	if ip.TTL != 64 && ip.TTL != 63 {
		t.Errorf("TTL %d", ip.TTL)
	}
	return addrOf(ip.DstIP)
}

// TestQUICRoutesByServerID: a packet whose connection ID names a backend
// goes there from any client port, in both configurations and modes,
// whereas the connection table and Maglev would spread those ports.
func TestQUICRoutesByServerID(t *testing.T) {
	spec := quicTestSpec(t)
	for _, vi := range []int{len(spec.VIPs) - 2, len(spec.VIPs) - 1} {
		vs := spec.VIPs[vi]
		for rot := range quicConfigs {
			for i, b := range vs.Backends {
				t.Run(fmt.Sprintf("%s/config%d/backend%d", vs.Name, rot, i), func(t *testing.T) {
					h := newHarness(t, spec)
					for port := uint16(20000); port < 20032; port++ {
						cid := serverCID(t, uint8(rot), i, uint32(port)*7919)
						if got := sentTo(t, h, quicPacket(t, vs.Addr, port, shortHeader(cid))); got != b.Addr {
							t.Fatalf("port %d: sent to %v, the ID names %v", port, got, b.Addr)
						}
					}
					c := h.w.Counters()
					if c.QUICRouted != 32 || c.FlowMisses != 32 {
						t.Errorf("routed %d, misses %d; want 32 of each", c.QUICRouted, c.FlowMisses)
					}
				})
			}
		}
	}
}

// TestQUICMigration: a connection begins with an Initial the fallback
// places; the server's ID then routes it, and its entry follows; the
// client moves to another port (NAT rebinding, migration) and stays.
func TestQUICMigration(t *testing.T) {
	spec := quicTestSpec(t)
	vs := spec.VIPs[len(spec.VIPs)-2]
	for i, b := range vs.Backends {
		t.Run(b.Addr.String(), func(t *testing.T) {
			h := newHarness(t, spec)
			clientCID := []byte{1, 2, 3, 4, 5, 6, 7, 8}
			// Find a client port the fallback places elsewhere than b.
			port := uint16(30000)
			for ; ; port++ {
				probe := newHarness(t, spec)
				if sentTo(t, probe, quicPacket(t, vs.Addr, port, longHeader(0, clientCID, clientCID))) != b.Addr {
					break
				}
			}
			initial := sentTo(t, h, quicPacket(t, vs.Addr, port, longHeader(0, clientCID, clientCID)))
			if h.w.Counters().QUICFallbacks[QUICFallbackClientChosen] != 1 {
				t.Fatalf("the Initial did not fall back as client-chosen: %+v", h.w.Counters().QUICFallbacks)
			}
			// The server (b, picked by the test) answers; the client's
			// Handshake and 1-RTT packets carry b's ID.
			cid := serverCID(t, 1, i, 99)
			if got := sentTo(t, h, quicPacket(t, vs.Addr, port, longHeader(2, cid, clientCID))); got != b.Addr {
				t.Fatalf("Handshake to %v, want %v (the Initial went to %v)", got, b.Addr, initial)
			}
			if h.w.Counters().QUICMoved != 1 {
				t.Errorf("QUICMoved %d, want 1: the entry must follow the ID", h.w.Counters().QUICMoved)
			}
			for newPort := port + 1; newPort < port+16; newPort++ {
				if got := sentTo(t, h, quicPacket(t, vs.Addr, newPort, shortHeader(cid))); got != b.Addr {
					t.Fatalf("after moving to port %d: to %v, want %v", newPort, got, b.Addr)
				}
			}
			// The old tuple's entry now names b: a packet on it without
			// a routable ID (a 0b111 one) stays on b.
			odd := append([]byte{0xe0}, cid[1:]...)
			if got := sentTo(t, h, quicPacket(t, vs.Addr, port, shortHeader(odd))); got != b.Addr {
				t.Errorf("the old tuple's entry sends to %v, want %v", got, b.Addr)
			}
		})
	}
}

// TestQUICFallback: every kind of unroutable packet takes the connection
// table and the scheduler, exactly as on a VIP without QUIC-LB, and is
// counted by reason.
func TestQUICFallback(t *testing.T) {
	spec := quicTestSpec(t)
	vs := spec.VIPs[len(spec.VIPs)-2]
	good := serverCID(t, 0, 2, 7)
	unknownServer := append([]byte{good[0], 0xee, 0xee}, good[3:]...)
	const draft29 = 0xff00001d
	tests := []struct {
		name    string
		payload []byte
		state   BackendState // of backend 2, which good names
		why     QUICFallback
	}{
		{"empty", nil, BackendUp, QUICFallbackNotQUIC},
		{"Initial", longHeader(0, good, good), BackendUp, QUICFallbackClientChosen},
		{"0-RTT", longHeader(1, good, good), BackendUp, QUICFallbackClientChosen},
		{"codepoint 0b111", shortHeader(append([]byte{0xe0 | good[0]&0x1f}, good[1:]...)), BackendUp, QUICFallbackFiveTuple},
		{"unknown configuration", shortHeader(append([]byte{0x60 | good[0]&0x1f}, good[1:]...)), BackendUp, QUICFallbackUnknownConfig},
		{"too short", []byte{0x41, good[0], good[1]}, BackendUp, QUICFallbackShortCID},
		{"unknown server", shortHeader(unknownServer), BackendUp, QUICFallbackUnknownServer},
		{"server down", shortHeader(good), BackendDown, QUICFallbackServerDown},
		// Versions vipd does not know: their IDs may be the client's
		// (draft-29's Initial), so one that names a draining server by
		// chance must not take a new connection there.
		{"draft-29 Initial", longHeaderOf(draft29, 0, good, good), BackendUp, QUICFallbackUnknownVersion},
		{"draft-29 Initial naming a draining server", longHeaderOf(draft29, 0, good, good), BackendDraining, QUICFallbackUnknownVersion},
		{"draft-29 Handshake", longHeaderOf(draft29, 2, good, good), BackendUp, QUICFallbackUnknownVersion},
		{"unknown version", longHeaderOf(0x1a2a3a4a, 2, good, good), BackendDraining, QUICFallbackUnknownVersion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := quicTestSpec(t)
			plain := quicTestSpec(t)
			plain.VIPs[len(plain.VIPs)-2].QUIC = nil
			if tt.state != BackendUp {
				for _, s := range []*Spec{spec, plain} {
					bs := append([]BackendSpec(nil), s.VIPs[len(s.VIPs)-2].Backends...)
					bs[2].State = tt.state
					s.VIPs[len(s.VIPs)-2].Backends = bs
				}
			}
			h, ref := newHarness(t, spec), newHarness(t, plain)
			for port := uint16(40000); port < 40016; port++ {
				f := quicPacket(t, vs.Addr, port, tt.payload)
				want := sentTo(t, ref, append([]byte(nil), f...))
				if got := sentTo(t, h, f); got != want {
					t.Fatalf("port %d: to %v; without QUIC-LB, to %v", port, got, want)
				}
			}
			c := h.w.Counters()
			if c.QUICFallbacks[tt.why] != 16 || c.QUICRouted != 0 {
				t.Errorf("fallbacks %v, routed %d; want 16 of %v", c.QUICFallbacks, c.QUICRouted, tt.why)
			}
		})
	}
}

// TestQUICDraining: a draining backend keeps its connections, so its IDs
// still route there, from new tuples too.
func TestQUICDraining(t *testing.T) {
	spec := quicTestSpec(t)
	vi := len(spec.VIPs) - 2
	bs := append([]BackendSpec(nil), spec.VIPs[vi].Backends...)
	bs[1].State = BackendDraining
	spec.VIPs[vi].Backends = bs
	h := newHarness(t, spec)
	cid := serverCID(t, 0, 1, 5)
	for port := uint16(50000); port < 50016; port++ {
		if got := sentTo(t, h, quicPacket(t, vipQUIC4, port, shortHeader(cid))); got != bs[1].Addr {
			t.Fatalf("port %d: to %v, want the draining %v", port, got, bs[1].Addr)
		}
	}
}

// TestQUICICMPFollowsSourceCID: an ICMP error quoting a server's long
// header packet (its source connection ID is the server's) goes to that
// server, though no worker holds the flow; one quoting a short header
// falls back to the table and Maglev.
func TestQUICICMPFollowsSourceCID(t *testing.T) {
	spec := quicTestSpec(t)
	for _, vi := range []int{len(spec.VIPs) - 2, len(spec.VIPs) - 1} {
		vs := spec.VIPs[vi]
		for i, b := range vs.Backends {
			t.Run(fmt.Sprintf("%s/%d", vs.Name, i), func(t *testing.T) {
				h := newHarness(t, spec)
				scid := serverCID(t, 1, i, 1234)
				f := build(t, pk{src: vs.Addr, dst: client4, sport: 443, dport: 61000, proto: layers.IPProtocolUDP, payload: longHeader(2, []byte{9, 9, 9, 9, 9, 9, 9, 9}, scid)})
				q := f[14 : 14+ipLen(f[14:])]
				d := h.run(icmpError(t, router4, vs.Addr, q))[0]
				if d.Verdict != VerdictTX {
					t.Fatalf("verdict %v reason %v", d.Verdict, d.Reason)
				}
				if got := outerDst(t, decode(t, d.frame()), vs.Mode); got != b.Addr {
					t.Errorf("error steered to %v, the quoted SCID names %v", got, b.Addr)
				}
				if c := h.w.Counters(); c.QUICICMPRouted != 1 || c.ICMPSteered != 1 {
					t.Errorf("QUICICMPRouted %d ICMPSteered %d", c.QUICICMPRouted, c.ICMPSteered)
				}
			})
		}
	}
	h := newHarness(t, spec)
	f := build(t, pk{src: vipQUIC4, dst: client4, sport: 443, dport: 61001, proto: layers.IPProtocolUDP, payload: shortHeader([]byte{9, 9, 9, 9, 9, 9, 9, 9})})
	h.run(icmpError(t, router4, vipQUIC4, f[14:14+ipLen(f[14:])]))
	if c := h.w.Counters(); c.QUICFallbacks[QUICFallbackNoSourceCID] != 1 || c.ICMPSteered != 1 {
		t.Errorf("short header quote: fallbacks %v, steered %d", c.QUICFallbacks, c.ICMPSteered)
	}
}

// TestQUICSnapshotReuse: a snapshot rebuilt for a health change keeps the
// VIP's server ID table; a new QUICSpec (a reload) replaces it; a spec
// naming a backend the VIP lacks, a configuration it lacks, an ID of the
// wrong length or one ID twice is refused.
func TestQUICSnapshotReuse(t *testing.T) {
	spec := quicTestSpec(t)
	vi := len(spec.VIPs) - 2
	s1, err := NewSnapshot(spec)
	if err != nil {
		t.Fatal(err)
	}
	spec2 := *spec
	spec2.VIPs = append([]VIPSpec(nil), spec.VIPs...)
	bs := append([]BackendSpec(nil), spec.VIPs[vi].Backends...)
	bs[0].State = BackendDown
	spec2.VIPs[vi].Backends = bs
	s2, err := NewSnapshotFrom(s1, &spec2)
	if err != nil {
		t.Fatal(err)
	}
	if s2.vips[vi].quic != s1.vips[vi].quic {
		t.Error("a health change rebuilt the server ID table")
	}
	spec3 := spec2
	spec3.VIPs = append([]VIPSpec(nil), spec2.VIPs...)
	spec3.VIPs[vi].QUIC = quicSpecOf(t, bs)
	s3, err := NewSnapshotFrom(s2, &spec3)
	if err != nil {
		t.Fatal(err)
	}
	if s3.vips[vi].quic == s2.vips[vi].quic || s3.vips[vi].quic.spec != spec3.VIPs[vi].QUIC {
		t.Error("a new QUICSpec was not taken")
	}
	bad := []func(q *QUICSpec){
		func(q *QUICSpec) { q.Servers[0].Ref = 999 },
		func(q *QUICSpec) { q.Servers[0].Rotation = 5 },
		func(q *QUICSpec) { q.Servers[0].ID = "abc" },
		func(q *QUICSpec) { q.Servers[2].ID = q.Servers[0].ID },
	}
	for i, f := range bad {
		s := quicTestSpec(t)
		q := quicSpecOf(t, s.VIPs[vi].Backends)
		f(q)
		s.VIPs[vi].QUIC = q
		if _, err := NewSnapshot(s); err == nil {
			t.Errorf("bad spec %d accepted", i)
		}
	}
	s := quicTestSpec(t)
	s.VIPs[0].QUIC = s.VIPs[vi].QUIC // a TCP VIP
	if _, err := NewSnapshot(s); err == nil {
		t.Error("QUIC-LB on a TCP VIP accepted")
	}
}

// TestQUICAllocs: the routed path allocates nothing, in each form.
func TestQUICAllocs(t *testing.T) {
	spec := quicTestSpec(t)
	for rot := range quicConfigs {
		h := newHarness(t, spec)
		frame := quicPacket(t, vipQUIC4, 20000, shortHeader(serverCID(t, uint8(rot), 1, 42)))
		buf := make([]byte, len(frame)+256)
		d := &Desc{}
		h.w.Begin(h.snap, h.now, h.emit)
		n := testing.AllocsPerRun(200, func() {
			copy(buf[128:], frame)
			*d = Desc{Buf: buf, Off: 128, Len: len(frame), RxPort: PortIngress}
			h.w.Process(d)
		})
		h.w.End(1)
		if n != 0 {
			t.Errorf("configuration %d: %v allocations per packet", rot, n)
		}
		if d.Verdict != VerdictTX || h.w.Counters().QUICRouted == 0 {
			t.Errorf("configuration %d: verdict %v, routed %d", rot, d.Verdict, h.w.Counters().QUICRouted)
		}
	}
}

// BenchmarkQUICHit is BenchmarkHit for a QUIC VIP's 1-RTT packets, with
// QUIC-LB off (the 4-tuple alone) and on in each form: plaintext, and the
// encrypted configuration (2 + 6 octets: three AES passes to decode).
// Each batch is one connection's burst (the worker's memo decodes its ID
// once), or 64 connections' packets in turn (every packet decoded).
// Compare the variants of one run: this machine is noisy.
func BenchmarkQUICHit(b *testing.B) {
	for _, tc := range []struct {
		name  string
		on    bool
		rot   uint8
		conns int // connections whose packets alternate (1: a burst of one)
	}{{"off", false, 0, 1}, {"plaintext", true, 0, 1}, {"three-pass", true, 1, 1},
		{"off/64conns", false, 0, 64}, {"plaintext/64conns", true, 0, 64}, {"three-pass/64conns", true, 1, 64}} {
		b.Run(tc.name, func(b *testing.B) {
			spec := quicTestSpec(b)
			if !tc.on {
				spec.VIPs[len(spec.VIPs)-2].QUIC = nil
			}
			h := newHarness(b, spec)
			frames := make([][]byte, tc.conns)
			for i := range frames {
				frames[i] = quicPacket(b, vipQUIC4, 1000+uint16(i), shortHeader(serverCID(b, tc.rot, i%3, 42+uint32(i))))
			}
			benchHits(b, h, frames...)
			if tc.on && h.w.Counters().QUICRouted == 0 {
				b.Fatal("no packet routed by its ID")
			}
		})
	}
}

// TestQUICMemo: the worker's memo of the last decoded ID never answers for
// another ID, nor for the same ID under another decoder (a reload with a
// new key).
func TestQUICMemo(t *testing.T) {
	spec := quicTestSpec(t)
	vi := len(spec.VIPs) - 2
	bs := spec.VIPs[vi].Backends
	h := newHarness(t, spec)
	a, b := serverCID(t, 1, 0, 1), serverCID(t, 1, 1, 1)
	for i, cid := range [][]byte{a, a, b, b, a, b, a} {
		want := bs[0].Addr
		if &cid[0] == &b[0] {
			want = bs[1].Addr
		}
		if got := sentTo(t, h, quicPacket(t, vipQUIC4, uint16(21000+i), shortHeader(cid))); got != want {
			t.Fatalf("packet %d: to %v, want %v", i, got, want)
		}
	}
	// The same ID under another key decodes to another server ID: the
	// fallback, not the memo's answer.
	other := quicTestSpec(t)
	codecs := []*quiclb.Codec{}
	for _, c := range quicConfigs {
		if c.Key != nil {
			c.Key = append([]byte(nil), c.Key...)
			c.Key[0] ^= 1
		}
		codec, err := quiclb.NewCodec(c)
		if err != nil {
			t.Fatal(err)
		}
		codecs = append(codecs, codec)
	}
	dec, err := quiclb.NewDecoder(codecs...)
	if err != nil {
		t.Fatal(err)
	}
	q := *other.VIPs[vi].QUIC
	q.Decoder = dec
	other.VIPs[vi].QUIC = &q
	h.setSpec(other)
	before := h.w.Counters().QUICRouted
	sentTo(t, h, quicPacket(t, vipQUIC4, 21000, shortHeader(a)))
	if c := h.w.Counters(); c.QUICRouted != before || c.QUICFallbacks[QUICFallbackUnknownServer] != 1 {
		t.Errorf("after the key changed: routed %d (was %d), fallbacks %v", c.QUICRouted, before, c.QUICFallbacks)
	}
}

// TestQUICFastPath: a QUIC-LB flow is handed to the fast path like any
// UDP flow (from its second packet, replaying to the pipeline's bytes); a
// client that moves to a new port reaches a worker first, which routes
// it by its ID and hands the new tuple down in turn; a tuple whose entry
// moves to the ID's server has its fast path entry retired.
func TestQUICFastPath(t *testing.T) {
	spec := quicTestSpec(t)
	for _, vs := range spec.VIPs[len(spec.VIPs)-2:] {
		t.Run(vs.Name, func(t *testing.T) {
			h := newHarness(t, spec)
			fast := &recordingFast{}
			h.w.SetFastPath(fast, false)
			cid := serverCID(t, 1, 2, 77)
			for _, port := range []uint16{45000, 45001} { // 45001: the client moved
				frame := quicPacket(t, vs.Addr, port, shortHeader(cid))
				for i := range 3 {
					h.now += 1e9
					n := len(fast.flows)
					if got := sentTo(t, h, append([]byte(nil), frame...)); got != vs.Backends[2].Addr {
						t.Fatalf("port %d packet %d: to %v", port, i, got)
					}
					offered := len(fast.flows) > n
					if offered != (i > 0) {
						t.Fatalf("port %d packet %d: offered %v", port, i, offered)
					}
					if offered {
						d := h.run(append([]byte(nil), frame...))[0]
						if f := fast.flows[len(fast.flows)-1]; !bytes.Equal(replayFast(t, frame, f), d.frame()) {
							t.Fatalf("port %d: the offered flow does not replay to the pipeline's output", port)
						}
					}
				}
			}
			// A tuple the fallback placed elsewhere, then routed by ID:
			// the entry moves and the fast path forgets the tuple.
			client := []byte{1, 2, 3, 4, 5, 6, 7, 8}
			port := uint16(46000)
			for ; ; port++ {
				probe := newHarness(t, spec)
				if sentTo(t, probe, quicPacket(t, vs.Addr, port, longHeader(0, client, client))) != vs.Backends[2].Addr {
					break
				}
			}
			h.run(quicPacket(t, vs.Addr, port, longHeader(0, client, client)))
			n := len(fast.flows)
			sentTo(t, h, quicPacket(t, vs.Addr, port, shortHeader(cid)))
			retired := false
			for _, f := range fast.flows[n:] {
				retired = retired || f.Retire && f.SrcPort == port
			}
			if !retired || h.w.Counters().QUICMoved != 1 {
				t.Errorf("moved %d, retired %v: %+v", h.w.Counters().QUICMoved, retired, fast.flows[n:])
			}
		})
	}
}

// TestQUICIPv6: the same routing for IPv6 QUIC VIPs, NAT and DSR, and for
// an ICMPv6 Packet Too Big quoting a server's long header.
func TestQUICIPv6(t *testing.T) {
	spec := testSpec()
	nat, dsr := backends("2001:2:1::5", 50, 4433), backends("2001:2:1::6", 53, 0)
	vipQUIC6, vipQUICDSR6 := netip.MustParseAddr("2001:2::104"), netip.MustParseAddr("2001:2::105")
	spec.VIPs = append(spec.VIPs,
		VIPSpec{ID: 50, Name: "quic6", Addr: vipQUIC6, Port: 443, Proto: 17, Mode: ModeNAT, TableSize: 65537, Backends: nat, QUIC: quicSpecOf(t, nat)},
		VIPSpec{ID: 51, Name: "quicdsr6", Addr: vipQUICDSR6, Port: 443, Proto: 17, Mode: ModeDSR, TableSize: 65537, EncapSrc: encap6, Backends: dsr, QUIC: quicSpecOf(t, dsr)},
	)
	for _, vs := range spec.VIPs[len(spec.VIPs)-2:] {
		for i, b := range vs.Backends {
			t.Run(fmt.Sprintf("%s/%d", vs.Name, i), func(t *testing.T) {
				h := newHarness(t, spec)
				for port := uint16(20000); port < 20016; port++ {
					f := build(t, pk{src: client6, dst: vs.Addr, sport: port, dport: 443, proto: layers.IPProtocolUDP, payload: shortHeader(serverCID(t, 1, i, uint32(port)))})
					d := h.run(f)[0]
					if d.Verdict != VerdictTX {
						t.Fatalf("verdict %v reason %v", d.Verdict, d.Reason)
					}
					if got := outerDst(t, decode(t, d.frame()), vs.Mode); got != b.Addr {
						t.Fatalf("port %d: to %v, the ID names %v", port, got, b.Addr)
					}
				}
				q := build(t, pk{src: vs.Addr, dst: client6, sport: 443, dport: 61000, proto: layers.IPProtocolUDP, payload: longHeader(2, []byte{9, 9, 9, 9, 9, 9, 9, 9}, serverCID(t, 0, i, 5))})
				d := h.run(icmpError(t, router6, vs.Addr, q[14:]))[0]
				if d.Verdict != VerdictTX {
					t.Fatalf("ICMPv6: verdict %v reason %v", d.Verdict, d.Reason)
				}
				if got := outerDst(t, decode(t, d.frame()), vs.Mode); got != b.Addr {
					t.Errorf("ICMPv6 error to %v, the quoted SCID names %v", got, b.Addr)
				}
				if c := h.w.Counters(); c.QUICRouted != 16 || c.QUICICMPRouted != 1 {
					t.Errorf("routed %d, ICMP routed %d", c.QUICRouted, c.QUICICMPRouted)
				}
			})
		}
	}
}

// TestQUICMoveRenews: a tuple whose entry names one backend, reused by a
// connection whose ID names another, moves there as a new flow: the age
// vipd conns shows is the new connection's, not the old one's.
func TestQUICMoveRenews(t *testing.T) {
	spec := quicTestSpec(t)
	vs := spec.VIPs[len(spec.VIPs)-2]
	h := newHarness(t, spec)
	const port = 31000
	old := serverCID(t, 0, 0, 1)
	if got := sentTo(t, h, quicPacket(t, vs.Addr, port, shortHeader(old))); got != vs.Backends[0].Addr {
		t.Fatalf("the first connection went to %v, its ID names %v", got, vs.Backends[0].Addr)
	}
	h.now += int64(45 * time.Second) // within the UDP timeout
	sentTo(t, h, quicPacket(t, vs.Addr, port, shortHeader(old)))
	listed := func() conntrack.Flow {
		t.Helper()
		fl, _ := h.w.ct.List(make([]conntrack.Flow, 0, 64), 0, 1<<30, nil)
		if len(fl) != 1 {
			t.Fatalf("%d flows listed, want 1", len(fl))
		}
		return fl[0]
	}
	if f := listed(); f.Age < 45 {
		t.Fatalf("the first connection's age %d, want at least 45", f.Age)
	}
	moved := serverCID(t, 0, 1, 2)
	if got := sentTo(t, h, quicPacket(t, vs.Addr, port, shortHeader(moved))); got != vs.Backends[1].Addr {
		t.Fatalf("the new connection went to %v, its ID names %v", got, vs.Backends[1].Addr)
	}
	f := listed()
	if h.w.Counters().QUICMoved != 1 || f.Age != 0 || f.State != conntrack.StateUDPNew {
		t.Errorf("moved %d; the entry's age %d, state %v: want 1, 0 (the new connection's), UDPNew", h.w.Counters().QUICMoved, f.Age, f.State)
	}
}
