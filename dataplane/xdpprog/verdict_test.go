package xdpprog

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/google/gopacket/layers"

	"github.com/vipd/vipd/testing/nstest"
)

// The steering sets of the verdict tests. 198.18.0.0/15 and 2001:2::/48
// are benchmarking ranges; nothing here is sent anywhere: the frames only
// go through BPF_PROG_TEST_RUN.
const (
	local4   = "198.18.0.1"
	vip4     = "198.18.1.1"
	backend4 = "198.18.2.1" // NAT backend, TCP 8080
	anyPort4 = "198.18.2.2" // NAT backend of an every-port UDP VIP
	client4  = "198.18.3.1"
	router4  = "198.18.4.1"
	other4   = "198.18.5.1"

	local6   = "2001:2::1"
	vip6     = "2001:2:0:1::1"
	backend6 = "2001:2:0:2::1" // NAT backend, TCP 8080
	client6  = "2001:2:0:3::1"
	router6  = "2001:2:0:4::1"
)

const (
	tcp    = layers.IPProtocolTCP
	udp    = layers.IPProtocolUDP
	icmp4  = layers.IPProtocolICMPv4
	icmp6  = layers.IPProtocolICMPv6
	pass   = xdpPass
	redir  = xdpRedirect
	beTCP  = 8080
	ssh    = 22
	client = 40000 // a client's ephemeral port
)

func addrs(ss ...string) []netip.Addr {
	var as []netip.Addr
	for _, s := range ss {
		as = append(as, netip.MustParseAddr(s))
	}
	return as
}

var (
	testVIPs    = addrs(vip4, vip6)
	testLocal   = addrs(local4, local6)
	testReplies = []ReplyKey{
		{Addr: netip.MustParseAddr(backend4), Proto: 6, Port: beTCP},
		{Addr: netip.MustParseAddr(anyPort4), Proto: 17, Port: 0},
		{Addr: netip.MustParseAddr(backend6), Proto: 6, Port: beTCP},
	}
)

func verdictName(v uint32) string {
	switch v {
	case xdpPass:
		return "XDP_PASS"
	case xdpRedirect:
		return "XDP_REDIRECT"
	}
	return fmt.Sprintf("verdict %d", v)
}

// run runs the program once on frame through BPF_PROG_TEST_RUN. The
// kernel runs it on receive queue 0 of the loopback device; a redirect is
// reported as XDP_REDIRECT when slot 0 of the XSKMAP holds a socket and
// is not carried out.
func run(t testing.TB, p *Program, frame []byte) uint32 {
	t.Helper()
	v, err := p.prog.Run(&ebpf.RunOptions{Data: frame})
	if err != nil {
		t.Fatalf("BPF_PROG_TEST_RUN: %v", err)
	}
	return v
}

// withSocket gives queue 0 of p a real AF_XDP socket, bound to a veth in a
// namespace of the test's own, so that redirects are reported as such.
func withSocket(t testing.TB, p *Program) *xsk {
	t.Helper()
	ns := newNetNS(t)
	nstest.VethNamed(t, ns, "veth0", ns, "veth1")
	idx := ns.Interface(t, "veth0").Index
	var x *xsk
	if err := ns.Do(func() (err error) { x, err = newXSK(idx, 0); return err }); err != nil {
		t.Fatalf("AF_XDP socket: %v", err)
	}
	t.Cleanup(x.Close)
	if err := p.Register(0, x.fd); err != nil {
		t.Fatalf("Register: %v", err)
	}
	return x
}

type verdictCase struct {
	name  string
	frame []byte
	want  uint32
}

func verdictCases(t testing.TB) []verdictCase {
	reply4 := pk{src: backend4, dst: client4, proto: tcp, sport: beTCP, dport: client}
	reply6 := pk{src: backend6, dst: client6, proto: tcp, sport: beTCP, dport: client}
	toVIP4 := pk{src: client4, dst: vip4, proto: tcp, sport: client, dport: 80}
	with := func(p pk, f func(*pk)) pk { f(&p); return p }
	cases := []struct {
		name string
		p    pk
		want uint32
	}{
		// To a VIP: every protocol.
		{"v4 tcp to vip", toVIP4, redir},
		{"v4 udp to vip", pk{src: client4, dst: vip4, proto: udp, sport: client, dport: 53}, redir},
		{"v4 icmp echo to vip", pk{src: client4, dst: vip4, proto: icmp4}, redir},
		{"v4 icmp error to vip", pk{src: router4, dst: vip4, proto: icmp4, quote: &pk{src: vip4, dst: client4, proto: tcp, sport: 80, dport: client}}, redir},
		{"v4 vip with options", with(toVIP4, func(p *pk) { p.optWords = 10 }), redir},
		{"v4 vip fragment", with(toVIP4, func(p *pk) { p.fragOff = 100 }), redir},
		{"v4 vip tcp cut short", with(toVIP4, func(p *pk) { p.cut = 14 + 20 + 2 }), redir},
		{"v6 tcp to vip", pk{src: client6, dst: vip6, proto: tcp, sport: client, dport: 80}, redir},
		{"v6 udp to vip", pk{src: client6, dst: vip6, proto: udp, sport: client, dport: 53}, redir},
		{"v6 icmp echo to vip", pk{src: client6, dst: vip6, proto: icmp6}, redir},
		{"v6 icmp error to vip", pk{src: router6, dst: vip6, proto: icmp6, quote: &pk{src: vip6, dst: client6, proto: tcp, sport: 80, dport: client}}, redir},
		{"v6 icmp to vip, no icmp header", pk{src: client6, dst: vip6, proto: icmp6, cut: 14 + 40}, redir},
		{"v6 neighbour solicitation to vip", pk{src: router6, dst: vip6, proto: icmp6, icmpType: 135}, pass},
		{"v6 neighbour advertisement to vip", pk{src: router6, dst: vip6, proto: icmp6, icmpType: 136}, pass},
		{"v6 router advertisement to vip", pk{src: router6, dst: vip6, proto: icmp6, icmpType: 134}, pass},
		{"v6 router solicitation to vip", pk{src: client6, dst: vip6, proto: icmp6, icmpType: 133}, pass},
		{"v6 redirect to vip", pk{src: router6, dst: vip6, proto: icmp6, icmpType: 137}, pass},
		{"v6 icmp type 132 to vip", pk{src: client6, dst: vip6, proto: icmp6, icmpType: 132}, redir},
		{"v6 icmp type 138 to vip", pk{src: client6, dst: vip6, proto: icmp6, icmpType: 138}, redir},
		{"v6 vip behind hop-by-hop", pk{src: client6, dst: vip6, proto: tcp, sport: client, dport: 80, hopByHop: true}, redir},
		{"vlan v4 to vip", with(toVIP4, func(p *pk) { p.vlan = true }), redir},
		{"vlan v6 to vip", pk{vlan: true, src: client6, dst: vip6, proto: udp, sport: client, dport: 53}, redir},

		// The box's own traffic and strangers' stay in the kernel.
		{"v4 ssh to box", pk{src: client4, dst: local4, proto: tcp, sport: client, dport: ssh}, pass},
		{"v4 ping to box", pk{src: client4, dst: local4, proto: icmp4}, pass},
		{"v4 udp to other", pk{src: client4, dst: other4, proto: udp, sport: client, dport: 53}, pass},
		{"v6 ssh to box", pk{src: client6, dst: local6, proto: tcp, sport: client, dport: ssh}, pass},
		{"v6 ping to box", pk{src: client6, dst: local6, proto: icmp6}, pass},
		{"v6 vip as v4-mapped", pk{src: client6, dst: "::ffff:" + vip4, proto: tcp, sport: client, dport: 80}, pass},
		{"vlan v4 ssh to box", pk{vlan: true, src: client4, dst: local4, proto: tcp, sport: client, dport: ssh}, pass},

		// NAT replies.
		{"v4 reply", reply4, redir},
		{"v4 reply to box", with(reply4, func(p *pk) { p.dst = local4 }), pass},
		{"v4 reply other port", with(reply4, func(p *pk) { p.sport = ssh }), pass},
		{"v4 reply from port 0", with(reply4, func(p *pk) { p.sport = 0 }), pass},
		{"v4 reply other proto", with(reply4, func(p *pk) { p.proto = udp }), pass},
		{"v4 reply from stranger", with(reply4, func(p *pk) { p.src = other4 }), pass},
		{"v4 reply any port", pk{src: anyPort4, dst: client4, proto: udp, sport: 5353, dport: client}, redir},
		{"v4 reply any port, other proto", pk{src: anyPort4, dst: client4, proto: tcp, sport: 5353, dport: client}, pass},
		{"v4 reply with options", with(reply4, func(p *pk) { p.optWords = 1 }), redir},
		{"v4 reply with 40 bytes of options", with(reply4, func(p *pk) { p.optWords = 10 }), redir},
		{"v4 reply options, other port", with(reply4, func(p *pk) { p.optWords = 10; p.sport = ssh }), pass},
		{"v4 echo reply from backend", pk{src: backend4, dst: client4, proto: icmp4}, pass},
		{"vlan v4 reply", with(reply4, func(p *pk) { p.vlan = true }), redir},
		{"vlan v4 reply to box", with(reply4, func(p *pk) { p.vlan = true; p.dst = local4 }), pass},
		{"v6 reply", reply6, redir},
		{"v6 reply to box", with(reply6, func(p *pk) { p.dst = local6 }), pass},
		{"v6 reply other port", with(reply6, func(p *pk) { p.sport = ssh }), pass},
		{"v6 reply behind hop-by-hop", with(reply6, func(p *pk) { p.hopByHop = true }), pass},
		{"v6 reply from v4-mapped backend", with(reply6, func(p *pk) { p.src = "::ffff:" + backend4; p.dst = "::ffff:" + client4 }), pass},
		{"vlan v6 reply", with(reply6, func(p *pk) { p.vlan = true }), redir},

		// Later fragments of replies match on (address, protocol); a
		// first fragment, which has its ports, like a whole packet.
		{"v4 reply first fragment", with(reply4, func(p *pk) { p.mf = true }), redir},
		{"v4 reply first fragment, other port", with(reply4, func(p *pk) { p.mf = true; p.sport = ssh }), pass},
		{"v4 reply later fragment", with(reply4, func(p *pk) { p.fragOff = 185; p.mf = true }), redir},
		{"v4 reply last fragment", with(reply4, func(p *pk) { p.fragOff = 185 }), redir},
		{"v4 reply fragment to box", with(reply4, func(p *pk) { p.fragOff = 185; p.dst = local4 }), pass},
		{"v4 reply fragment, other proto", with(reply4, func(p *pk) { p.fragOff = 185; p.proto = udp }), pass},
		{"v4 fragment from stranger", with(reply4, func(p *pk) { p.fragOff = 185; p.src = other4 }), pass},
		{"v6 reply first fragment", with(reply6, func(p *pk) { p.frag6 = true; p.mf = true }), redir},
		{"v6 reply first fragment, other port", with(reply6, func(p *pk) { p.frag6 = true; p.mf = true; p.sport = ssh }), pass},
		{"v6 reply later fragment", with(reply6, func(p *pk) { p.frag6 = true; p.fragOff = 185 }), redir},
		{"v6 reply fragment, other proto", with(reply6, func(p *pk) { p.frag6 = true; p.fragOff = 185; p.proto = udp }), pass},
		{"v6 reply atomic fragment", with(reply6, func(p *pk) { p.frag6 = true }), redir},
		{"v6 reply atomic fragment, other port", with(reply6, func(p *pk) { p.frag6 = true; p.sport = ssh }), pass},

		// ICMP errors about a client's packet to a NAT backend, on their
		// way to the client.
		{"v4 frag-needed from router for backend", pk{src: router4, dst: client4, proto: icmp4, quote: &pk{src: client4, dst: backend4, proto: tcp, sport: client, dport: beTCP}}, redir},
		{"v4 unreachable from backend", pk{src: backend4, dst: client4, proto: icmp4, quote: &pk{src: client4, dst: backend4, proto: tcp, sport: client, dport: beTCP}}, redir},
		{"v4 icmp error, quoted options", pk{src: router4, dst: client4, proto: icmp4, quote: &pk{src: client4, dst: backend4, proto: tcp, sport: client, dport: beTCP, optWords: 10}}, redir},
		{"v4 icmp error, any-port backend", pk{src: router4, dst: client4, proto: icmp4, quote: &pk{src: client4, dst: anyPort4, proto: udp, sport: client, dport: 9}}, redir},
		{"v4 icmp error, other port", pk{src: router4, dst: client4, proto: icmp4, quote: &pk{src: client4, dst: backend4, proto: tcp, sport: client, dport: ssh}}, pass},
		{"v4 icmp error to box", pk{src: router4, dst: local4, proto: icmp4, quote: &pk{src: local4, dst: backend4, proto: tcp, sport: client, dport: beTCP}}, pass},
		{"v4 icmp error cut in quote", pk{src: router4, dst: client4, proto: icmp4, cut: 14 + 20 + 8 + 20 + 2, quote: &pk{src: client4, dst: backend4, proto: tcp, sport: client, dport: beTCP}}, pass},
		{"v6 packet-too-big for backend", pk{src: router6, dst: client6, proto: icmp6, quote: &pk{src: client6, dst: backend6, proto: tcp, sport: client, dport: beTCP}}, redir},
		{"v6 packet-too-big, other port", pk{src: router6, dst: client6, proto: icmp6, quote: &pk{src: client6, dst: backend6, proto: tcp, sport: client, dport: ssh}}, pass},
		{"v6 packet-too-big to box", pk{src: router6, dst: local6, proto: icmp6, quote: &pk{src: local6, dst: backend6, proto: tcp, sport: client, dport: beTCP}}, pass},

		// Truncated and malformed frames.
		{"ethernet only", with(toVIP4, func(p *pk) { p.cut = 14 }), pass},
		{"v4 header cut", with(toVIP4, func(p *pk) { p.cut = 14 + 19 }), pass},
		{"v4 options cut", with(reply4, func(p *pk) { p.optWords = 10; p.cut = 14 + 40 }), pass},
		{"v4 reply ports cut", with(reply4, func(p *pk) { p.cut = 14 + 20 + 1 }), pass},
		{"v4 reply ports cut after options", with(reply4, func(p *pk) { p.optWords = 10; p.cut = 14 + 60 + 1 }), pass},
		{"vlan tag cut", with(toVIP4, func(p *pk) { p.vlan = true; p.cut = 14 + 2 }), pass},
		{"vlan v4 header cut", with(toVIP4, func(p *pk) { p.vlan = true; p.cut = 18 + 19 }), pass},
		{"v6 header cut", pk{src: client6, dst: vip6, proto: udp, sport: 1, dport: 2, cut: 14 + 39}, pass},
		{"v6 reply ports cut", with(reply6, func(p *pk) { p.cut = 14 + 40 + 1 }), pass},
	}
	var out []verdictCase
	for _, c := range cases {
		out = append(out, verdictCase{c.name, c.p.frame(t), c.want})
	}
	// Frames gopacket will not build.
	bad := func(f func([]byte)) []byte { b := toVIP4.frame(t); f(b); return b }
	out = append(out,
		verdictCase{"arp request", arpRequest(t, vip4), pass},
		verdictCase{"lldp", []byte{0x01, 0x80, 0xc2, 0, 0, 0x0e, 2, 0, 0, 0, 0, 1, 0x88, 0xcc, 2, 7, 4, 0, 0, 0, 0, 0, 1}, pass},
		verdictCase{"v4 to vip, IHL 4", bad(func(b []byte) { b[14] = 0x44 }), pass},
		verdictCase{"v4 ethertype, version 6", bad(func(b []byte) { b[14] = 0x65 }), pass},
		verdictCase{"802.1ad outer tag", bad(func(b []byte) { b[12], b[13] = 0x88, 0xa8 }), pass},
	)
	return out
}

// TestVerdicts runs the steering rule table through the kernel.
func TestVerdicts(t *testing.T) {
	p := load(t, 1)
	withSocket(t, p)
	if err := p.Update(testVIPs, testReplies, testLocal); err != nil {
		t.Fatalf("Update: %v", err)
	}
	for _, c := range verdictCases(t) {
		t.Run(c.name, func(t *testing.T) {
			if got := run(t, p, c.frame); got != c.want {
				t.Errorf("%s, want %s (frame % x)", verdictName(got), verdictName(c.want), c.frame)
			}
		})
	}
}

// TestNoSocketPasses: a queue whose XSKMAP slot is empty hands even VIP
// traffic to the kernel (bpf_redirect_map's XDP_PASS fallback), before a
// socket is registered, after Unregister, and after the socket is closed.
func TestNoSocketPasses(t *testing.T) {
	p := load(t, 1)
	if err := p.Update(testVIPs, testReplies, testLocal); err != nil {
		t.Fatalf("Update: %v", err)
	}
	toVIP := pk{src: client4, dst: vip4, proto: tcp, sport: client, dport: 80}.frame(t)
	check := func(when string, want uint32) {
		t.Helper()
		if got := run(t, p, toVIP); got != want {
			t.Errorf("%s: %s, want %s", when, verdictName(got), verdictName(want))
		}
	}
	check("before Register", pass)
	x := withSocket(t, p)
	check("after Register", redir)
	if err := p.Unregister(0); err != nil {
		t.Fatalf("Unregister: %v", err)
	}
	check("after Unregister", pass)
	if err := p.Unregister(0); err != nil {
		t.Errorf("Unregister of an empty slot: %v", err)
	}
	if err := p.Register(0, x.fd); err != nil {
		t.Fatalf("Register: %v", err)
	}
	check("after Register again", redir)
	x.Close()
	check("after the socket closed", pass)
}
