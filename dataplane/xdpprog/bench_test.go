package xdpprog

import (
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/ebpf/asm"

	"github.com/vipd/vipd/testing/nstest"
)

// BenchmarkSteer measures the program per path, in the kernel
// (BPF_PROG_TEST_RUN with repeat): ns/pkt is the kernel's own average, so
// it excludes the syscall. Every path ends in the verdict the table
// expects; a benchmark that measured the wrong path would fail.
func BenchmarkSteer(b *testing.B) {
	p := load(b, 1)
	withSocket(b, p)
	if err := p.Update(testVIPs, testReplies, testLocal); err != nil {
		b.Fatalf("Update: %v", err)
	}
	for _, c := range []struct {
		name string
		p    pk
		want uint32
	}{
		{"vip4", pk{src: client4, dst: vip4, proto: tcp, sport: client, dport: 80}, redir},
		{"vip6", pk{src: client6, dst: vip6, proto: tcp, sport: client, dport: 80}, redir},
		{"reply4", pk{src: backend4, dst: client4, proto: tcp, sport: beTCP, dport: client}, redir},
		{"reply4-anyport", pk{src: anyPort4, dst: client4, proto: udp, sport: 53, dport: client}, redir},
		{"icmp-error4", pk{src: router4, dst: client4, proto: icmp4, quote: &pk{src: client4, dst: backend4, proto: tcp, sport: client, dport: beTCP}}, redir},
		{"kernel4", pk{src: client4, dst: local4, proto: tcp, sport: client, dport: ssh}, pass},
		{"stranger4", pk{src: other4, dst: client4, proto: tcp, sport: 443, dport: client}, pass},
	} {
		b.Run(c.name, func(b *testing.B) {
			frame := c.p.frame(b)
			v, per, err := p.prog.Benchmark(frame, b.N, nil)
			if err != nil {
				b.Fatalf("BPF_PROG_TEST_RUN: %v", err)
			}
			if v != c.want {
				b.Fatalf("%s, want %s", verdictName(v), verdictName(c.want))
			}
			b.ReportMetric(float64(per.Nanoseconds()), "ns/pkt")
		})
	}
}

// BenchmarkFast measures the fast path's translation in the kernel
// (BPF_PROG_TEST_RUN with repeat: ns/pkt is the kernel's time per run,
// without the system call), IPv4 against IPv6, client flows (DNAT) and
// replies (SNAT). The kernel's repeat runs the program again on the
// frame it just rewrote, so each case has two entries, there and back
// (the translated flow's entry translates it back): every run is a full
// translation, a map lookup, a clock read and the counters included;
// with each of the two clocks the program may read (fastClock).
func BenchmarkFast(b *testing.B) {
	for _, clock := range []struct {
		name string
		fn   asm.BuiltinFunc
	}{{"coarse", asm.FnKtimeGetCoarseNs}, {"fine", asm.FnKtimeGetNs}} {
		b.Run(clock.name, func(b *testing.B) {
			nstest.RequireRoot(b)
			p, err := LoadWith(1, Options{FastFlows: 16, FastFlows6: 16, clock: clock.fn})
			skipIfDenied(b, "BPF", err)
			if err != nil {
				b.Fatalf("LoadWith: %v", err)
			}
			defer p.Close()
			benchFast(b, p)
		})
	}
}

func benchFast(b *testing.B, p *Program) {
	f := p.Fast()
	addr := netip.MustParseAddr
	for _, c := range []struct {
		name  string
		p     pk
		reply bool
	}{
		{"nat4", pk{src: client4, dst: vip4, proto: tcp, sport: client, dport: 80, payload: make([]byte, 6)}, false},
		{"reply4", pk{src: backend4, dst: client4, proto: tcp, sport: beTCP, dport: client, payload: make([]byte, 6)}, true},
		{"nat6", pk{src: client6, dst: vip6, proto: tcp, sport: client, dport: 80}, false},
		{"reply6", pk{src: backend6, dst: client6, proto: tcp, sport: beTCP, dport: client}, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			v6 := addr(c.p.src).Is6()
			back := c.p
			switch {
			case c.reply && v6:
				back.src, back.sport = vip6, 80
			case c.reply:
				back.src, back.sport = vip4, 80
			case v6:
				back.dst, back.dport = backend6, beTCP
			default:
				back.dst, back.dport = backend4, beTCP
			}
			// Both frames' flows, each translated into the other.
			for _, d := range [][2]pk{{c.p, back}, {back, c.p}} {
				from, to := d[0], d[1]
				old, new, oldPort, port := from.dst, to.dst, from.dport, to.dport
				if c.reply {
					old, new, oldPort, port = from.src, to.src, from.sport, to.sport
				}
				fr := from.frame(b)
				if v6 {
					put6(b, f, keyOfFrame6(fr), natEntry6(b, addr(old), addr(new), oldPort, port, 0, c.reply))
				} else {
					put(b, f, keyOfFrame(fr), natEntry(b, addr(old).As4(), addr(new).As4(), oldPort, port, 0, c.reply))
				}
			}
			// Each run decrements the TTL (hop limit): a call runs the
			// program at most 60 times on its copy of the frame, and the
			// kernel's time per run is averaged over the calls. A run
			// that found no entry would leave the frame as it was, and
			// so would every run after it: the last verdict is XDP_TX
			// only if every run translated.
			const runs = 60
			frame := c.p.frame(b)
			var total time.Duration
			calls := 0
			for done := 0; done < b.N; done += runs {
				v, per, err := p.prog.Benchmark(frame, runs, nil)
				if err != nil {
					b.Fatalf("BPF_PROG_TEST_RUN: %v", err)
				}
				if v != xdpTX {
					b.Fatalf("verdict %s, want XDP_TX", verdictName(v))
				}
				total += per
				calls++
			}
			b.ReportMetric(float64(total.Nanoseconds())/float64(calls), "ns/pkt")
		})
	}
}
