package dataplane

import (
	"net/netip"
	"testing"

	"github.com/google/gopacket/layers"
)

// TestZeroAllocs proves that no path through the pipeline allocates: each
// case reprocesses a fresh copy of its frame many times.
func TestZeroAllocs(t *testing.T) {
	spec := testSpec()
	spec.ClientOnLink = []netip.Prefix{netip.MustParsePrefix("198.18.0.0/24")}
	spec.Neighbors = map[netip.Addr][6]byte{client4: macClient}
	tooBig := testSpec()
	tooBig.MTU = [2]int{1400, 1400}
	cases := []struct {
		name  string
		spec  *Spec
		frame []byte
		rx    uint8
		fresh bool // a new flow each run (conntrack miss + insert)
		fast  bool // a flow offered to a fast path every run
	}{
		{"nat4 hit, fast path", spec, build(t, pk{src: client4, dst: vipNAT4, sport: 1, dport: 80, flags: "A", payload: payloadOf(100)}), PortIngress, false, true},
		{"nat4 hit", spec, build(t, pk{src: client4, dst: vipNAT4, sport: 1, dport: 80, flags: "A", payload: payloadOf(100)}), PortIngress, false, false},
		{"nat4 miss", spec, build(t, pk{src: client4, dst: vipNAT4, sport: 1, dport: 80, flags: "S"}), PortIngress, true, false},
		{"nat4 reply", spec, build(t, pk{src: netip.MustParseAddr("198.18.1.11"), dst: client4, sport: 8080, dport: 1, flags: "A"}), PortEgress, false, false},
		{"nat4 SYN-ACK", spec, build(t, pk{src: netip.MustParseAddr("198.18.1.11"), dst: client4, sport: 8080, dport: 1, flags: "SA"}), PortEgress, false, false},
		{"nat4 reply, fast path", spec, build(t, pk{src: netip.MustParseAddr("198.18.1.11"), dst: client4, sport: 8080, dport: 1, flags: "A"}), PortEgress, false, true},
		{"dsr4 hit", spec, build(t, pk{src: client4, dst: vipDSR4, sport: 1, dport: 80, flags: "A"}), PortIngress, false, false},
		{"dsr4 miss", spec, build(t, pk{src: client4, dst: vipDSR4, sport: 1, dport: 80, flags: "S"}), PortIngress, true, false},
		{"nat6 hit", spec, build(t, pk{src: client6, dst: vipNAT6, sport: 1, dport: 80, flags: "A"}), PortIngress, false, false},
		{"dsr6 hit", spec, build(t, pk{src: client6, dst: vipDSR6, sport: 1, dport: 80, flags: "A"}), PortIngress, false, false},
		{"nat6 reply", spec, build(t, pk{src: netip.MustParseAddr("2001:2:1::11"), dst: client6, sport: 8080, dport: 1, flags: "A"}), PortEgress, false, false},
		{"nat6 hit, fast path", spec, build(t, pk{src: client6, dst: vipNAT6, sport: 1, dport: 80, flags: "A"}), PortIngress, false, true},
		{"nat6 reply, fast path", spec, build(t, pk{src: netip.MustParseAddr("2001:2:1::11"), dst: client6, sport: 8080, dport: 1, flags: "A"}), PortEgress, false, true},
		{"udp fragment", spec, build(t, pk{src: client4, dst: vipUDP4, sport: 1, dport: 7000, proto: layers.IPProtocolUDP, mf: true, noDF: true}), PortIngress, false, false},
		{"frag-needed", tooBig, build(t, pk{src: client4, dst: vipDSR4, sport: 1, dport: 80, flags: "A", payload: payloadOf(1400)}), PortIngress, false, false},
		{"packet too big", tooBig, build(t, pk{src: client6, dst: vipDSR6, sport: 1, dport: 80, flags: "A", payload: payloadOf(1400)}), PortIngress, false, false},
		{"fragmentation", tooBig, build(t, pk{src: client4, dst: vipNAT4, sport: 1, dport: 80, flags: "A", payload: payloadOf(3000), noDF: true}), PortIngress, false, false},
		{"icmp steering", spec, icmpError(t, router4, vipNAT4, quotedTCP(t, vipNAT4, client4, 80, 1)), PortIngress, false, false},
		{"drop", spec, build(t, pk{src: client4, dst: vipNAT4, sport: 1, dport: 443, flags: "S"}), PortIngress, false, false},
		{"kernel", spec, build(t, pk{src: client4, dst: netip.MustParseAddr("198.18.0.9"), sport: 1, dport: 22, flags: "S"}), PortIngress, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.spec)
			em := &poolEmitter{}
			buf := make([]byte, Headroom+len(tc.frame)+64)
			d := &Desc{}
			port := uint16(1)
			runOnce := func() {
				copy(buf[Headroom:], tc.frame)
				if tc.fresh {
					port++
					buf[Headroom+14+20] = byte(port >> 8) // TCP source port
					buf[Headroom+14+20+1] = byte(port)
				}
				*d = Desc{Buf: buf, Off: Headroom, Len: len(tc.frame), RxPort: tc.rx}
				em.n = 0
				h.now += offerRepeat // under the ICMP rate limit (2 ms), and a fast path offer each run
				h.w.Begin(h.snap, h.now, em)
				h.w.Process(d)
				h.w.End(1)
			}
			fast := &countingFast{}
			if tc.fast {
				h.w.SetFastPath(fast, false)
				runOnce() // the flow exists: its next packets are offered
			}
			runOnce()
			want := d.Verdict
			if want == VerdictDrop && tc.name != "drop" {
				t.Fatalf("setup: %v %v", d.Verdict, d.Reason)
			}
			if n := testing.AllocsPerRun(200, runOnce); n != 0 {
				t.Errorf("%v allocations per packet", n)
			}
			if d.Verdict != want {
				t.Errorf("the path changed during the runs: %v, then %v %v", want, d.Verdict, d.Reason)
			}
			if tc.fast && fast.n < 200 {
				t.Errorf("%d flows offered in 200 runs, want one per run", fast.n)
			}
		})
	}
}

// countingFast is a FastPath that only counts what it is offered.
type countingFast struct{ n int }

func (c *countingFast) Offer(*FastFlow) bool                    { c.n++; return true }
func (c *countingFast) Flush() error                            { return nil }
func (c *countingFast) Forwarded(uint32) (uint64, uint64, bool) { return 0, 0, false }
func (c *countingFast) IPv6() bool                              { return true }

// poolEmitter hands out preallocated frames and discards what is emitted.
type poolEmitter struct {
	bufs [8][4096]byte
	n    int
}

func (p *poolEmitter) Alloc(uint8) ([]byte, int, bool) {
	if p.n == len(p.bufs) {
		return nil, 0, false
	}
	p.n++
	return p.bufs[p.n-1][:], Headroom, true
}

func (p *poolEmitter) Emit([]byte, int, int, uint8) {}

// TestZeroAllocsRelay: handing an ICMP error to the next worker and
// serving it there allocate nothing, and neither does the steering rule
// run on a malformed frame.
func TestZeroAllocsRelay(t *testing.T) {
	r := newRing(t, testSpec(), 2)
	in := icmpError(t, router4, vipNAT4, quotedTCP(t, vipNAT4, client4, 80, 1))
	em := &poolEmitter{}
	buf := make([]byte, Headroom+len(in))
	d := &Desc{}
	n := testing.AllocsPerRun(200, func() {
		copy(buf[Headroom:], in)
		*d = Desc{Buf: buf, Off: Headroom, Len: len(in), RxPort: PortIngress}
		em.n = 0
		r.ws[0].Begin(r.snap, r.now, em)
		r.ws[0].Process(d)
		r.ws[1].Begin(r.snap, r.now, em)
		r.ws[1].serveRelays()
	})
	if n != 0 {
		t.Errorf("%v allocations per relayed error", n)
	}
	if d.Verdict != VerdictRelay || r.ws[1].Counters().ICMPSteered == 0 {
		t.Errorf("not relayed: %v, steered %d", d.Verdict, r.ws[1].Counters().ICMPSteered)
	}
	bad := build(t, pk{src: client4, dst: vipNAT4, sport: 1, dport: 80, flags: "S"})[:14+30]
	if n := testing.AllocsPerRun(200, func() { r.snap.Claims(bad) }); n != 0 {
		t.Errorf("Claims: %v allocations", n)
	}
}
