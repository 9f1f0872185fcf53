package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sys/unix"

	"github.com/vipd/vipd/testing/nstest"
	"github.com/vipd/vipd/testing/testkit"
)

// TestUsage drives the flags that stop before anything is opened, so it
// creates nothing even as root.
func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		out  string // expected in stdout+stderr
	}{
		{[]string{"-h"}, 0, "-allow"},
		{nil, 2, "-allow is required"},
		{[]string{"-allow", ""}, 2, "-allow is required"},
		{[]string{"-allow", " , "}, 2, "-allow is required"},
		{[]string{"-allow", "any,198.18.1.1"}, 2, `(or "any", alone)`},
		{[]string{"-allow", "198.18.1.1", "-chain"}, 2, "-chain needs -chain-peers"},
		{[]string{"-allow", "any", "-chain"}, 2, "-chain needs -chain-peers"},
		{[]string{"-allow", "198.18.1.1", "-check-local=nonsense"}, 2, "invalid boolean value"},
		{[]string{"-version"}, 0, "vipd-decap dev"},
		{[]string{"-bogus"}, 2, "flag provided but not defined"},
		{[]string{"extra"}, 2, `unexpected argument "extra"`},
		{[]string{"-allow", "198.18.1.1,nonsense"}, 2, "-allow"},
		{[]string{"-allow", "fe80::1%eth0"}, 2, "zone"},
		{[]string{"-stats-interval", "-1s"}, 2, "must not be negative"},
		{[]string{"-log-level", "loud"}, 2, "-log-level"},
		{[]string{"-gue-port", "70000"}, 2, "at most 65535"},
		{[]string{"-gue-port", "-1"}, 2, "invalid value"},
		{[]string{"-vip", "nonsense"}, 2, "-vip"},
		{[]string{"-vip", "2001:2::1"}, 2, "needs -ipv6"},
		{[]string{"-vip", "127.0.0.2"}, 2, "bad VIP"},
		{[]string{"-vip", "198.18.0.1", "-vip", "198.18.0.2,198.18.0.1"}, 2, "given twice"},
		{[]string{"-metrics", "9717"}, 2, "host:port"},
		{[]string{"-gue-sockets", "0"}, 2, "-gue-sockets 0: want 1 to 1024"},
		{[]string{"-gue-sockets", "5000"}, 2, "-gue-sockets 5000: want 1 to 1024"},
		{[]string{"-tun", "a-name-too-long-for-linux"}, 2, "bad TUN name"},
		{[]string{"-check"}, 2, "-allow is required"},
		{[]string{"-check", "-allow", "any"}, 0, "flags valid"},
		{[]string{"-check", "-allow", "198.18.1.1"}, 0, "flags valid"},
		{[]string{"-check", "-vip", "2001:2::1"}, 2, "needs -ipv6"},
		{[]string{"-h"}, 0, "-chain-peers"},
		{[]string{"-chain", "-gue-port", "0"}, 2, "-chain needs GUE"},
		{[]string{"-chain-peers", "198.18.1.11"}, 2, "-chain-peers without -chain"},
		{[]string{"-chain", "-chain-peers", "198.18.1.11,bogus"}, 2, "-chain-peers"},
		{[]string{"-chain", "-chain-cache", "0"}, 2, "-chain-cache 0"},
		{[]string{"-chain", "-chain-cache-ttl", "0s"}, 2, "-chain-cache-ttl must be positive"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		out := stdout.String() + stderr.String()
		if code != tc.code || !strings.Contains(out, tc.out) {
			t.Errorf("run(%q) = %d, output %q; want %d and %q", tc.args, code, out, tc.code, tc.out)
		}
	}
}

// TestCheck: -check prints what the flags would set up, one line each.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string // lines of the plan
		not  []string // text that must not be in it
	}{
		{
			name: "defaults",
			args: []string{"-allow", "198.18.1.1"},
			want: []string{
				"create TUN device vipd-tun0 (removed on exit), with net.ipv4.conf.vipd-tun0.rp_filter=0 and IPv6 disabled on it",
				"keep forwarding off on vipd-tun0 (net.ipv4.conf.vipd-tun0.forwarding=0), setting it back if a host-wide write turns it on",
				"refuse to start if net.ipv4.conf.all.rp_filter is not 0 (no -fix-sysctls)",
				"receive IPv4 in IPv4 (raw socket, protocol 4)",
				"receive GUE on UDP port 6080 over IPv4, " + socketsText(runtime.GOMAXPROCS(0)),
				"accept outer sources in [198.18.1.1/32] only",
				"deliver GUE packets with a previous-owner hint here, ignoring the hint (no -chain)",
				"drop inner packets not addressed to this host (-check-local, the default)",
				"log the counters every 1m0s and on exit",
			},
			not: []string{"IPv6 in IPv6", "to lo", "arp_", "metrics", "chain hinted", "any outer source", "any destination", "-tun-forwarding"},
		},
		{
			name: "the behaviour before: any source, any destination, forwarding as the host's",
			args: []string{"-allow", "any", "-check-local=false", "-tun-forwarding"},
			want: []string{
				"leave forwarding on vipd-tun0 as the host's default sets it (-tun-forwarding)",
				"accept packets from any outer source (-allow any: anyone who reaches this host can have packets of any source delivered to it)",
				"deliver inner packets to any destination (-check-local=false)",
			},
			not: []string{"keep forwarding off", "not addressed to this host"},
		},
		{
			name: "a backend agent",
			args: []string{"-tun", "dsr0", "-ipv6", "-gue-port", "7000", "-gue-sockets", "4", "-allow", "198.18.1.1,2001:2:0:1::/64", "-check-local", "-fix-sysctls",
				"-vip", "198.18.0.101", "-vip", "2001:2::101,198.18.0.102", "-metrics", "127.0.0.1:9717", "-stats-interval", "0"},
			want: []string{
				"create TUN device dsr0 (removed on exit), with net.ipv4.conf.dsr0.rp_filter=0 and IPv6 enabled on it",
				"keep forwarding off on dsr0 (net.ipv4.conf.dsr0.forwarding=0, net.ipv6.conf.dsr0.forwarding=0), setting it back if a host-wide write turns it on",
				"set net.ipv4.conf.all.rp_filter=0 if it is not, raising other interfaces' rp_filter to its value (-fix-sysctls; restored on exit)",
				"receive IPv6 in IPv6 (raw socket, next header 41)",
				"receive GUE on UDP port 7000 over IPv4 and IPv6, 4 sockets (SO_REUSEPORT: flows spread by their ports) per family",
				"accept outer sources in [198.18.1.1/32 2001:2:0:1::/64] only",
				"drop inner packets not addressed to this host (-check-local, the default)",
				"add 198.18.0.101/32 to lo, unless it is there already; remove it on exit if it added it",
				"add 2001:2::101/128 to lo, unless it is there already; remove it on exit if it added it",
				"add 198.18.0.102/32 to lo, unless it is there already; remove it on exit if it added it",
				"raise net.ipv4.conf.all.arp_ignore to 1 and net.ipv4.conf.all.arp_announce to 2 where lower (restored on exit)",
				"serve metrics on http://127.0.0.1:9717/metrics",
				"log the counters on exit",
			},
		},
		{
			name: "one GUE socket",
			args: []string{"-allow", "any", "-gue-sockets", "1"},
			want: []string{"receive GUE on UDP port 6080 over IPv4, 1 socket"},
		},
		{
			name: "chaining",
			args: []string{"-allow", "198.18.1.1", "-chain", "-chain-peers", "198.18.1.11,198.18.1.12/31", "-chain-cache", "1000", "-chain-cache-ttl", "2s"},
			want: []string{
				"chain hinted packets without a local connection to the previous owner's UDP port 6080, from port 6080 (-chain; lookups remembered for 2s, 1000 flows)",
				"chain only to previous owners in [198.18.1.11/32 198.18.1.12/31], drop hinted packets for others (-chain-peers)",
				"accept outer sources in [198.18.1.11/32 198.18.1.12/31] for chained packets only",
			},
			not: []string{"ignoring the hint"},
		},
		{
			name: "GUE off",
			args: []string{"-allow", "any", "-gue-port", "0"},
			want: []string{"not receive GUE (-gue-port 0)"},
			not:  []string{"UDP port"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(append([]string{"-check"}, tc.args...), &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d; stderr %s", code, stderr.String())
			}
			if stderr.Len() != 0 {
				t.Errorf("-check wrote to stderr: %s", stderr.String())
			}
			lines := map[string]bool{}
			for l := range strings.SplitSeq(stdout.String(), "\n") {
				lines[strings.TrimSpace(l)] = true
			}
			for _, w := range tc.want {
				if !lines[w] {
					t.Errorf("plan lacks the line %q:\n%s", w, stdout.String())
				}
			}
			for _, n := range tc.not {
				if strings.Contains(stdout.String(), n) {
					t.Errorf("plan mentions %q:\n%s", n, stdout.String())
				}
			}
		})
	}
}

// TestCheckTouchesNothing runs -check with every setting that would
// change the host, inside a throwaway namespace, and finds it unchanged.
func TestCheckTouchesNothing(t *testing.T) {
	nstest.RequireRoot(t)
	ns := nstest.New(t, "chk")
	state := func() string {
		return ns.Must(t, "ip", "-o", "link", "show") + ns.Must(t, "ip", "-o", "addr", "show") +
			ns.Must(t, "sysctl", "net.ipv4.conf.all.rp_filter", "net.ipv4.conf.all.arp_ignore", "net.ipv4.conf.all.arp_announce") +
			ns.Must(t, "cat", "/proc/net/udp", "/proc/net/raw", "/proc/net/tcp")
	}
	ns.Must(t, "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=1")
	before := state()
	var stdout, stderr bytes.Buffer
	code := -1
	done := ns.Go(func() error {
		code = run([]string{"-check", "-allow", "198.18.1.1", "-tun", "vtun-chk", "-ipv6", "-fix-sysctls", "-vip", "198.18.0.101,2001:2::101", "-metrics", "127.0.0.1:9717"}, &stdout, &stderr)
		return nil
	})
	select {
	case err := <-done:
		if err != nil || code != 0 {
			t.Fatalf("-check: exit %d, %v; %s", code, err, stderr.String())
		}
	case <-time.After(startTimeout):
		// -check went on to serve; the test binary's exit ends it.
		t.Fatalf("-check still running after %v: it set things up instead of checking", startTimeout)
	}
	if after := state(); after != before {
		t.Errorf("-check changed the namespace:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestParseOptions: what the flags make of decap.Options, the defaults
// above all: a source allow-list that must be given ("any" for none),
// local destinations checked, forwarding off on the TUN.
func TestParseOptions(t *testing.T) {
	p := netip.MustParsePrefix
	for _, tc := range []struct {
		name       string
		args       []string
		allowed    []netip.Prefix
		checkLocal bool
		forwarding bool
		peers      []netip.Prefix
	}{
		{"an address", []string{"-allow", "198.18.1.1"}, []netip.Prefix{p("198.18.1.1/32")}, true, false, nil},
		{"prefixes", []string{"-allow", "198.18.1.0/29, 2001:2:0:1::/64"}, []netip.Prefix{p("198.18.1.0/29"), p("2001:2:0:1::/64")}, true, false, nil},
		{"any", []string{"-allow", " any "}, nil, true, false, nil},
		{"no local check", []string{"-allow", "198.18.1.1", "-check-local=false"}, []netip.Prefix{p("198.18.1.1/32")}, false, false, nil},
		{"the behaviour before", []string{"-allow", "any", "-check-local=false", "-tun-forwarding"}, nil, false, true, nil},
		{"chaining", []string{"-allow", "198.18.1.1", "-chain", "-chain-peers", "198.18.1.12,198.18.3.0/24"}, []netip.Prefix{p("198.18.1.1/32")}, true, false,
			[]netip.Prefix{p("198.18.1.12/32"), p("198.18.3.0/24")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			cfg, code := parse(tc.args, &stdout, &stderr)
			if cfg == nil {
				t.Fatalf("parse: exit %d, %s", code, stderr.String())
			}
			o := cfg.opts
			if !slices.Equal(o.AllowedSources, tc.allowed) || o.CheckLocal != tc.checkLocal || o.Forwarding != tc.forwarding || !slices.Equal(o.ChainPeers, tc.peers) {
				t.Errorf("allowed %v, check local %v, forwarding %v, chain peers %v; want %v, %v, %v, %v",
					o.AllowedSources, o.CheckLocal, o.Forwarding, o.ChainPeers, tc.allowed, tc.checkLocal, tc.forwarding, tc.peers)
			}
		})
	}
}

func TestParsePrefixes(t *testing.T) {
	got, err := parsePrefixes(" 198.18.1.1, 198.18.4.7/22 ,2001:2::1,,2001:2:0:1::/64")
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{
		netip.MustParsePrefix("198.18.1.1/32"),
		netip.MustParsePrefix("198.18.4.0/22"),
		netip.MustParsePrefix("2001:2::1/128"),
		netip.MustParsePrefix("2001:2:0:1::/64"),
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got, err := parsePrefixes(""); err != nil || len(got) != 0 {
		t.Errorf("empty: %v, %v", got, err)
	}
}

// syncBuffer is a bytes.Buffer safe to read while a process writes it.
type syncBuffer struct {
	ch  chan struct{}
	buf bytes.Buffer
}

func newSyncBuffer() *syncBuffer {
	b := &syncBuffer{ch: make(chan struct{}, 1)}
	b.ch <- struct{}{}
	return b
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	<-b.ch
	defer func() { b.ch <- struct{}{} }()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	<-b.ch
	defer func() { b.ch <- struct{}{} }()
	return b.buf.String()
}

// TestBinary runs the built command in a throwaway namespace, as a
// backend agent would: it must fix rp_filter, put its VIPs on lo and set
// the ARP sysctls, decapsulate an IPIP packet and a GUE datagram, serve
// its counters as metrics and log them, and on SIGTERM exit 0 with the
// TUN device gone, the VIP it added removed, the VIP that was there
// before left, and the sysctls restored.
func TestBinary(t *testing.T) {
	nstest.RequireRoot(t)
	bin := binary(t)
	ns := nstest.New(t, "dcap")
	// The backend's own address and a VIP there before, both on
	// loopback: a packet sent to the own address from inside the
	// namespace is delivered locally, as one arriving from vipd would be.
	be, vip, vip2 := netip.MustParseAddr("198.18.1.11"), netip.MustParseAddr("198.18.0.101"), netip.MustParseAddr("198.18.0.102")
	ns.Must(t, "ip", "addr", "add", be.String()+"/32", "dev", "lo")
	ns.Must(t, "ip", "addr", "add", vip.String()+"/32", "dev", "lo")
	ns.Must(t, "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=1", "net.ipv4.conf.all.arp_ignore=0", "net.ipv4.conf.all.arp_announce=0")
	sysctls := func() string {
		return strings.Join(strings.Fields(ns.Must(t, "sysctl", "-n", "net.ipv4.conf.all.rp_filter",
			"net.ipv4.conf.all.arp_ignore", "net.ipv4.conf.all.arp_announce")), " ")
	}
	onLo := func(a netip.Addr) bool {
		return strings.Contains(ns.Must(t, "ip", "-o", "addr", "show", "dev", "lo"), " "+a.String()+"/32 ")
	}

	const tun, metrics = "vtun-bin", "127.0.0.1:9717" // loopback of the test's namespace
	log := newSyncBuffer()
	cmd := ns.Cmd(bin, "-tun", tun, "-fix-sysctls", "-check-local", "-allow", "198.18.1.1", "-stats-interval", "50ms",
		"-vip", vip.String()+","+vip2.String(), "-metrics", metrics, "-chain", "-chain-peers", "198.18.1.12")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		// Only if the test failed before the SIGTERM below: by PID.
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-exited
		}
	})
	hasTUN := func() bool {
		return exec.Command("ip", "-n", ns.Name, "link", "show", tun).Run() == nil
	}
	// "running" is logged once decap.New returned, that is after the
	// sockets are open; the TUN exists earlier, and a packet sent in
	// between is lost (CI saw it once).
	if !testkit.Poll(startTimeout, func() bool { return strings.Contains(log.String(), "msg=running") }) {
		t.Fatalf("not running after %v; log:\n%s", startTimeout, log)
	}
	if !hasTUN() {
		t.Fatalf("running without TUN %s; log:\n%s", tun, log)
	}
	if got := sysctls(); got != "0 1 2" {
		t.Errorf("while running: rp_filter, arp_ignore, arp_announce = %s, want 0 1 2", got)
	}
	if !onLo(vip) || !onLo(vip2) {
		t.Errorf("while running: VIPs not both on lo:\n%s", ns.Must(t, "ip", "addr", "show", "dev", "lo"))
	}

	// ip netns exec execs the command: cmd's PID is vipd-decap's.
	syn := func(dst netip.Addr) []byte {
		return serialize(t,
			&layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: net.IP{198, 18, 2, 7}, DstIP: dst.AsSlice()},
			&layers.TCP{SrcPort: 40000, DstPort: 80, SYN: true, Window: 1000})
	}
	outer := func(proto layers.IPProtocol) *layers.IPv4 {
		return &layers.IPv4{Version: 4, TTL: 64, Flags: layers.IPv4DontFragment, Protocol: proto, SrcIP: net.IP{198, 18, 1, 1}, DstIP: be.AsSlice()}
	}
	ipip := serialize(t, outer(layers.IPProtocolIPv4), gopacket.Payload(syn(vip)))
	gue := serialize(t, outer(layers.IPProtocolUDP), &layers.UDP{SrcPort: 50000, DstPort: 6080}, gopacket.Payload(syn(vip2)))
	gue[20+6], gue[20+7] = 0, 0 // the UDP checksum: vipd sends none over IPv4
	// A SYN with a previous-owner hint (GUE variant 0, vipd's private
	// data naming 198.18.3.12): delivered here, counted as a SYN.
	hint := append([]byte{0x02, 4, 0, 0, 'v', 'p', 1, 0, 198, 18, 3, 12}, syn(vip)...)
	hinted := serialize(t, outer(layers.IPProtocolUDP), &layers.UDP{SrcPort: 50001, DstPort: 6080}, gopacket.Payload(hint))
	hinted[20+6], hinted[20+7] = 0, 0
	err := ns.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		for _, pkt := range [][]byte{ipip, gue, hinted} {
			if err := unix.Sendto(fd, pkt, 0, &unix.SockaddrInet4{Addr: be.As4()}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	if !testkit.Poll(startTimeout, func() bool { return strings.Contains(log.String(), "gue=2 decapsulated=3") }) {
		t.Fatalf("not 3 decapsulated packets, 2 of them GUE, in the stats after %v; log:\n%s", startTimeout, log)
	}
	fams := scrapeIn(t, ns, "http://"+metrics+"/metrics")
	for name, want := range map[string]float64{
		"vipd_decap_received_total":     3,
		"vipd_decap_gue_received_total": 2,
		"vipd_decap_decapsulated_total": 3,
		"vipd_decap_hinted_total":       1,
		"vipd_decap_build_info":         1,
	} {
		if got, ok := value(fams, name); !ok || got != want {
			t.Errorf("metric %s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	if got, ok := value(fams, "vipd_decap_hint_outcomes_total", "outcome", "syn"); !ok || got != 1 {
		t.Errorf("metric vipd_decap_hint_outcomes_total{outcome=syn} = %v (present %v), want 1", got, ok)
	}
	if got, ok := value(fams, "vipd_decap_dropped_total", "reason", "source"); !ok || got != 0 {
		t.Errorf("metric vipd_decap_dropped_total{reason=source} = %v (present %v), want 0", got, ok)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v; log:\n%s", err, log)
		}
	case <-time.After(startTimeout):
		t.Fatalf("still running %v after SIGTERM; log:\n%s", startTimeout, log)
	}
	out := log.String()
	for _, want := range []string{"msg=running", "msg=\"final stats\"", "msg=stopped"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
	if hasTUN() {
		t.Errorf("TUN %s still there after exit", tun)
	}
	if got := sysctls(); got != "1 0 0" {
		t.Errorf("after exit: rp_filter, arp_ignore, arp_announce = %s, want 1 0 0 (restored)", got)
	}
	if !onLo(vip) {
		t.Errorf("after exit: %v, on lo before the start, was removed", vip)
	}
	if onLo(vip2) {
		t.Errorf("after exit: %v, added at the start, is still on lo", vip2)
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("log:\n%s", out)
	}
}

// scrapeIn fetches url from inside ns (where the metrics address is) and
// parses the metrics.
func scrapeIn(t *testing.T, ns *nstest.NS, url string) map[string]*dto.MetricFamily {
	t.Helper()
	client := &http.Client{
		Timeout: startTimeout,
		Transport: &http.Transport{
			DisableKeepAlives: true,
			DialContext: func(ctx context.Context, network, addr string) (c net.Conn, err error) {
				err = ns.Do(func() (err error) {
					c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
					return err
				})
				return c, err
			},
		},
	}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s in %s: %v", url, ns.Name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	return scrape(t, resp.Body)
}

func serialize(tb testing.TB, ls ...gopacket.SerializableLayer) []byte {
	tb.Helper()
	if nl, ok := ls[0].(*layers.IPv4); ok && len(ls) > 1 {
		switch l4 := ls[1].(type) {
		case *layers.TCP:
			l4.SetNetworkLayerForChecksum(nl)
		case *layers.UDP:
			l4.SetNetworkLayerForChecksum(nl)
		}
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}
