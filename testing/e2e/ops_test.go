package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vipd/vipd/testing/testbed"
)

// monitoredMetrics returns the vipd_* metric names the packaged Grafana
// dashboard's queries and the alerting rules' expressions use.
func monitoredMetrics(t *testing.T) []string {
	t.Helper()
	var exprs []string
	data, err := os.ReadFile("../../packaging/monitoring/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Targets []struct{ Expr string }
		}
		Templating struct{ List []struct{ Query any } }
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(string); ok {
			exprs = append(exprs, q)
		}
	}
	rules, err := os.ReadFile("../../packaging/monitoring/prometheus-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^\s*expr: (.*)$`).FindAllStringSubmatch(string(rules), -1) {
		exprs = append(exprs, m[1])
	}
	var names []string
	for _, e := range exprs {
		names = append(names, regexp.MustCompile(`\bvipd_[a-z0-9_]+`).FindAllString(e, -1)...)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if len(names) < 10 {
		t.Fatalf("only %d metric names found in the dashboard and rules: %v", len(names), names)
	}
	return names
}

// fleetMetric is the prefix of the metrics only a box with [fleet]
// exports: TestFleet checks those (a box of this test has no fleet).
const fleetMetric = "vipd_fleet_"

// TestMonitoredMetricsExist runs vipd with health checks and [bgp] (BIRD
// as the router, so that the VIPs are reachable), sends traffic and
// a reload, and checks that every metric the dashboard and the alerting
// rules name is on its /metrics: a renamed metric would leave a panel
// empty and an alert silent. The fleet's are TestFleet's to check.
func TestMonitoredMetricsExist(t *testing.T) {
	want := slices.DeleteFunc(monitoredMetrics(t), func(name string) bool { return strings.HasPrefix(name, fleetMetric) })
	requireE2E(t)
	testbed.RequireBird(t)
	bed := testbed.New(t, testbed.Options{})
	bed.StartBird(bed.Router, testbed.BirdOptions{
		ASN: routerASN, RouterID: testbed.RouterBox,
		Peers: []testbed.BirdPeer{{Name: "box1", Addr: testbed.BoxIngress, ASN: boxASN}},
	})
	e := &env{t: t, bed: bed, c: bed.HTTPClient(10 * time.Second)}
	e.v = bed.StartVIPD(bed.Config(testbed.ConfigOptions{Health: testbed.FastHealth, Extra: bgpKeys("")}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("vipd log:\n%s", tail(e.v.Log(), 30))
		}
	})
	for _, vip := range []netip.Addr{testbed.VIPNAT, testbed.VIPDSR} {
		waitHops(t, bed, vip, []netip.Addr{testbed.BoxIngress}, 20*time.Second, "announced")
	}
	e.names(natURL, 5)
	e.names(dsrURL, 5)
	if err := e.v.Reload(e.bed.Config(testbed.ConfigOptions{Health: testbed.FastHealth, Extra: bgpKeys("")}), "ok"); err != nil {
		t.Fatal(err)
	}
	fams, err := e.v.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range want {
		if _, ok := fams[name]; !ok {
			t.Errorf("%s is used by the dashboard or the rules but not on /metrics", name)
		}
	}
}

// unitCaps returns the capabilities of vipd.service's
// CapabilityBoundingSet, lower case without CAP_, as setpriv names them.
func unitCaps(t *testing.T) []string {
	t.Helper()
	unit, err := os.ReadFile("../../packaging/deb/vipd.service")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^CapabilityBoundingSet=(.*)$`).FindStringSubmatch(string(unit))
	if m == nil {
		t.Fatal("vipd.service has no CapabilityBoundingSet")
	}
	var caps []string
	for _, c := range strings.Fields(m[1]) {
		caps = append(caps, strings.ToLower(strings.TrimPrefix(c, "CAP_")))
	}
	return caps
}

// TestUnitCapabilities measures vipd.service's capability set: vipd runs
// as root bounded to exactly those capabilities (setpriv, as systemd's
// CapabilityBoundingSet does) with LimitMEMLOCK=infinity (prlimit), and
// must come up and forward; without each of CAP_NET_ADMIN, CAP_NET_RAW,
// CAP_BPF and CAP_PERFMON, or with a small memlock limit, it must fail to
// start, so that the unit grants nothing it does not need for the
// dataplane.
// (CAP_NET_BIND_SERVICE is for a passive BGP peer on port 179.)
func TestUnitCapabilities(t *testing.T) {
	requireE2E(t)
	for _, tool := range []string{"setpriv", "prlimit"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s (util-linux) is missing", tool)
		}
	}
	caps := unitCaps(t)
	for _, c := range []string{"net_admin", "net_raw", "bpf", "perfmon"} {
		if !slices.Contains(caps, c) {
			t.Fatalf("vipd.service bounds vipd to %v, without %s", caps, c)
		}
	}
	bed := testbed.New(t, testbed.Options{})
	cfg := filepath.Join(t.TempDir(), "vipd.toml")
	// A UMEM that fits this machine's memlock hard limit, which a test
	// without CAP_SYS_RESOURCE cannot raise to LimitMEMLOCK=infinity: 1024
	// frames of 4 KiB, 4 MiB, under the usual 8 MiB, with rings small
	// enough that receive and transmit do not starve each other.
	src := strings.Replace(bed.Config(testbed.ConfigOptions{}), "frame_count = 4096\n", "frame_count = 1024\nfill_ring_size = 512\ntx_ring_size = 512\n", 1)
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{DialContext: testbed.Dialer(bed.Box), DisableKeepAlives: true}, Timeout: 10 * time.Second}
	// start runs vipd bounded to caps, with memlock as its memlock limit
	// when not "", and calls whileUp once it is up; it returns
	// whether vipd came up (healthz 200) and its log; vipd is stopped.
	n := 0
	start := func(caps []string, memlock string, whileUp func()) (bool, string) {
		t.Helper()
		n++
		name := fmt.Sprintf("vipd-caps-%d", n)
		set := "-all"
		for _, c := range caps {
			set += ",+" + c
		}
		args := []string{"setpriv"}
		if memlock != "" {
			args = []string{"prlimit", "--memlock=" + memlock, "--", "setpriv"}
		}
		cmd := bed.Spawn(bed.Box, name, args[0], append(args[1:], "--bounding-set="+set, "--inh-caps=-all", "--",
			bed.Bin.VIPD, "-config", cfg)...)
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		defer func() {
			select {
			case <-exited:
			default:
				cmd.Process.Signal(os.Interrupt)
				select {
				case <-exited:
				case <-time.After(patience):
					cmd.Process.Kill()
					<-exited
				}
			}
		}()
		deadline := time.Now().Add(patience)
		for time.Now().Before(deadline) {
			select {
			case <-exited:
				return false, fmt.Sprintf("%s\n(%v)", bed.Log(name), cmd.ProcessState)
			default:
			}
			if resp, err := client.Get("http://" + testbed.AdminAddr + "/healthz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					if whileUp != nil {
						defer func() {
							if t.Failed() {
								t.Logf("vipd log:\n%s", tail(bed.Log(name), 30))
							}
						}()
						whileUp()
					}
					return true, bed.Log(name)
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		return false, bed.Log(name)
	}
	e := &env{t: t, bed: bed, c: bed.HTTPClient(10 * time.Second)}
	forwards := func() {
		e.names(natURL, 3)
		e.names(dsrURL, 3)
	}
	if up, log := start(caps, "", forwards); !up {
		t.Fatalf("bounded to the unit's %v, vipd did not come up:\n%s", caps, tail(log, 20))
	}
	for _, drop := range []string{"net_admin", "net_raw", "bpf", "perfmon"} {
		less := slices.DeleteFunc(slices.Clone(caps), func(c string) bool { return c == drop })
		if up, log := start(less, "", nil); up {
			t.Errorf("without %s vipd came up anyway: the unit need not grant it\n%s", drop, tail(log, 10))
		}
	}
	if up, log := start(caps, "65536", nil); up {
		t.Errorf("with a 64 KiB memlock limit vipd came up anyway: LimitMEMLOCK=infinity is not needed\n%s", tail(log, 10))
	}
}

// TestSystemdNotify runs vipd as systemd would run vipd.service, with
// $NOTIFY_SOCKET (a socket of the test's) and a 1 s $WATCHDOG_USEC, and
// follows what it tells systemd: READY=1 once /healthz answers 200 (not
// before), WATCHDOG=1 about every 500 ms, RELOADING=1 then READY=1 around a
// SIGHUP, STOPPING=1 on SIGTERM.
func TestSystemdNotify(t *testing.T) {
	requireE2E(t)
	bed := testbed.New(t, testbed.Options{})
	dir, err := os.MkdirTemp("", "vipd-notify")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	cfg := filepath.Join(dir, "vipd.toml")
	if err := os.WriteFile(cfg, []byte(bed.Config(testbed.ConfigOptions{})), 0o644); err != nil {
		t.Fatal(err)
	}
	// The socket is a file: vipd in the box's network namespace reaches it.
	cmd := bed.Spawn(bed.Box, "vipd-notify", "env", "NOTIFY_SOCKET="+sock, "WATCHDOG_USEC=1000000", bed.Bin.VIPD, "-config", cfg)
	client := &http.Client{Transport: &http.Transport{DialContext: testbed.Dialer(bed.Box), DisableKeepAlives: true}, Timeout: 10 * time.Second}
	healthy := func() bool {
		resp, err := client.Get("http://" + testbed.AdminAddr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	// next returns the next message that is not WATCHDOG=1, counting those.
	watchdogs := 0
	next := func(what string) string {
		t.Helper()
		buf := make([]byte, 4096)
		conn.SetReadDeadline(time.Now().Add(patience))
		for {
			n, err := conn.Read(buf)
			if err != nil {
				t.Fatalf("waiting for %s: %v\n%s", what, err, tail(bed.Log("vipd-notify"), 20))
			}
			if m := string(buf[:n]); m == "WATCHDOG=1" {
				watchdogs++
			} else {
				return m
			}
		}
	}
	if m := next("READY=1"); !strings.HasPrefix(m, "READY=1") {
		t.Fatalf("first message %q, want READY=1", m)
	}
	if !healthy() {
		t.Error("READY=1 arrived while /healthz did not answer 200")
	}
	// Two watchdog pings before the reload (about a second's worth; how
	// regular they are is the daemon's unit tests' to check, without a
	// busy machine's scheduling in the way).
	buf := make([]byte, 4096)
	conn.SetReadDeadline(time.Now().Add(patience))
	for watchdogs < 2 {
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("waiting for two WATCHDOG=1 (%d so far): %v\n%s", watchdogs, err, tail(bed.Log("vipd-notify"), 20))
		}
		if m := string(buf[:n]); m != "WATCHDOG=1" {
			t.Fatalf("while running: %q, want only WATCHDOG=1", m)
		}
		watchdogs++
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if m := next("RELOADING=1"); !strings.HasPrefix(m, "RELOADING=1\nMONOTONIC_USEC=") {
		t.Errorf("after SIGHUP: %q, want RELOADING=1 with MONOTONIC_USEC", m)
	}
	if m := next("READY=1 after the reload"); m != "READY=1" {
		t.Errorf("after the reload: %q, want READY=1", m)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if m := next("STOPPING=1"); m != "STOPPING=1" {
		t.Errorf("after SIGTERM: %q, want STOPPING=1", m)
	}
}
