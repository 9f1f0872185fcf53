package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vipd/vipd/control"
	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/dataplane"
	"github.com/vipd/vipd/health/tunprobe"
	"github.com/vipd/vipd/testing/testkit"
)

// fakeTunnels is a TunnelProber that connects without a network (net.Pipe)
// unless the backend is marked failing, and records what it was asked.
type fakeTunnels struct {
	mu      sync.Mutex
	opts    []tunprobe.Options
	fail    map[netip.Addr]bool
	dials   map[string]tunprobe.Path // by "VIP via backend"
	closed  int
	openErr error
}

func (f *fakeTunnels) open(o tunprobe.Options) (TunnelProber, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.opts = append(f.opts, o)
	if f.openErr != nil {
		return nil, f.openErr
	}
	return f, nil
}

func (f *fakeTunnels) Dial(_ context.Context, vip netip.AddrPort, path tunprobe.Path) (net.Conn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dials[vip.String()+" via "+path.Backend.String()] = path
	if f.fail[path.Backend] {
		return nil, errors.New("no SYN-ACK")
	}
	a, b := net.Pipe()
	b.Close()
	return a, nil
}

func (f *fakeTunnels) Stats() tunprobe.Stats { return tunprobe.Stats{} }

func (f *fakeTunnels) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed++
	return nil
}

func (f *fakeTunnels) setFail(a string, on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[netip.MustParseAddr(a)] = on
}

// tunnelDaemon is a test daemon on src whose tunnel prober is f.
func tunnelDaemon(t *testing.T, src string, f *fakeTunnels) *testDaemon {
	t.Helper()
	td := newTestDaemon(t, src, nil)
	cfg, _, err := config.Load(td.path)
	if err != nil {
		t.Fatal(err)
	}
	td.d = New(cfg, Options{ConfigPath: td.path, Platform: td.plat, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Version: "test", PollTimeout: 10 * time.Millisecond, OpenTunnelProber: f.open})
	return td
}

// TestTunnelProbes: DSR backends are probed at VIP:port through their
// tunnels (the VIP's encapsulation and source), from the egress address;
// a backend whose tunnel probe fails goes down while the others stay up;
// the prober is opened once and closed when the daemon stops.
func TestTunnelProbes(t *testing.T) {
	f := &fakeTunnels{fail: map[netip.Addr]bool{}, dials: map[string]tunprobe.Path{}}
	td := tunnelDaemon(t, tunnelConfig, f)
	td.run()
	td.waitRunning()
	health := func(vip, i int) string {
		st, err := td.d.State(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return st.VIPs[vip].Backends[i].Health
	}
	testkit.Eventually(t, testkit.Patience, "checks known", func() bool { return health(0, 0) == "up" && health(0, 1) == "up" && health(1, 0) == "up" })
	f.setFail("198.18.1.12", true)
	testkit.Eventually(t, testkit.Patience, "backend .12 down", func() bool { return health(0, 1) == "down" })
	if health(0, 0) != "up" {
		t.Errorf("backend .11 went down with .12")
	}
	f.setFail("198.18.1.12", false)
	testkit.Eventually(t, testkit.Patience, "backend .12 back", func() bool { return health(0, 1) == "up" })

	f.mu.Lock()
	want := map[string]tunprobe.Path{
		"198.18.0.101:80 via 198.18.1.11":   {Backend: netip.MustParseAddr("198.18.1.11"), Source: netip.MustParseAddr("198.18.1.5"), Encap: tunprobe.IPIP},
		"198.18.0.101:80 via 198.18.1.12":   {Backend: netip.MustParseAddr("198.18.1.12"), Source: netip.MustParseAddr("198.18.1.5"), Encap: tunprobe.IPIP},
		"198.18.0.102:8443 via 198.18.1.13": {Backend: netip.MustParseAddr("198.18.1.13"), Encap: tunprobe.GUE, GUEPort: 7000},
	}
	for k, p := range want {
		if got, ok := f.dials[k]; !ok || got != p {
			t.Errorf("dial %s: %+v (made: %v), want %+v", k, got, ok, p)
		}
	}
	if len(f.dials) != len(want) {
		t.Errorf("dials %v, want only %v", f.dials, want)
	}
	if len(f.opts) != 1 || f.opts[0].Source4 != netip.MustParseAddr("198.18.1.1") || f.opts[0].Source6.IsValid() || f.opts[0].Egress != "eth1" {
		t.Errorf("prober opened with %+v, want once, from eth1's 198.18.1.1, IPv4 only", f.opts)
	}
	f.mu.Unlock()
	if err := td.stop(); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed != 1 {
		t.Errorf("prober closed %d times at stop, want 1", f.closed)
	}
}

// TestTunnelProberNeeded: the prober is opened only for DSR VIPs whose
// checks go through the tunnel, and a prober that cannot be opened fails
// the start with its reason.
func TestTunnelProberNeeded(t *testing.T) {
	tests := []struct {
		name    string
		src     string
		openErr error
		opens   int
		runErr  string
	}{
		{"tunnel", tunnelConfig, nil, 1, ""},
		{"check none", strings.Replace(tunnelConfig, "interval = \"20ms\"", "type = \"none\"\ninterval = \"20ms\"", -1), nil, 0, ""},
		{"open fails", tunnelConfig, errors.New("tunprobe: strict rp_filter"), 1, "tunnel health probes: tunprobe: strict rp_filter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeTunnels{fail: map[netip.Addr]bool{}, dials: map[string]tunprobe.Path{}, openErr: tt.openErr}
			td := tunnelDaemon(t, tt.src, f)
			td.run()
			if tt.runErr != "" {
				select {
				case err := <-td.done:
					if err == nil || !strings.Contains(err.Error(), tt.runErr) {
						t.Fatalf("Run: %v, want %q", err, tt.runErr)
					}
					td.done <- err // for the cleanup's stop
				case <-time.After(30 * time.Second):
					t.Fatalf("Run did not fail")
				}
			} else {
				td.waitRunning()
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.opts) != tt.opens {
				t.Errorf("prober opened %d times, want %d", len(f.opts), tt.opens)
			}
		})
	}
}

// TestDirectProbeTargets: with probe = "direct" a DSR backend is probed on
// its own address, and no tunnel prober is opened. (Pure: the targets
// are built, not probed, so that nothing is sent from the test's
// namespace.)
func TestDirectProbeTargets(t *testing.T) {
	for _, probe := range []string{"direct", "tunnel"} {
		t.Run(probe, func(t *testing.T) {
			src := strings.Replace(tunnelConfig, "[vip.healthcheck]\n", "[vip.healthcheck]\nprobe = \""+probe+"\"\n", -1)
			f := &fakeTunnels{}
			td := tunnelDaemon(t, src, f)
			cfg, _, err := config.Load(td.path)
			if err != nil {
				t.Fatal(err)
			}
			if err := td.d.tunnels.ensure(cfg, td.plat.Host()); err != nil {
				t.Fatal(err)
			}
			td.d.mu.Lock()
			ts := td.d.healthTargets(cfg)
			td.d.mu.Unlock()
			want := map[string]bool{"198.18.1.11:80": true, "198.18.1.12:80": true, "198.18.1.13:8443": true}
			if probe == "tunnel" {
				want = map[string]bool{"198.18.0.101:80": true, "198.18.0.102:8443": true}
			}
			for _, tg := range ts {
				if !want[tg.Addr.String()] || tg.Tunnel.Backend.IsValid() != (probe == "tunnel") {
					t.Errorf("target %+v with probe = %q", tg, probe)
				}
			}
			if opened := len(f.opts) == 1; opened != (probe == "tunnel") {
				t.Errorf("prober opened %d times with probe = %q", len(f.opts), probe)
			}
			td.d.tunnels.close()
		})
	}
}

// TestTunnelProberOnReload: a reload that brings the first tunnel probes
// opens the prober; one whose prober cannot be opened is refused and the
// running configuration stays.
func TestTunnelProberOnReload(t *testing.T) {
	none := strings.Replace(tunnelConfig, "interval = \"20ms\"", "type = \"none\"\ninterval = \"20ms\"", -1)
	f := &fakeTunnels{fail: map[netip.Addr]bool{}, dials: map[string]tunprobe.Path{}, openErr: errors.New("no TUN")}
	td := tunnelDaemon(t, none, f)
	td.run()
	td.waitRunning()
	td.rewrite(tunnelConfig)
	if err := td.d.Reload(); err == nil || !strings.Contains(err.Error(), "no TUN") {
		t.Fatalf("reload with a prober that cannot open: %v", err)
	}
	td.d.mu.Lock()
	stayed := td.d.cfg.VIPs[0].HealthCheck.Type == config.CheckNone
	td.d.mu.Unlock()
	if !stayed {
		t.Errorf("the refused configuration was applied")
	}
	f.mu.Lock()
	f.openErr = nil
	f.mu.Unlock()
	if err := td.d.Reload(); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.opts) != 2 {
		t.Errorf("prober opened %d times, want 2 (refused, then applied)", len(f.opts))
	}
}

// countingProber is a TunnelProber whose Stats count its dials.
type countingProber struct {
	mu    sync.Mutex
	dials uint64
}

func (c *countingProber) Dial(context.Context, netip.AddrPort, tunprobe.Path) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dials++
	return nil, errors.New("not connected")
}

func (c *countingProber) Close() error { return nil }

func (c *countingProber) Stats() tunprobe.Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return tunprobe.Stats{Sent: c.dials, ReadErrors: 1}
}

// TestTunnelProberStats: the prober's counters reach Metrics, absent
// before any prober opened, and summed over a reopening (a reload that
// adds IPv6 tunnel probes opens a new prober) so that the counters
// /metrics exports never go back.
func TestTunnelProberStats(t *testing.T) {
	var probers []*countingProber
	tun := &tunnels{log: slog.New(slog.NewTextHandler(io.Discard, nil)), open: func(tunprobe.Options) (TunnelProber, error) {
		p := &countingProber{}
		probers = append(probers, p)
		return p, nil
	}}
	host := control.Host{
		Host: dataplane.Host{
			Addr4: [2]netip.Addr{netip.MustParseAddr("198.18.0.254"), netip.MustParseAddr("198.18.1.1")},
			Addr6: [2]netip.Addr{netip.MustParseAddr("2001:db8::fe"), netip.MustParseAddr("2001:db8:1::1")},
		},
	}
	if _, ok := tun.stats(); ok {
		t.Fatalf("stats reported before any prober opened")
	}
	load := func(src string) *config.Config {
		t.Helper()
		path := t.TempDir() + "/vipd.toml"
		if err := os.WriteFile(path, []byte(strings.Replace(src, "@SOCKET@", t.TempDir()+"/s", 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, _, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	dial := func(n int) {
		for range n {
			tun.Dial(context.Background(), netip.MustParseAddrPort("198.18.0.101:80"), tunprobe.Path{})
		}
	}
	if err := tun.ensure(load(tunnelConfig), host); err != nil {
		t.Fatal(err)
	}
	dial(3)
	if st, ok := tun.stats(); !ok || st.Sent != 3 || st.ReadErrors != 1 {
		t.Fatalf("one prober, 3 dials: %+v (%v)", st, ok)
	}
	v6 := tunnelConfig + `
[[vip]]
name = "dsr6"
address = "2001:db8::101"
port = 80
mode = "dsr"
[vip.healthcheck]
interval = "20ms"
timeout = "10ms"
[[vip.backend]]
address = "2001:db8:1::11"
`
	if err := tun.ensure(load(v6), host); err != nil {
		t.Fatal(err)
	}
	if len(probers) != 2 {
		t.Fatalf("%d probers opened, want 2 (IPv6 added)", len(probers))
	}
	dial(2)
	if st, ok := tun.stats(); !ok || st.Sent != 5 || st.ReadErrors != 2 {
		t.Errorf("after reopening, 3 + 2 dials: %+v (%v), want Sent 5, ReadErrors 2", st, ok)
	}
	tun.close()
	if st, ok := tun.stats(); !ok || st.Sent != 5 {
		t.Errorf("after close: %+v (%v), want Sent 5 kept", st, ok)
	}
}

// TestTunnelProberKeptOnRefusedReload: a reload that needs a new prober
// (here a first IPv6 tunnel VIP) which cannot open is refused, and the
// running configuration keeps a prober: it used to be left with none, so
// that its tunnel probes all failed and every backend they check went
// down. A renumbered egress address gets a new prober at the next reload.
func TestTunnelProberKeptOnRefusedReload(t *testing.T) {
	var opened []tunprobe.Options
	tn := &tunnels{log: slog.New(slog.DiscardHandler), open: func(o tunprobe.Options) (TunnelProber, error) {
		if o.Source6.IsValid() {
			return nil, errors.New("strict rp_filter")
		}
		opened = append(opened, o)
		return &countingProber{}, nil
	}}
	mk := func(addrs ...string) *config.Config {
		c := &config.Config{}
		for _, a := range addrs {
			v := config.VIP{Address: netip.MustParseAddr(a), Mode: config.ModeDSR}
			v.HealthCheck.Type, v.HealthCheck.Probe = config.CheckTCP, config.ProbeTunnel
			c.VIPs = append(c.VIPs, v)
		}
		return c
	}
	var host control.Host
	host.Addr4[dataplane.PortIngress] = netip.MustParseAddr("198.18.1.1")
	host.Addr6[dataplane.PortIngress] = netip.MustParseAddr("2001:2:1::1")
	if err := tn.ensure(mk("198.18.0.100"), host); err != nil {
		t.Fatal(err)
	}
	if err := tn.ensure(mk("198.18.0.100", "2001:2::100"), host); err == nil {
		t.Fatal("the IPv6 prober opened: the test needs it to fail")
	}
	if _, err := tn.Dial(context.Background(), netip.MustParseAddrPort("198.18.0.100:80"), tunprobe.Path{}); errors.Is(err, errNoTunnelProber) {
		t.Errorf("after a refused reload the running configuration has no tunnel prober")
	}
	if len(opened) != 2 || opened[1].Source4 != netip.MustParseAddr("198.18.1.1") {
		t.Errorf("opened %+v, want the first prober reopened", opened)
	}
	host.Addr4[dataplane.PortIngress] = netip.MustParseAddr("198.18.1.2")
	if err := tn.ensure(mk("198.18.0.100"), host); err != nil {
		t.Fatal(err)
	}
	if len(opened) != 3 || opened[2].Source4 != host.Addr4[dataplane.PortIngress] {
		t.Errorf("after the egress was renumbered: opened %+v, want a prober from the new address", opened)
	}
}
