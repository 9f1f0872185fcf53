package dataplane

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/gopacket/layers"
	"github.com/vipd/vipd/conntrack"
)

// The tests in this file follow a flow through the fast path's entry's
// life: how long it serves (Brief) and when it stops (Retire).

// simFast is a FastPath that forwards as the kernel's would: a flow's
// entry serves, from the moment the worker flushes it, a second when it
// is Brief, refresh otherwise, and not at all once retired (the
// lifetimes xdpprog.FlowWriter gives the program's entries).
type simFast struct {
	refresh int64 // ns
	now     *int64
	pending []FastFlow
	until   map[fastKey]int64
}

type fastKey struct {
	src, dst         netip.Addr
	sport, dport     uint16
	proto            uint8
	ipv6, clientSide bool
}

func keyOfFlow(f *FastFlow) fastKey {
	k := fastKey{sport: f.SrcPort, dport: f.DstPort, proto: f.Proto, ipv6: f.V6, clientSide: !f.SNAT}
	if f.V6 {
		k.src, k.dst = netip.AddrFrom16(f.Src6), netip.AddrFrom16(f.Dst6)
	} else {
		k.src, k.dst = netip.AddrFrom4(f.Src), netip.AddrFrom4(f.Dst)
	}
	return k
}

func (s *simFast) Offer(f *FastFlow) bool { s.pending = append(s.pending, *f); return true }
func (s *simFast) IPv6() bool             { return true }
func (s *simFast) Forwarded(uint32) (uint64, uint64, bool) {
	return 0, 0, false
}

func (s *simFast) Flush() error {
	for i := range s.pending {
		f := &s.pending[i]
		life := s.refresh
		switch {
		case f.Retire:
			life = 0
		case f.Brief:
			life = min(life, int64(time.Second))
		}
		s.until[keyOfFlow(f)] = *s.now + life
	}
	s.pending = s.pending[:0]
	return nil
}

// takes reports whether the entry of p's flow forwards p now: a client's
// packet without SYN, FIN or RST (those always go to the workers).
func (s *simFast) takes(p pk) bool {
	if p.proto != layers.IPProtocolUDP && p.flags != "A" && p.flags != "PA" {
		return false
	}
	k := fastKey{src: p.src, dst: p.dst, sport: p.sport, dport: p.dport, proto: 6, ipv6: p.src.Is6(), clientSide: true}
	if p.proto == layers.IPProtocolUDP {
		k.proto = 17
	}
	return *s.now < s.until[k]
}

// onlyEntry returns the one flow of the worker's connection table.
func onlyEntry(t *testing.T, h *harness) conntrack.Entry {
	t.Helper()
	var es []conntrack.Entry
	h.w.ct.ForEach(func(e conntrack.Entry) bool { es = append(es, e); return true })
	if len(es) != 1 {
		t.Fatalf("%d flows in the table, want 1", len(es))
	}
	return es[0]
}

// TestFastProofFollowsHandshake sends a flow's packets every 100 ms for
// 6 s, through a worker alone and through a worker with a fast path
// (fast_path_refresh 5 s) that forwards what its entries cover, and
// records when the flow is proven (conntrack: no longer evictable to make
// room for a new flow). With the fast path it must be proven within a
// tick of the worker alone: a flow the fast path carries and a flood
// evicts before it is proven is re-picked when its entry expires, which
// moves it if the backends changed meanwhile. Before Brief entries the
// worker saw such a flow once per refresh: proven after two of them
// (over 10 s).
func TestFastProofFollowsHandshake(t *testing.T) {
	udp := layers.IPProtocolUDP
	for _, tc := range []struct {
		name  string
		first pk // then the same with flags "PA" (TCP)
	}{
		{"nat4", pk{src: client4, dst: vipNAT4, sport: 41000, dport: 80, flags: "S"}},
		{"dsr4", pk{src: client4, dst: vipDSR4, sport: 41000, dport: 80, flags: "S"}},
		{"udp4", pk{src: client4, dst: vipUDP4, sport: 41000, dport: 7000, proto: udp, payload: []byte("q")}},
		{"nat6", pk{src: client6, dst: vipNAT6, sport: 41000, dport: 80, flags: "S"}},
		{"dsr6", pk{src: client6, dst: vipDSR6, sport: 41000, dport: 80, flags: "S"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			provenAt := func(fast bool) (at time.Duration, viaFast, offers, brief int) {
				h := newHarness(t, fastSpec())
				start := h.now
				sim := &simFast{refresh: int64(5 * time.Second), now: &h.now, until: map[fastKey]int64{}}
				if fast {
					h.w.SetFastPath(sim, false)
				}
				at = -1
				for i := 0; i < 60; i++ {
					p := tc.first
					if i > 0 && p.proto != udp {
						p.flags, p.payload = "PA", []byte("data")
					}
					if fast && sim.takes(p) {
						viaFast++
					} else {
						if d := h.run(build(t, p))[0]; d.Verdict != VerdictTX {
							t.Fatalf("packet %d: %v %v", i, d.Verdict, d.Reason)
						}
						for _, f := range sim.pending {
							offers++
							if f.Brief {
								brief++
							}
						}
						sim.Flush()
					}
					if at < 0 && !onlyEntry(t, h).Evictable() {
						at = time.Duration(h.now - start)
					}
					h.now += int64(100 * time.Millisecond)
				}
				return at, viaFast, offers, brief
			}
			alone, _, _, _ := provenAt(false)
			withFast, viaFast, offers, brief := provenAt(true)
			t.Logf("proven after %v alone, %v with the fast path (which took %d of 60 packets; %d offers, %d brief)", alone, withFast, viaFast, offers, brief)
			if alone < 0 {
				t.Fatalf("the flow was never proven by the worker alone")
			}
			if withFast < 0 || withFast > alone+time.Second {
				t.Errorf("with the fast path the flow was proven after %v, the worker alone proves it after %v", withFast, alone)
			}
			if viaFast < 40 {
				t.Errorf("the fast path took %d of 60 packets, want most", viaFast)
			}
			if brief == 0 || brief == offers {
				t.Errorf("%d of %d offers brief: want the first ones (before the flow is proven), not the last", brief, offers)
			}
		})
	}
}

// reuseVIPs are the VIPs of the reused-tuple tests: NAT and DSR, IPv4 and
// IPv6, TCP port 80.
var reuseVIPs = []struct {
	name string
	id   uint16
	dst  netip.Addr
	src  netip.Addr
}{
	{"nat4", idNAT4, vipNAT4, client4},
	{"dsr4", idDSR4, vipDSR4, client4},
	{"nat6", idNAT6, vipNAT6, client6},
	{"dsr6", idDSR6, vipDSR6, client6},
}

// TestReusedTupleLeavesDrainingBackend: a client opens a connection,
// closes it, and opens a new one from the same port within tcp_closing
// (as clients behind CGNAT, proxies and load generators do) after the
// operator began draining the backend, or set its weight to 0. The new
// connection is a new flow: it goes to a backend that takes new flows,
// and its handshake's ACK and data follow it. A backend that still takes
// new flows keeps the tuple. The FIN that ended the first connection
// retired its fast path entry, so that the new connection's ACK reaches
// a worker instead of being forwarded by the old entry to the old
// backend.
func TestReusedTupleLeavesDrainingBackend(t *testing.T) {
	for _, vip := range reuseVIPs {
		for _, tc := range []struct {
			name  string
			set   func(b *BackendSpec)
			moves bool
		}{
			{"draining", func(b *BackendSpec) { b.State = BackendDraining }, true},
			{"weight 0", func(b *BackendSpec) { b.Weight = 0 }, true},
			{"up", func(*BackendSpec) {}, false},
		} {
			t.Run(vip.name+"/"+tc.name, func(t *testing.T) {
				spec := fastSpec()
				h := newHarness(t, spec)
				fast := &recordingFast{}
				h.w.SetFastPath(fast, false)
				sendSeq := tcpSender(t, h, vip.src, vip.dst)
				send := func(flags string) netip.Addr { t.Helper(); return sendSeq(flags, 0) }
				first := send("S")
				if got := send("A"); got != first {
					t.Fatalf("the handshake's ACK went to %v, its SYN to %v", got, first)
				}
				offered := len(fast.flows)
				h.now += int64(time.Second)
				send("PA")
				if len(fast.flows) == offered {
					t.Fatalf("the established flow was not handed to the fast path")
				}
				n := len(fast.flows)
				send("FA")
				if len(fast.flows) != n+1 || !fast.flows[n].Retire {
					t.Fatalf("the FIN offered %+v, want the flow's retirement", fast.flows[n:])
				}
				r := fast.flows[n]
				if want := keyOfFlow(&fast.flows[n-1]); keyOfFlow(&r) != want {
					t.Errorf("retired %+v, want the key of the flow handed down, %+v", keyOfFlow(&r), want)
				}
				n = len(fast.flows)
				send("FA") // its retransmission retires nothing more
				if len(fast.flows) != n {
					t.Errorf("a second FIN offered %+v", fast.flows[n:])
				}

				for i := range spec.VIPs {
					for j := range spec.VIPs[i].Backends {
						if b := &spec.VIPs[i].Backends[j]; spec.VIPs[i].ID == vip.id && b.Addr == first {
							tc.set(b)
						}
					}
				}
				h.setSpec(spec)
				h.now += int64(time.Second) // within tcp_closing
				second := send("S")
				if got := send("A"); got != second {
					t.Errorf("the new connection's ACK went to %v, its SYN to %v", got, second)
				}
				if got := send("PA"); got != second {
					t.Errorf("the new connection's data went to %v, its SYN to %v", got, second)
				}
				reused := h.w.Counters().Reused
				switch {
				case tc.moves && (second == first || reused != 1):
					t.Errorf("the new connection went to %v (the first to %v), Reused %d: want another backend, 1", second, first, reused)
				case !tc.moves && (second != first || reused != 0):
					t.Errorf("the new connection went to %v (the first to %v), Reused %d: want the same backend, 0", second, first, reused)
				}
				if st := onlyEntry(t, h).State(); st != conntrack.StateUnconfirmed {
					t.Errorf("the new connection's state %v, want Unconfirmed", st)
				}
			})
		}
	}
}

// TestSYNLeavesBackendThatTakesNone: a client's connection is established
// on a backend, which then stops taking new flows (draining, weight 0,
// down or disabled, removed), and the client reuses the tuple for a new
// connection after a close vipd never saw (a backend's RST in DSR mode;
// NAT replies do not move the entry). The new connection's SYN is placed
// afresh, on a backend that takes new flows, with its handshake and data
// following it; the entry is renewed (a new flow's state and age); the
// tuple's fast path entry is retired, so that the new connection's ACK
// reaches a worker and not the old backend. The new SYN's retransmission
// stays where the SYN went. A SYN that is the same SYN again while the
// entry has seen only SYNs (its sequence number: a retransmission, whose
// SYN-ACK may be on its way) keeps a draining backend; another SYN does
// not.
func TestSYNLeavesBackendThatTakesNone(t *testing.T) {
	type change struct {
		name   string
		set    func(b *BackendSpec)
		remove bool
		keeps  bool // the backend could still answer a SYN it had (not down, not gone)
	}
	changes := []change{
		{"draining", func(b *BackendSpec) { b.State = BackendDraining }, false, true},
		{"weight 0", func(b *BackendSpec) { b.Weight = 0 }, false, true},
		{"down or disabled", func(b *BackendSpec) { b.State = BackendDown }, false, false},
		{"removed", nil, true, false},
	}
	for _, vip := range reuseVIPs {
		for _, ch := range changes {
			setup := func(t *testing.T) (h *harness, fast *recordingFast, send func(flags string, seq uint32) netip.Addr, apply func(first netip.Addr)) {
				spec := fastSpec()
				h = newHarness(t, spec)
				fast = &recordingFast{}
				h.w.SetFastPath(fast, false)
				send = tcpSender(t, h, vip.src, vip.dst)
				apply = func(first netip.Addr) {
					for i := range spec.VIPs {
						v := &spec.VIPs[i]
						if v.ID != vip.id {
							continue
						}
						bs := make([]BackendSpec, 0, len(v.Backends))
						for _, b := range v.Backends {
							if b.Addr == first {
								if ch.remove {
									continue
								}
								ch.set(&b)
							}
							bs = append(bs, b)
						}
						v.Backends = bs
					}
					h.setSpec(spec)
				}
				return
			}
			age := func(t *testing.T, h *harness) conntrack.Tick {
				t.Helper()
				fl, _ := h.w.ct.List(make([]conntrack.Flow, 0, 64), 0, 1<<30, nil)
				if len(fl) != 1 {
					t.Fatalf("%d flows listed, want 1", len(fl))
				}
				return fl[0].Age
			}

			t.Run(vip.name+"/"+ch.name+"/established", func(t *testing.T) {
				h, fast, send, apply := setup(t)
				first := send("S", 1000)
				send("A", 1001)
				for range conntrack.ProofTicks {
					h.now += int64(time.Second)
					if got := send("PA", 1001); got != first {
						t.Fatalf("the connection's data went to %v, its SYN to %v", got, first)
					}
				}
				if st := onlyEntry(t, h).State(); st != conntrack.StateEstablished {
					t.Fatalf("state %v, want Established", st)
				}
				if len(fast.flows) == 0 {
					t.Fatal("the established flow was not handed to the fast path")
				}
				handed := fast.flows[len(fast.flows)-1]
				h.now += int64(60 * time.Second) // well within tcp_established
				send("PA", 1001)                 // moves the table's clock
				if a := age(t, h); a < 60 {
					t.Fatalf("age %d before the new connection, want at least 60", a)
				}
				apply(first)
				n := len(fast.flows)
				second := send("S", 777777)
				if second == first {
					t.Fatalf("the new connection's SYN went to %v, which takes no new flows", first)
				}
				if r := h.w.Counters().Reused; r != 1 {
					t.Errorf("Reused %d, want 1", r)
				}
				if v6 := vip.src.Is6(); !v6 || h.w.fast6 {
					if len(fast.flows) != n+1 || !fast.flows[n].Retire || keyOfFlow(&fast.flows[n]) != keyOfFlow(&handed) {
						t.Errorf("offered %+v on the new connection's SYN, want the retirement of %+v", fast.flows[n:], keyOfFlow(&handed))
					}
				}
				e := onlyEntry(t, h)
				if e.State() != conntrack.StateSynSent || !e.Evictable() {
					t.Errorf("the renewed entry: state %v, evictable %v; want SynSent, evictable", e.State(), e.Evictable())
				}
				if a := age(t, h); a != 0 {
					t.Errorf("the renewed entry's age %d, want 0 (the new connection's)", a)
				}
				if got := send("S", 777777); got != second {
					t.Errorf("the new SYN's retransmission went to %v, the SYN to %v", got, second)
				}
				for _, f := range []string{"A", "PA"} {
					if got := send(f, 777778); got != second {
						t.Errorf("the new connection's %s went to %v, its SYN to %v", f, got, second)
					}
				}
				if r := h.w.Counters().Reused; r != 1 {
					t.Errorf("Reused %d after the new connection's packets, want 1", r)
				}
			})

			t.Run(vip.name+"/"+ch.name+"/handshake", func(t *testing.T) {
				h, _, send, apply := setup(t)
				first := send("S", 1000)
				apply(first)
				h.now += int64(time.Second)
				// The SYN again (its SYN-ACK lost, or slow): where it
				// went, if that backend could still answer it.
				again := send("S", 1000)
				if ch.keeps && again != first {
					t.Errorf("the SYN's retransmission went to %v, the SYN to %v, which is %s", again, first, ch.name)
				}
				if !ch.keeps && again == first {
					t.Errorf("the SYN's retransmission went to %v, which is %s", first, ch.name)
				}
				if ch.keeps {
					if r := h.w.Counters().Reused; r != 0 {
						t.Errorf("Reused %d after a retransmission, want 0", r)
					}
					// Another SYN on the tuple is another connection.
					if got := send("S", 5000); got == first {
						t.Errorf("a new SYN (another sequence number) went to %v, which is %s", got, ch.name)
					}
					if r := h.w.Counters().Reused; r != 1 {
						t.Errorf("Reused %d after a new SYN, want 1", r)
					}
				}
			})
		}
	}
}

// tcpSender returns a function that runs a TCP packet from src port 42000
// to dst port 80, with the flags and sequence number (0: build's) it is
// given, through h and returns the backend it was sent to (DSR: the outer
// header's destination); a packet not sent fails the test.
func tcpSender(t *testing.T, h *harness, src, dst netip.Addr) func(flags string, seq uint32) netip.Addr {
	return func(flags string, seq uint32) netip.Addr {
		t.Helper()
		d := h.run(build(t, pk{src: src, dst: dst, sport: 42000, dport: 80, flags: flags, seq: seq}))[0]
		if d.Verdict != VerdictTX {
			t.Fatalf("%s: %v %v", flags, d.Verdict, d.Reason)
		}
		in, err := ipOf(decode(t, d.frame()))
		if err != nil {
			t.Fatal(err)
		}
		return in.dst
	}
}
