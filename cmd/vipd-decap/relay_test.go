package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vipd/vipd/testing/nstest"
	"github.com/vipd/vipd/testing/testkit"
)

// built is the command, built once for the tests that run it.
var built struct {
	once      sync.Once
	dir, path string
	err       error
}

// binary returns the path of the command built from this package.
func binary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "vipd-decap-test"); built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "vipd-decap")
		if out, err := exec.Command("go", "build", "-o", built.path, ".").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// startTimeout bounds the wait for the command to start (or to refuse
// to): a loaded machine takes a while to run a new process.
const startTimeout = 10 * time.Second

// proc is the command running in a namespace.
type proc struct {
	cmd    *exec.Cmd
	log    *syncBuffer
	exited chan error
}

// start runs the command with args in ns; the process is killed, by its
// PID, at cleanup if it is still running.
func start(t *testing.T, ns *nstest.NS, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: ns.Cmd(append([]string{binary(t)}, args...)...), log: newSyncBuffer(), exited: make(chan error, 1)}
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// running waits until the command logged that it runs (after decap.New
// returned: the sockets are open).
func (p *proc) running(t *testing.T) {
	t.Helper()
	if !testkit.Poll(startTimeout, func() bool { return strings.Contains(p.log.String(), "msg=running") }) {
		t.Fatalf("not running after %v; log:\n%s", startTimeout, p.log)
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v; log:\n%s", err, p.log)
		}
	case <-time.After(startTimeout):
		t.Fatalf("still running %v after SIGTERM; log:\n%s", startTimeout, p.log)
	}
}

// TestRefusals: without -allow, or with -chain but no -chain-peers, the
// command refuses to start: exit 2, a message naming the flag and the
// fix, and nothing created — even where it could start (root, its own
// namespace, -fix-sysctls).
func TestRefusals(t *testing.T) {
	nstest.RequireRoot(t)
	ns := nstest.New(t, "ref")
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"no -allow", nil, []string{"-allow is required", "-allow any"}},
		{"empty -allow", []string{"-allow", ""}, []string{"-allow is required", "-allow any"}},
		{"-chain without -chain-peers", []string{"-allow", "198.18.1.1", "-chain"}, []string{"-chain needs -chain-peers"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tun := nstest.Name("tr")
			p := start(t, ns, append([]string{"-tun", tun, "-fix-sysctls", "-stats-interval", "0"}, tc.args...)...)
			var err error
			select {
			case err = <-p.exited:
			case <-time.After(startTimeout):
				t.Fatalf("still running after %v: it started; log:\n%s", startTimeout, p.log)
			}
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 {
				t.Errorf("exit %v, want status 2 (bad usage)", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(p.log.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, p.log)
				}
			}
			if exec.Command("ip", "-n", ns.Name, "link", "show", tun).Run() == nil {
				t.Errorf("TUN %s created by a refused start", tun)
			}
		})
	}
}

// The relay rig's addresses, 198.18.0.0/15 and 2001:2::/48 only. far's
// exist only in far, behind be; the inner sources (the "clients") on no
// interface at all.
var (
	rlLB4, rlLB6   = nstest.PairLB4, nstest.PairLB6
	rlBE4, rlBE6   = nstest.PairBE4, nstest.PairBE6
	rlFar4, rlFar6 = nstest.PairFar4, nstest.PairFar6
	rlCli4, rlCli6 = netip.MustParseAddr("198.18.2.7"), netip.MustParseAddr("2001:2:0:2::7")
)

// relayRig is a backend that routes, as every Docker or Kubernetes node
// does (ip_forward=1, IPv6 forwarding on), between lb, which plays vipd
// and the rest of the world, and far, another host (nstest's Pair and
// its AddFar):
//
//	lb 198.18.1.1/24   ──veth── 198.18.1.11/24  be 198.18.4.1/24  ──veth── 198.18.4.2/24  far
//	   2001:2:0:1::1/64          2001:2:0:1::11/64  2001:2:0:4::1/64        2001:2:0:4::2/64
//
// lb routes far's prefixes via be. far listens on UDP port 9 of its
// addresses: what reaches it is read there.
type relayRig struct {
	lb, be, far *nstest.NS
	far4, far6  *net.UDPConn
	raw         *nstest.RawSender // in lb
	beMetrics   string            // where vipd-decap in be serves its metrics
}

func newRelayRig(t *testing.T) *relayRig {
	t.Helper()
	nstest.RequireRoot(t)
	p := nstest.NewPair(t, "rlb", "rbe")
	r := &relayRig{lb: p.LB, be: p.BE, far: p.AddFar(t), beMetrics: "127.0.0.1:9717"}
	r.far4, r.far6 = r.far.ListenUDP(t, netip.AddrPortFrom(rlFar4, 9)), r.far.ListenUDP(t, netip.AddrPortFrom(rlFar6, 9))
	r.raw = r.lb.RawSender(t)
	return r
}

// inject sends pkt, a whole IP packet built by the test, from lb.
func (r *relayRig) inject(t *testing.T, pkt []byte) {
	t.Helper()
	r.raw.Send(t, pkt)
}

// metric polls be's vipd-decap metrics until the series reads want, for
// at most startTimeout; the test goes on when it does not, to show what
// became of the packet.
func (r *relayRig) metric(t *testing.T, name string, want float64, labels ...string) {
	t.Helper()
	var got float64
	if !testkit.Poll(startTimeout, func() bool {
		got, _ = value(scrapeIn(t, r.be, "http://"+r.beMetrics+"/metrics"), name, labels...)
		return got == want
	}) {
		t.Errorf("%s%v = %v after %v, want %v", name, labels, got, startTimeout, want)
	}
}

// udpTo returns an IP packet carrying a UDP datagram src:40000 → dst:9.
func udpTo(t *testing.T, src, dst netip.Addr, payload string) []byte {
	t.Helper()
	u := &layers.UDP{SrcPort: 40000, DstPort: 9}
	var l3 gopacket.SerializableLayer
	if src.Is4() {
		ip := &layers.IPv4{Version: 4, TTL: 63, Protocol: layers.IPProtocolUDP, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
		u.SetNetworkLayerForChecksum(ip)
		l3 = ip
	} else {
		ip := &layers.IPv6{Version: 6, HopLimit: 63, NextHeader: layers.IPProtocolUDP, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
		u.SetNetworkLayerForChecksum(ip)
		l3 = ip
	}
	return serialize(t, l3, u, gopacket.Payload(payload))
}

// TestRelay checks that vipd-decap is no open relay, as it was by
// default before -allow was required and -check-local on: on a backend
// that routes (any Docker or Kubernetes node), a packet encapsulated by
// an allowed source (vipd; here lb), whose inner destination is another
// host (far) rather than this one, must not leave the backend. By
// default vipd-decap drops it (not_local); with -check-local=false it
// is written to the TUN, whose forwarding is off, and the kernel
// refuses it (Ip InAddrErrors). Only with the flags of the old
// behaviour does it reach far. Each case ends with a control datagram
// that be routes from lb to far: far must read it, and the relayed
// packet never, before.
func TestRelay(t *testing.T) {
	r := newRelayRig(t)
	ipipTo := func(inner []byte) []byte {
		return serialize(t, &layers.IPv4{Version: 4, TTL: 64, Flags: layers.IPv4DontFragment, Protocol: layers.IPProtocolIPv4, SrcIP: rlLB4.AsSlice(), DstIP: rlBE4.AsSlice()},
			gopacket.Payload(inner))
	}
	gueTo := func(inner []byte) []byte {
		pkt := serialize(t, &layers.IPv4{Version: 4, TTL: 64, Flags: layers.IPv4DontFragment, Protocol: layers.IPProtocolUDP, SrcIP: rlLB4.AsSlice(), DstIP: rlBE4.AsSlice()},
			&layers.UDP{SrcPort: 50000, DstPort: 6080}, gopacket.Payload(inner))
		pkt[20+6], pkt[20+7] = 0, 0 // vipd sends no UDP checksum over IPv4
		return pkt
	}
	ip6ip6To := func(inner []byte) []byte {
		return serialize(t, &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolIPv6, SrcIP: rlLB6.AsSlice(), DstIP: rlBE6.AsSlice()},
			gopacket.Payload(inner))
	}
	const (
		dropped = iota // by vipd-decap, not_local
		refused        // written to the TUN, refused by be's kernel
		relayed        // the old behaviour: it reaches far
	)
	for i, tc := range []struct {
		name    string
		args    []string
		v6      bool
		encap   func([]byte) []byte
		outcome int
	}{
		{"IPIP, defaults", []string{"-allow", rlLB4.String()}, false, ipipTo, dropped},
		{"GUE, defaults", []string{"-allow", rlLB4.String()}, false, gueTo, dropped},
		{"IPv6 in IPv6, defaults", []string{"-allow", rlLB6.String(), "-ipv6"}, true, ip6ip6To, dropped},
		{"IPIP, -check-local=false", []string{"-allow", rlLB4.String(), "-check-local=false"}, false, ipipTo, refused},
		{"IPIP, the old behaviour", []string{"-allow", "any", "-check-local=false", "-tun-forwarding"}, false, ipipTo, relayed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tun := nstest.Name("tr")
			p := start(t, r.be, append([]string{"-tun", tun, "-fix-sysctls", "-stats-interval", "0", "-metrics", r.beMetrics}, tc.args...)...)
			p.running(t)
			defer p.stop(t)
			fwd := map[string]string{"net.ipv4.conf." + tun + ".forwarding": "0"}
			if tc.v6 {
				fwd["net.ipv6.conf."+tun+".forwarding"] = "0"
			}
			if tc.outcome == relayed {
				fwd["net.ipv4.conf."+tun+".forwarding"] = "1" // the host's default: be forwards
			}
			for k, want := range fwd {
				if got := strings.TrimSpace(r.be.Must(t, "sysctl", "-n", k)); got != want {
					t.Errorf("while running: %s = %s, want %s", k, got, want)
				}
			}

			src, dst, farConn := rlCli4, rlFar4, r.far4
			if tc.v6 {
				src, dst, farConn = rlCli6, rlFar6, r.far6
			}
			relay, control := "relay "+strconv.Itoa(i), "control "+strconv.Itoa(i)
			addrErrors := r.be.SNMP(t, "Ip", "InAddrErrors")
			r.inject(t, tc.encap(udpTo(t, src, dst, relay)))
			switch tc.outcome {
			case dropped:
				r.metric(t, "vipd_decap_dropped_total", 1, "reason", "not_local")
				r.metric(t, "vipd_decap_decapsulated_total", 0)
			case refused:
				r.metric(t, "vipd_decap_decapsulated_total", 1)
				if !testkit.Poll(startTimeout, func() bool { return r.be.SNMP(t, "Ip", "InAddrErrors") > addrErrors }) {
					t.Errorf("be's Ip InAddrErrors still %d: the kernel did not refuse the packet written to the TUN", addrErrors)
				}
			case relayed:
				// As above, leftovers are skipped; the relayed packet
				// comes, or nothing within startTimeout.
				for got := nstest.ReadUDP(t, farConn, startTimeout); got != relay; got = nstest.ReadUDP(t, farConn, startTimeout) {
				}
				return
			}
			r.lb.SendUDP(t, netip.AddrPortFrom(dst, 9), []byte(control))
			// Leftovers of a case that failed before are skipped: far
			// is shared, and its case has reported them.
			for got := nstest.ReadUDP(t, farConn, startTimeout); got != control; got = nstest.ReadUDP(t, farConn, startTimeout) {
				if got == relay {
					t.Errorf("far read %q before %q: the backend relayed the decapsulated packet", got, control)
				}
			}
		})
	}
}
