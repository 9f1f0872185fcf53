package dataplane

import (
	"bytes"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/google/gopacket/layers"
	"github.com/vipd/vipd/dataplane/quiclb"
)

// The property test of the fast path's generation (fastStateHash): a
// fast path entry replays a worker's decision for an established flow's
// packets (client packets past the handshake, NAT replies) until the
// generation moves. So whenever a new snapshot makes a worker forward
// such a packet otherwise, its generation must differ from the old one's.

// genSpec is the property test's box: every kind of VIP of fastSpec and
// the two QUIC-LB VIPs, with small Maglev tables (the test builds a few
// hundred snapshots).
func genSpec(t testing.TB) *Spec {
	spec := fastSpec()
	// quicVIPs's references and addresses are some of fastSpec's.
	for i, vs := range quicVIPs(t) {
		vs.Backends = backends([]string{"198.18.1.9", "198.18.1.8"}[i], uint32(60+3*i), vs.Backends[0].Port)
		vs.QUIC = quicSpecOf(t, vs.Backends)
		spec.VIPs = append(spec.VIPs, vs)
	}
	for i := range spec.VIPs {
		spec.VIPs[i].TableSize = 251
	}
	return spec
}

// quicKeyAlt is another key for QUIC-LB configuration 1: a mutation of
// the property test, and the key some of its probes' IDs are made with,
// so that the mutation routes them otherwise.
var quicKeyAlt = []byte{0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef}

// genFlow is one established flow of the property test: the packets that
// set it up, and the probes whose forwarding is compared.
type genFlow struct {
	name   string
	setup  [][]byte
	probe  []byte // a client packet past the handshake
	natVIP bool   // a NAT VIP: the backend's reply is probed too
	proto  layers.IPProtocol
	client netip.Addr
	sport  uint16
}

// genFlows returns the flows of the property test: four per VIP of spec,
// and for the QUIC VIPs one per backend and configuration, with IDs made
// with configuration 1's key and with quicKeyAlt.
func genFlows(t *testing.T, spec *Spec) []genFlow {
	var out []genFlow
	for _, vs := range spec.VIPs {
		client := client4
		if vs.Addr.Is6() {
			client = client6
		}
		dport := vs.Port
		if dport == 0 {
			dport = 80
		}
		proto := layers.IPProtocol(vs.Proto)
		mk := func(sport uint16, flags string, payload []byte) []byte {
			return build(t, pk{src: client, dst: vs.Addr, sport: sport, dport: dport, proto: proto, flags: flags, payload: payload})
		}
		nat := vs.Mode == ModeNAT
		switch {
		case vs.QUIC != nil:
			sport := uint16(41000)
			for i := range vs.Backends {
				for _, c := range []quiclb.Config{quicConfigs[0], quicConfigs[1], {Rotation: 1, ServerIDLen: 2, NonceLen: 6, Key: quicKeyAlt}} {
					codec, err := quiclb.NewCodec(c)
					if err != nil {
						t.Fatal(err)
					}
					cid := make([]byte, c.CIDLen())
					var s quiclb.Scratch
					if err := codec.Encode(cid, []byte(quicSID(c.Rotation, i)), []byte{1, 2, 3, 4, 5, byte(sport)}, 0x11, &s); err != nil {
						t.Fatal(err)
					}
					f := mk(sport, "", shortHeader(cid))
					out = append(out, genFlow{fmt.Sprintf("%s:%d", vs.Name, sport), [][]byte{f}, f, nat, proto, client, sport})
					sport++
				}
			}
		case vs.Proto == 17:
			for sport := uint16(42000); sport < 42004; sport++ {
				out = append(out, genFlow{fmt.Sprintf("%s:%d", vs.Name, sport), [][]byte{mk(sport, "", []byte("ask"))}, mk(sport, "", []byte("more")), nat, proto, client, sport})
			}
		default:
			for sport := uint16(43000); sport < 43004; sport++ {
				out = append(out, genFlow{fmt.Sprintf("%s:%d", vs.Name, sport), [][]byte{mk(sport, "S", nil), mk(sport, "A", nil)},
					mk(sport, "PA", []byte("data")), nat, proto, client, sport})
			}
		}
	}
	return out
}

// genOutcome is what a worker did with a probe.
type genOutcome struct {
	what    string // the flow, and which of its probes
	verdict Verdict
	port    uint8
	reason  DropReason
	frame   []byte
	to      netip.Addr // of the frame sent (DSR: the outer header's)
}

func (o genOutcome) String() string {
	if o.verdict == VerdictTX {
		return fmt.Sprintf("sent to %v on port %d (%d bytes)", o.to, o.port, len(o.frame))
	}
	return fmt.Sprintf("%v %v", o.verdict, o.reason)
}

func (o genOutcome) same(p genOutcome) bool {
	return o.verdict == p.verdict && o.port == p.port && bytes.Equal(o.frame, p.frame)
}

// genRun sets up flows on a fresh worker over snap0, then returns the
// outcomes of their probes under snap0, under snap0 again (to show that
// probing changes nothing), and under snap1.
func genRun(t *testing.T, snap0, snap1 *Snapshot, flows []genFlow) (before, again, after []genOutcome) {
	h := newHarnessOf(t, snap0, 1<<12)
	var replies [][]byte
	for _, f := range flows {
		var d *Desc
		for _, p := range f.setup {
			d = h.runOn(PortIngress, p)
		}
		if d.Verdict != VerdictTX {
			t.Fatalf("%s: set up: %v %v", f.name, d.Verdict, d.Reason)
		}
		if !f.natVIP {
			replies = append(replies, nil)
			continue
		}
		// The backend's reply, from where the flow was sent.
		in, err := ipOf(decode(t, d.frame()))
		if err != nil {
			t.Fatal(err)
		}
		flags := ""
		if f.proto == layers.IPProtocolTCP {
			flags = "A"
		}
		replies = append(replies, build(t, pk{src: in.dst, dst: f.client, sport: in.dport, dport: f.sport, proto: f.proto, flags: flags,
			payload: []byte("answer"), srcMAC: macOf(1)}))
	}
	probe := func() []genOutcome {
		var out []genOutcome
		for i, f := range flows {
			for k, fr := range [][]byte{f.probe, replies[i]} {
				if fr == nil {
					continue
				}
				o := genOutcome{what: f.name + " client packet"}
				port := PortIngress
				if k == 1 {
					o.what, port = f.name+" reply", PortEgress
				}
				d := h.runOn(port, slices.Clone(fr))
				o.verdict, o.port, o.reason, o.frame = d.Verdict, d.Port, d.Reason, slices.Clone(d.frame())
				if d.Verdict == VerdictTX {
					in, err := ipOf(decode(t, o.frame))
					if err != nil {
						t.Fatalf("%s: %v", o.what, err)
					}
					o.to = in.dst
				}
				out = append(out, o)
			}
		}
		return out
	}
	before = probe()
	again = probe()
	h.snap = snap1
	after = probe()
	return before, again, after
}

// genMutation changes one field of a Spec (or of a VIP's, a backend's, or
// a QUICSpec's) in place. It may make the spec invalid for some VIPs:
// then NewSnapshotFrom refuses it and the case is skipped.
type genMutation struct {
	field string // the field's name, as reflect gives it
	name  string
	vip   bool // applied to each VIP in turn (vi); else to the Spec
	do    func(t *testing.T, s *Spec, vi int)
}

func genMutations() []genMutation {
	v := func(s *Spec, vi int) *VIPSpec { return &s.VIPs[vi] }
	b0 := func(s *Spec, vi int) *BackendSpec {
		vs := v(s, vi)
		vs.Backends = slices.Clone(vs.Backends)
		return &vs.Backends[0]
	}
	other := func(a netip.Addr) netip.Addr {
		if a.Is4() {
			b := a.As4()
			b[3] += 100
			return netip.AddrFrom4(b)
		}
		b := a.As16()
		b[15] += 0x50
		return netip.AddrFrom16(b)
	}
	quic := func(t *testing.T, s *Spec, vi int) *QUICSpec {
		if s.VIPs[vi].QUIC == nil {
			return nil
		}
		q := *s.VIPs[vi].QUIC
		s.VIPs[vi].QUIC = &q
		q.Servers = slices.Clone(q.Servers)
		return &q
	}
	decoder := func(t *testing.T, cs ...quiclb.Config) *quiclb.Decoder {
		var codecs []*quiclb.Codec
		for _, c := range cs {
			codec, err := quiclb.NewCodec(c)
			if err != nil {
				t.Fatal(err)
			}
			codecs = append(codecs, codec)
		}
		d, err := quiclb.NewDecoder(codecs...)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	return []genMutation{
		// The box.
		{"Seed", "seed", false, func(_ *testing.T, s *Spec, _ int) { s.Seed++ }},
		{"TwoArmed", "one-armed", false, func(_ *testing.T, s *Spec, _ int) { s.TwoArmed = false }},
		{"MAC", "egress MAC", false, func(_ *testing.T, s *Spec, _ int) { s.MAC[PortEgress][5]++ }},
		{"MAC", "ingress MAC", false, func(_ *testing.T, s *Spec, _ int) { s.MAC[PortIngress][5]++ }},
		{"MTU", "egress MTU", false, func(_ *testing.T, s *Spec, _ int) { s.MTU[PortEgress] = 1280 }},
		{"MTU", "ingress MTU", false, func(_ *testing.T, s *Spec, _ int) { s.MTU[PortIngress] = 1280 }},
		{"Addr4", "IPv4 addresses", false, func(_ *testing.T, s *Spec, _ int) { s.Addr4[PortIngress] = netip.MustParseAddr("198.18.0.250") }},
		{"Addr6", "IPv6 addresses", false, func(_ *testing.T, s *Spec, _ int) { s.Addr6[PortIngress] = netip.MustParseAddr("2001:2::250") }},
		{"ClientGateway4", "IPv4 gateway", false, func(_ *testing.T, s *Spec, _ int) { s.ClientGateway4[5]++ }},
		{"ClientGateway6", "IPv6 gateway", false, func(_ *testing.T, s *Spec, _ int) { s.ClientGateway6[5]++ }},
		{"ClientOnLink", "clients on link", false, func(_ *testing.T, s *Spec, _ int) {
			s.ClientOnLink = []netip.Prefix{netip.PrefixFrom(client4, 24), netip.PrefixFrom(client6, 64)}
		}},
		{"Neighbors", "clients' neighbours", false, func(_ *testing.T, s *Spec, _ int) {
			s.ClientOnLink = []netip.Prefix{netip.PrefixFrom(client4, 24), netip.PrefixFrom(client6, 64)}
			s.Neighbors = map[netip.Addr][6]byte{client4: {2, 9, 9, 9, 9, 9}, client6: {2, 8, 8, 8, 8, 8}}
		}},
		{"Local", "box addresses", false, func(_ *testing.T, s *Spec, _ int) { s.Local = []netip.Addr{netip.MustParseAddr("198.18.0.251")} }},
		{"VIPs", "a VIP removed", true, func(_ *testing.T, s *Spec, vi int) { s.VIPs = slices.Delete(slices.Clone(s.VIPs), vi, vi+1) }},

		// A VIP.
		{"ID", "ID", true, func(_ *testing.T, s *Spec, vi int) { v(s, vi).ID += 200 }},
		{"Name", "name", true, func(_ *testing.T, s *Spec, vi int) { v(s, vi).Name += "-renamed" }},
		{"Addr", "address", true, func(_ *testing.T, s *Spec, vi int) { v(s, vi).Addr = other(v(s, vi).Addr) }},
		{"Port", "port", true, func(_ *testing.T, s *Spec, vi int) { v(s, vi).Port++ }},
		{"Proto", "protocol", true, func(_ *testing.T, s *Spec, vi int) { v(s, vi).Proto = 23 - v(s, vi).Proto }},
		{"Mode", "mode", true, func(_ *testing.T, s *Spec, vi int) {
			vs := v(s, vi)
			if vs.Mode == ModeNAT {
				vs.Mode, vs.EncapSrc = ModeDSR, encap4
				if vs.Addr.Is6() {
					vs.EncapSrc = encap6
				}
				vs.Backends = slices.Clone(vs.Backends)
				for j := range vs.Backends {
					vs.Backends[j].Port = 0
				}
			} else {
				vs.Mode, vs.EncapSrc, vs.Encap, vs.GUEPort, vs.EncapSrcPrefix = ModeNAT, netip.Addr{}, EncapIPIP, 0, netip.Prefix{}
			}
		}},
		{"SrcHash", "source hash", true, func(_ *testing.T, s *Spec, vi int) { v(s, vi).SrcHash = !v(s, vi).SrcHash }},
		{"TableSize", "table size", true, func(_ *testing.T, s *Spec, vi int) { v(s, vi).TableSize = 257 }},
		{"EncapSrc", "encapsulation source", true, func(_ *testing.T, s *Spec, vi int) {
			if vs := v(s, vi); vs.Mode == ModeDSR {
				vs.EncapSrc, vs.EncapSrcPrefix = other(vs.EncapSrc), netip.Prefix{}
			}
		}},
		{"Encap", "encapsulation", true, func(_ *testing.T, s *Spec, vi int) {
			if vs := v(s, vi); vs.Mode == ModeDSR {
				if vs.Encap == EncapGUE {
					vs.Encap, vs.GUEPort = EncapIPIP, 0
				} else {
					vs.Encap, vs.EncapSrcPrefix = EncapGUE, netip.Prefix{}
				}
			}
		}},
		{"GUEPort", "GUE port", true, func(_ *testing.T, s *Spec, vi int) {
			if vs := v(s, vi); vs.Encap == EncapGUE {
				vs.GUEPort = 7778
			}
		}},
		{"EncapSrcPrefix", "encapsulation source prefix", true, func(_ *testing.T, s *Spec, vi int) {
			vs := v(s, vi)
			switch {
			case vs.Mode != ModeDSR || vs.Encap == EncapGUE:
			case vs.EncapSrcPrefix.IsValid():
				vs.EncapSrcPrefix = netip.PrefixFrom(vs.EncapSrcPrefix.Addr(), vs.EncapSrcPrefix.Bits()+2).Masked()
			default:
				vs.EncapSrcPrefix = netip.PrefixFrom(vs.EncapSrc, vs.EncapSrc.BitLen()-8).Masked()
			}
		}},
		{"Backends", "a backend removed", true, func(_ *testing.T, s *Spec, vi int) {
			vs := v(s, vi)
			gone := vs.Backends[0].Ref
			vs.Backends = slices.Clone(vs.Backends[1:])
			if vs.QUIC != nil {
				q := *vs.QUIC
				q.Servers = slices.DeleteFunc(slices.Clone(q.Servers), func(sv QUICServer) bool { return sv.Ref == gone })
				vs.QUIC = &q
			}
		}},
		{"Backends", "a backend added", true, func(_ *testing.T, s *Spec, vi int) {
			vs := v(s, vi)
			nb := vs.Backends[0]
			nb.Ref, nb.Addr, nb.MAC = 99, other(nb.Addr), macOf(99)
			vs.Backends = append(slices.Clone(vs.Backends), nb)
		}},
		{"Backends", "backends reordered", true, func(_ *testing.T, s *Spec, vi int) {
			vs := v(s, vi)
			vs.Backends = slices.Clone(vs.Backends)
			slices.Reverse(vs.Backends)
		}},

		// A backend.
		{"Ref", "backend ref", true, func(_ *testing.T, s *Spec, vi int) { b0(s, vi).Ref = 98 }},
		{"Addr", "backend address", true, func(_ *testing.T, s *Spec, vi int) { b := b0(s, vi); b.Addr = other(b.Addr) }},
		{"Port", "backend port", true, func(_ *testing.T, s *Spec, vi int) { b0(s, vi).Port += 3 }},
		{"Weight", "backend weight", true, func(_ *testing.T, s *Spec, vi int) { b0(s, vi).Weight = 5 }},
		{"Weight", "backend weight 0", true, func(_ *testing.T, s *Spec, vi int) { b0(s, vi).Weight = 0 }},
		{"State", "backend draining", true, func(_ *testing.T, s *Spec, vi int) { b0(s, vi).State = BackendDraining }},
		{"State", "backend down", true, func(_ *testing.T, s *Spec, vi int) { b0(s, vi).State = BackendDown }},
		{"MAC", "backend MAC", true, func(_ *testing.T, s *Spec, vi int) { b0(s, vi).MAC[5] ^= 0x80 }},
		{"Epoch", "backend epoch", true, func(_ *testing.T, s *Spec, vi int) { b0(s, vi).Epoch++ }},

		// A VIP's scheduling and hints.
		{"Scheduler", "scheduler", true, func(_ *testing.T, s *Spec, vi int) { v(s, vi).Scheduler = SchedLC }},
		{"LoadBound", "load bound", true, func(_ *testing.T, s *Spec, vi int) {
			v(s, vi).Scheduler, v(s, vi).LoadBound = SchedMaglevBounded, 1.5
		}},
		{"Previous", "previous set", true, func(_ *testing.T, s *Spec, vi int) {
			vs := v(s, vi)
			vs.Previous = nil
			for _, b := range vs.Backends[1:] {
				vs.Previous = append(vs.Previous, PreviousBackend{Addr: b.Addr, Port: b.Port, Weight: 1})
			}
		}},
		{"PreviousUDP", "previous set for UDP", true, func(_ *testing.T, s *Spec, vi int) {
			vs := v(s, vi)
			vs.Previous = []PreviousBackend{{Addr: vs.Backends[1].Addr, Port: vs.Backends[1].Port, Weight: 1}}
			vs.PreviousUDP = true
		}},

		// A VIP's QUIC-LB routing.
		{"QUIC", "QUIC-LB off", true, func(_ *testing.T, s *Spec, vi int) { v(s, vi).QUIC = nil }},
		{"Decoder", "QUIC-LB key", true, func(t *testing.T, s *Spec, vi int) {
			if q := quic(t, s, vi); q != nil {
				q.Decoder = decoder(t, quicConfigs[0], quiclb.Config{Rotation: 1, ServerIDLen: 2, NonceLen: 6, Key: quicKeyAlt})
			}
		}},
		{"Decoder", "QUIC-LB configuration removed", true, func(t *testing.T, s *Spec, vi int) {
			if q := quic(t, s, vi); q != nil {
				q.Decoder = decoder(t, quicConfigs[0])
				q.Servers = slices.DeleteFunc(q.Servers, func(sv QUICServer) bool { return sv.Rotation == 1 })
			}
		}},
		{"Servers", "QUIC-LB server IDs swapped", true, func(t *testing.T, s *Spec, vi int) {
			if q := quic(t, s, vi); q != nil {
				for k := range q.Servers {
					switch q.Servers[k].Ref {
					case s.VIPs[vi].Backends[0].Ref:
						q.Servers[k].Ref = s.VIPs[vi].Backends[1].Ref
					case s.VIPs[vi].Backends[1].Ref:
						q.Servers[k].Ref = s.VIPs[vi].Backends[0].Ref
					}
				}
			}
		}},
		{"Servers", "QUIC-LB server ID removed", true, func(t *testing.T, s *Spec, vi int) {
			if q := quic(t, s, vi); q != nil {
				q.Servers = q.Servers[1:]
			}
		}},
		{"ID", "QUIC-LB server ID changed", true, func(t *testing.T, s *Spec, vi int) {
			if q := quic(t, s, vi); q != nil {
				q.Servers[0].ID = "\xee\xee"
			}
		}},
		{"Rotation", "QUIC-LB server ID's configuration", true, func(t *testing.T, s *Spec, vi int) {
			if q := quic(t, s, vi); q != nil {
				for k := range q.Servers {
					if q.Servers[k].Rotation == 0 {
						q.Servers[k].Rotation, q.Servers[k].ID = 1, "\xdd"+q.Servers[k].ID[1:]
						break
					}
				}
			}
		}},
	}
}

// TestFastGenerationProperty changes each field of the Spec, of each VIP's
// VIPSpec, of its first BackendSpec and of its QUICSpec in turn, and
// checks that the generation moves whenever the change makes a worker
// forward some established flow's packet (or a NAT reply) otherwise, so
// that the fast path's entries, which replay the old decision, retire.
// A spec rebuilt alike (a reload that changes nothing: new slices, a new
// QUICSpec) keeps the generation. Every field of those types must have a
// mutation here: a new field fails the test until it has one.
func TestFastGenerationProperty(t *testing.T) {
	base := genSpec(t)
	snap0, err := NewSnapshot(base)
	if err != nil {
		t.Fatal(err)
	}
	flows := genFlows(t, base)
	muts := genMutations()

	covered := map[string]bool{}
	for _, m := range muts {
		covered[m.field] = true
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[Spec](), reflect.TypeFor[Host](), reflect.TypeFor[VIPSpec](), reflect.TypeFor[BackendSpec](),
		reflect.TypeFor[QUICSpec](), reflect.TypeFor[QUICServer]()} {
		for f := range typ.Fields() {
			// An embedded struct's fields are checked as its own type's.
			if !f.Anonymous && !covered[f.Name] {
				t.Errorf("%s.%s has no mutation in genMutations: add one", typ.Name(), f.Name)
			}
		}
	}

	t.Run("unchanged", func(t *testing.T) {
		snap1, err := NewSnapshotFrom(snap0, genSpec(t))
		if err != nil {
			t.Fatal(err)
		}
		if snap1.Generation() != snap0.Generation() {
			t.Errorf("the same spec, rebuilt, moves the generation from %d to %d: every reload would retire the fast path", snap0.Generation(), snap1.Generation())
		}
	})

	applied, decided, movedBy := map[string]int{}, map[string]int{}, map[string]int{}
	for _, m := range muts {
		vips := []int{-1}
		if m.vip {
			vips = vips[:0]
			for i := range base.VIPs {
				vips = append(vips, i)
			}
		}
		for _, vi := range vips {
			name := m.name
			if vi >= 0 {
				name = base.VIPs[vi].Name + "/" + m.name
			}
			spec := genSpec(t)
			m.do(t, spec, vi)
			snap1, err := NewSnapshotFrom(snap0, spec)
			if err != nil {
				continue // not a valid change of this VIP
			}
			applied[m.name]++
			before, again, after := genRun(t, snap0, snap1, flows)
			if !slices.EqualFunc(before, again, genOutcome.same) {
				t.Fatalf("%s: probing the same snapshot twice forwards otherwise: the test's probes are not idempotent", name)
			}
			moved := snap1.Generation() != snap0.Generation()
			if moved {
				movedBy[m.name]++
			}
			for k := range before {
				a, b := before[k], after[k]
				if a.same(b) {
					continue
				}
				decided[m.name]++
				if !moved {
					t.Errorf("%s: the %s is forwarded otherwise (%v, then %v) but the generation stays %d: the fast path would replay the old decision",
						name, a.what, a, b, snap0.Generation())
				}
				break
			}
		}
	}
	for _, m := range muts {
		if applied[m.name] == 0 {
			t.Errorf("mutation %q (%s) applied to no VIP: the test does not exercise it", m.name, m.field)
		}
		t.Logf("%-40s applied %2d, changed a decision %2d, moved the generation %2d", m.name, applied[m.name], decided[m.name], movedBy[m.name])
	}
}
