package xdpprog

import (
	"testing"
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
