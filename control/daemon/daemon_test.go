package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/vipd/vipd/control/admin/client"
	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/health"
	"github.com/vipd/vipd/health/tunprobe"
	"github.com/vipd/vipd/testing/testkit"
)

type testDaemon struct {
	t      *testing.T
	d      *Daemon
	plat   *memPlatform
	path   string // the configuration file
	socket string // the admin socket
	cancel context.CancelFunc
	done   chan error
}

// newTestDaemon writes src (its "@SOCKET@" replaced by an admin socket path
// in a fresh directory) and prepares a daemon on it; Run is the caller's.
func newTestDaemon(t *testing.T, src string, probe health.Prober) *testDaemon {
	t.Helper()
	return newTestDaemonWith(t, src, probe, nil)
}

// newTestDaemonWith is newTestDaemon; setup, when not nil, may change the
// options and returns the configuration New gets in place of the file's.
func newTestDaemonWith(t *testing.T, src string, probe health.Prober, setup func(*config.Config, *Options) *config.Config) *testDaemon {
	t.Helper()
	// Not t.TempDir: its path, made of the test's name, can pass the 107
	// bytes a socket path may have.
	dir, err := os.MkdirTemp("", "vipd-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	td := &testDaemon{t: t, path: filepath.Join(dir, "vipd.toml"), socket: filepath.Join(dir, "admin.sock"), done: make(chan error, 1)}
	td.rewrite(src)
	cfg, _, err := config.Load(td.path)
	if err != nil {
		t.Fatal(err)
	}
	td.plat = newMemPlatform()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	opts := Options{ConfigPath: td.path, Platform: td.plat, Log: log, Version: "test", PollTimeout: 10 * time.Millisecond, HealthProbe: probe,
		// A real one would put a TUN device and a routing rule in the
		// test's own namespace.
		OpenTunnelProber: func(tunprobe.Options) (TunnelProber, error) {
			return nil, errors.New("test daemons must not open a real tunnel prober")
		}}
	if setup != nil {
		cfg = setup(cfg, &opts)
	}
	td.d = New(cfg, opts)
	t.Cleanup(func() { td.stop() })
	return td
}

// run starts the daemon.
func (td *testDaemon) run() {
	ctx, cancel := context.WithCancel(context.Background())
	td.cancel = cancel
	go func() { td.done <- td.d.Run(ctx) }()
}

func start(t *testing.T, src string) *testDaemon {
	t.Helper()
	td := newTestDaemon(t, src, nil)
	td.run()
	td.waitRunning()
	return td
}

// waitRunning waits until the daemon's workers run.
func (td *testDaemon) waitRunning() {
	td.t.Helper()
	select {
	case <-td.d.Running():
	case err := <-td.done:
		td.t.Fatalf("daemon exited: %v", err)
	case <-time.After(30 * time.Second):
		td.t.Fatal("daemon did not start")
	}
}

func (td *testDaemon) stop() error {
	if td.cancel == nil {
		return nil
	}
	td.cancel()
	td.cancel = nil
	select {
	case err := <-td.done:
		return err
	case <-time.After(30 * time.Second):
		td.t.Fatal("daemon did not stop")
	}
	return nil
}

func syn(t *testing.T, vip string, sport uint16, flags string) []byte {
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 0x20}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 0x10}, EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: net.IP{198, 18, 0, 1}, DstIP: net.ParseIP(vip).To4()}
	tcp := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: 80, SYN: flags == "S", ACK: flags == "A", Window: 100}
	tcp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, tcp)
	return buf.Bytes()
}

// send injects a frame on queue 0 and returns the address it was forwarded
// to (the outer destination for DSR).
func (td *testDaemon) send(frame []byte) netip.Addr {
	td.t.Helper()
	q := td.plat.queues[0]
	q.Inject(frame, 0)
	select {
	case f := <-q.Output():
		p := gopacket.NewPacket(f.Data, layers.LayerTypeEthernet, gopacket.Default)
		ip, ok := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		if !ok {
			td.t.Fatalf("forwarded frame is not IPv4:\n%s", p.Dump())
		}
		a, _ := netip.AddrFromSlice(ip.DstIP.To4())
		return a
	case <-time.After(30 * time.Second):
		td.t.Fatalf("nothing forwarded")
	}
	return netip.Addr{}
}

func (td *testDaemon) rewrite(src string) {
	src = strings.ReplaceAll(src, "@SOCKET@", td.socket)
	if !strings.Contains(src, "state_file") {
		// Drains and overrides are saved in the state file: never the
		// default one, which a vipd on this box may own.
		src = strings.Replace(src, "[dataplane]\n", fmt.Sprintf("[dataplane]\nstate_file = %q\n", filepath.Join(filepath.Dir(td.path), "state.json")), 1)
	}
	if err := os.WriteFile(td.path, []byte(src), 0o644); err != nil {
		td.t.Fatal(err)
	}
}

func TestForwardAndStop(t *testing.T) {
	td := start(t, testConfig)
	if got := td.send(syn(t, "198.18.0.100", 1000, "S")); !strings.HasPrefix(got.String(), "198.18.1.1") {
		t.Errorf("forwarded to %v", got)
	}
	if got := td.send(syn(t, "198.18.0.101", 1000, "S")); got != netip.MustParseAddr("198.18.1.11") {
		t.Errorf("DSR outer destination %v", got)
	}
	st := td.plat.lastSteering()
	if len(st.VIPs) != 2 || len(st.Replies) != 2 {
		t.Errorf("steering: %+v", st)
	}
	if err := td.stop(); err != nil {
		t.Errorf("Run returned %v on a clean stop", err)
	}
	if !td.plat.closed {
		t.Errorf("platform not closed on stop")
	}
}

func TestReload(t *testing.T) {
	td := start(t, testConfig)
	// Pin 20 flows, then add a backend: every pinned flow must stay.
	pinned := map[uint16]netip.Addr{}
	for p := uint16(2000); p < 2020; p++ {
		pinned[p] = td.send(syn(t, "198.18.0.100", p, "S"))
	}
	added := strings.Replace(testConfig, "[[vip]]\nname = \"dsr\"", "[[vip.backend]]\naddress = \"198.18.1.13\"\nport = 8080\n\n[[vip]]\nname = \"dsr\"", 1)
	td.rewrite(added)
	if err := td.d.Reload(); err != nil {
		t.Fatalf("reload: %v", err)
	}
	for p, was := range pinned {
		if now := td.send(syn(t, "198.18.0.100", p, "A")); now != was {
			t.Errorf("flow %d moved from %v to %v across a reload", p, was, now)
		}
	}
	newSeen := false
	for p := uint16(3000); p < 3100 && !newSeen; p++ {
		newSeen = td.send(syn(t, "198.18.0.100", p, "S")) == netip.MustParseAddr("198.18.1.13")
	}
	if !newSeen {
		t.Errorf("the added backend got none of 100 new flows")
	}
	gen := td.d.generation()

	// A broken file changes nothing.
	td.rewrite("[dataplane]\ningress = \n")
	if err := td.d.Reload(); err == nil {
		t.Fatalf("a broken file reloaded")
	}
	// A change that needs a restart is refused too.
	td.rewrite(strings.Replace(added, "queues = 2", "queues = 3", 1))
	if err := td.d.Reload(); !errors.Is(err, ErrRestartNeeded) {
		t.Fatalf("queues change: %v", err)
	}
	if td.d.generation() != gen {
		t.Errorf("a refused reload published a snapshot")
	}
	for p, was := range pinned {
		if now := td.send(syn(t, "198.18.0.100", p, "A")); now != was {
			t.Errorf("after refused reloads flow %d moved from %v to %v", p, was, now)
		}
	}
	m := td.d.Metrics()
	if m.Reloads["ok"] != 1 || m.Reloads["error"] != 2 {
		t.Errorf("reload counters %v", m.Reloads)
	}
}

func TestAdminDrainStateMetrics(t *testing.T) {
	td := start(t, testConfig)
	addr := td.d.AdminAddr()
	pinned := map[uint16]netip.Addr{}
	for p := uint16(4000); p < 4040; p++ {
		pinned[p] = td.send(syn(t, "198.18.0.100", p, "S"))
	}
	ctx := context.Background()
	if err := client.Drain(ctx, td.socket, "web", "198.18.1.11:8080", true, ""); err != nil {
		t.Fatalf("drain: %v", err)
	}
	if err := client.Drain(ctx, td.socket, "web", "198.18.9.9:8080", true, ""); err == nil || !strings.Contains(err.Error(), "no backend") {
		t.Errorf("draining an unknown backend: %v", err)
	}
	for p, was := range pinned {
		if now := td.send(syn(t, "198.18.0.100", p, "A")); now != was {
			t.Errorf("flow %d left its draining backend %v for %v", p, was, now)
		}
	}
	for p := uint16(5000); p < 5050; p++ {
		if got := td.send(syn(t, "198.18.0.100", p, "S")); got == netip.MustParseAddr("198.18.1.11") {
			t.Fatalf("new flow %d went to the drained backend", p)
		}
	}
	st, err := client.FetchState(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	web := st.VIPs[0]
	b0 := web.Backends[0]
	if !b0.Drained || b0.Forwarding != "draining" || b0.MaglevWeight != 0 {
		t.Errorf("drained backend state %+v", b0)
	}
	onDrained := 0
	for _, a := range pinned {
		if a == netip.MustParseAddr("198.18.1.11") {
			onDrained++
		}
	}
	if b0.ActiveFlows != onDrained {
		t.Errorf("active flows on the drained backend: %d, want %d", b0.ActiveFlows, onDrained)
	}
	// "Where would this flow go?" agrees with where a new flow went.
	for p := uint16(6000); p < 6010; p++ {
		got := td.send(syn(t, "198.18.0.100", p, "S"))
		ans, err := client.Where(ctx, addr, "web", "198.18.0.1:"+fmt.Sprint(p), 0)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(ans.Backend, got.String()+":") {
			t.Errorf("flow from port %d went to %v, /v1/where says %q", p, got, ans.Backend)
		}
	}
	if _, err := client.Where(ctx, addr, "nope", "198.18.0.1:1", 0); err == nil {
		t.Errorf("/v1/where answered for an unknown VIP")
	}

	// /metrics parses, and its counters match the 40+40+50+10 packets sent.
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	// Counters are published by workers every 100 ms; wait for them.
	// Counters only grow: wait until they reach the total, then check
	// they did not pass it.
	testkit.Poll(testkit.Patience, func() bool {
		if metric(fams, "vipd_vip_packets_total", "vip", "web") >= 140 {
			return true
		}
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		fams, err = parser.TextToMetricFamilies(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		return false
	})
	if v := metric(fams, "vipd_vip_packets_total", "vip", "web"); v != 140 {
		t.Errorf("vipd_vip_packets_total{vip=web} = %v, want 140", v)
	}
	if v := metric(fams, "vipd_vip_new_flows_total", "vip", "web"); v != 100 {
		t.Errorf("new flows %v, want 100", v)
	}
	for state, want := range map[string]float64{"up": 0, "draining": 1, "down": 0} {
		if v := metric2(fams, "vipd_backend_forwarding", "backend", "198.18.1.11:8080", "state", state); v != want {
			t.Errorf("backend_forwarding{state=%q} of the drained backend %v, want %v", state, v, want)
		}
	}
	if _, ok := fams["vipd_drops_total"]; !ok {
		t.Errorf("no drops metric")
	}
	if fams["vipd_worker_batch_size"].GetType().String() != "HISTOGRAM" {
		t.Errorf("batch size is not a histogram")
	}
}

// metric returns the value of the sample of family name whose label has
// value val.
// metric2 is metric for the series with two labels' values, a and b
// (name, value pairs).
func metric2(fams map[string]*dto.MetricFamily, name, la, va, lb, vb string) float64 {
	for _, m := range fams[name].GetMetric() {
		n := 0
		for _, l := range m.GetLabel() {
			if l.GetName() == la && l.GetValue() == va || l.GetName() == lb && l.GetValue() == vb {
				n++
			}
		}
		if n == 2 {
			return m.GetGauge().GetValue()
		}
	}
	return -1
}

func metric(fams map[string]*dto.MetricFamily, name, label, val string) float64 {
	f, ok := fams[name]
	if !ok {
		return -1
	}
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label && l.GetValue() == val {
				if c := m.GetCounter(); c != nil {
					return c.GetValue()
				}
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

// TestDrainFailsCleanly: a drain whose publish fails (here every full
// publish fails: the egress lost the address a DSR VIP encapsulates
// from) is reported failed and forgotten; it used to stay recorded, shown
// as drained while forwarding, and applied by the next publish that
// worked, behind the operator's back.
func TestDrainFailsCleanly(t *testing.T) {
	td := start(t, strings.Replace(testConfig, "encap_source = \"198.18.1.1\"\n", "", 1))
	td.plat.mu.Lock()
	td.plat.host.Addr4[1] = netip.Addr{}
	td.plat.mu.Unlock()
	if err := td.d.publish("host"); err == nil {
		t.Fatal("the test needs publishing to fail")
	}
	if err := td.d.SetDrain("web", "198.18.1.11:8080", true, ""); err == nil {
		t.Fatal("SetDrain reported success with publishing failing")
	}
	td.plat.mu.Lock()
	td.plat.host.Addr4[1] = netip.MustParseAddr("198.18.1.1")
	td.plat.mu.Unlock()
	if err := td.d.publish("host"); err != nil {
		t.Fatal(err)
	}
	st, err := td.d.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if b := st.VIPs[0].Backends[0]; b.Drained || b.Forwarding != "up" {
		t.Errorf("a drain reported failed was applied later: drained %v, forwarding %s", b.Drained, b.Forwarding)
	}
}
