package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/testing/testbed"
	"github.com/vipd/vipd/testing/testkit"
)

// TestBlackHole: a NAT backend whose SYN-ACKs to clients are dropped (an
// nftables rule in its namespace) while its health check passes. vipd
// status names it and why within seconds; the alert VipdBackendBlackHole,
// evaluated by promtool on the rates of two scrapes of the real /metrics,
// fires for it and for no other backend; with passive ejection turned on
// by a reload, new flows go to the other backends. Before the rule, a
// healthy run: no backend flagged, no alert.
func TestBlackHole(t *testing.T) {
	requireE2E(t)
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft (nftables) is not installed: make test-deps installs it as root")
	}
	pt := promtoolPath(t)
	co := testbed.ConfigOptions{Health: testbed.FastHealth}
	e := setup(t, testbed.Options{}, co)
	be := e.bed.Backends[0]
	beName := api.HostPort(be.Addr.String(), 8080)

	// Clients: fresh connections to the NAT VIP from four goroutines,
	// each given 300 ms; bounded in count and time.
	var tries, fails atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	deadline := time.Now().Add(4 * patience)
	c := e.bed.HTTPClient(300 * time.Millisecond)
	for range 4 {
		wg.Go(func() {
			for tries.Load() < 40_000 && time.Now().Before(deadline) {
				select {
				case <-stop:
					return
				default:
				}
				tries.Add(1)
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				if _, err := testbed.Get(ctx, c, natURL+"/"); err != nil {
					fails.Add(1)
				}
				cancel()
			}
		})
	}
	var once sync.Once
	halt := func() { once.Do(func() { close(stop); wg.Wait() }) }
	t.Cleanup(halt)

	backendOf := func(st *api.State) *api.BackendState {
		for i := range st.VIPs {
			if st.VIPs[i].Name != "web-nat" {
				continue
			}
			for j := range st.VIPs[i].Backends {
				if b := &st.VIPs[i].Backends[j]; b.Address == be.Addr.String() {
					return b
				}
			}
		}
		t.Fatal("no backend1 in web-nat")
		return nil
	}
	flagged := func() map[string]string {
		st, err := e.v.State()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, v := range st.VIPs {
			for _, b := range v.Backends {
				if h := b.Handshakes; h != nil && h.Unanswered != "" {
					out[v.Name+" "+b.Address] = h.Unanswered
				}
			}
		}
		return out
	}

	// Healthy: every backend answers; nothing is flagged, no alert fires.
	nat := []string{"vip", "web-nat"}
	s1, at1 := e.handshakeScrape(0, nat...)
	s2, at2 := e.handshakeScrape(testbed.Metric(s1, "vipd_backend_handshakes_total", nat...)+150, nat...)
	if f := flagged(); len(f) != 0 {
		t.Errorf("healthy run: flagged %v", f)
	}
	blackHoleAlerts(t, pt, s1, s2, at2.Sub(at1), "")
	if n := fails.Load(); n != 0 {
		t.Errorf("healthy run: %d of %d requests failed", n, tries.Load())
	}

	// The backend's SYN-ACKs to the client are dropped; its answers to
	// the box's health checks are not.
	be.NS.Must(t, "nft", "add", "table", "inet", "vipdblackhole")
	t.Cleanup(func() { be.NS.Cmd("nft", "delete", "table", "inet", "vipdblackhole").Run() })
	be.NS.Must(t, "nft", "add", "chain", "inet", "vipdblackhole", "out", "{ type filter hook output priority 0 ; }")
	be.NS.Must(t, "nft", "add", "rule", "inet", "vipdblackhole", "out", "ip", "daddr", testbed.ClientAddr.String(),
		"tcp", "sport", "8080", "tcp flags & (syn|ack) == syn|ack", "drop")
	dropped := time.Now()
	var why string
	waitFor(t, patience, "vipd status to flag backend1", func() bool {
		why = flagged()["web-nat "+be.Addr.String()]
		return why != ""
	})
	t.Logf("backend1 flagged %v after its SYN-ACKs were dropped: %q", time.Since(dropped).Round(10*time.Millisecond), why)
	if !strings.HasPrefix(why, "answered 0 of ") {
		t.Errorf("why %q, want answered 0 of N", why)
	}
	st, err := e.v.State()
	if err != nil {
		t.Fatal(err)
	}
	if h := backendOf(st).Health; h != "up" {
		t.Errorf("backend1's health %q: its check must pass", h)
	}
	if f := flagged(); len(f) != 1 {
		t.Errorf("flagged %v, want backend1 alone", f)
	}
	if out := e.bed.Box.Must(t, e.bed.Bin.VIPD, "status", "-admin", testbed.AdminAddr); !strings.Contains(out, why) {
		// vipd status names it too, in the Why column.
		t.Errorf("vipd status lacks %q:\n%s", why, out)
	}
	be1 := []string{"vip", "web-nat", "backend", beName}
	s3, at3 := e.handshakeScrape(0, be1...)
	s4, at4 := e.handshakeScrape(testbed.Metric(s3, "vipd_backend_handshakes_total", be1...)+30, be1...)
	blackHoleAlerts(t, pt, s3, s4, at4.Sub(at3), beName)

	// Passive ejection on: backend1 is ejected, new flows go elsewhere.
	co.VIPKeys = map[string]string{"web-nat": "[vip.outlier]\nenabled = true\nwindow = \"3s\"\ntimeout = \"1s\"\nmin_handshakes = 5\nbase_ejection = \"30s\"\n"}
	if err := e.v.Reload(e.bed.Config(co), "ok"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, patience, "backend1 to be ejected", func() bool {
		st, err := e.v.State()
		return err == nil && backendOf(st).Health == "ejected"
	})
	halt()
	if counts := e.names(natURL, 30); counts["backend1"] != 0 {
		t.Errorf("new flows reached the ejected backend: %v", counts)
	}
}

// handshakeScrape waits until the handshakes of the backends with labels
// (name, value pairs) reach atLeast (the workers publish every 100 ms,
// the clients run meanwhile), then scrapes /metrics and returns it with
// the time of the scrape.
func (e *env) handshakeScrape(atLeast float64, labels ...string) (map[string]*dto.MetricFamily, time.Time) {
	e.t.Helper()
	var fams map[string]*dto.MetricFamily
	var at time.Time
	ok := testkit.Poll(patience, func() bool {
		var err error
		at = time.Now()
		if fams, err = e.v.Metrics(); err != nil {
			e.t.Fatalf("metrics: %v", err)
		}
		return testbed.Metric(fams, "vipd_backend_handshakes_total", labels...) >= atLeast
	})
	if !ok {
		e.t.Fatalf("handshakes of %v did not reach %v", labels, atLeast)
	}
	return fams, at
}

// blackHoleAlerts runs promtool's rule tests on the handshake counters of
// two scrapes dt apart: each series goes on at the rate measured between
// them, scraped every 15 s for 5 minutes, and VipdBackendBlackHole must
// fire for backend (vip web-nat) and no other, or for none when backend
// is "".
func blackHoleAlerts(t *testing.T, promtool string, a, b map[string]*dto.MetricFamily, dt time.Duration, backend string) {
	t.Helper()
	var series []string
	for _, name := range []string{"vipd_backend_handshakes_total", "vipd_backend_handshakes_answered_total"} {
		for _, m := range b[name].GetMetric() {
			var labels []string
			var want []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				want = append(want, l.GetName(), l.GetValue())
			}
			v2 := m.GetCounter().GetValue()
			v1 := testbed.Metric(a, name, want...)
			step := (v2 - v1) * 15 / dt.Seconds()
			series = append(series, fmt.Sprintf("      - series: '%s{instance=\"box\",%s}'\n        values: '%g+%gx20'\n",
				name, strings.Join(labels, ","), v2, step))
		}
	}
	slices.Sort(series)
	exp := "        exp_alerts: []\n"
	if backend != "" {
		exp = fmt.Sprintf(`        exp_alerts:
          - exp_labels: {severity: critical, instance: box, vip: web-nat, backend: %q}
            exp_annotations:
              summary: "vipd box: backend %s of VIP web-nat answers 0%% of its TCP handshakes"
              description: %q
`, backend, backend, blackHoleDescription(t))
	}
	rules, err := filepath.Abs("../../packaging/monitoring/prometheus-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	doc := fmt.Sprintf("rule_files:\n  - %s\nevaluation_interval: 15s\ntests:\n  - interval: 15s\n    input_series:\n%s    alert_rule_test:\n      - eval_time: 5m\n        alertname: VipdBackendBlackHole\n%s",
		rules, strings.Join(series, ""), exp)
	file := filepath.Join(t.TempDir(), "blackhole_test.yml")
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "test", "rules", file).CombinedOutput(); err != nil {
		t.Errorf("promtool test rules (want the alert for %q): %v\n%s\n%s", backend, err, out, doc)
	}
}

// blackHoleDescription is the alert's description, as the rules file has
// it.
func blackHoleDescription(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../packaging/monitoring/prometheus-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "alert: VipdBackendBlackHole")
	if i < 0 {
		t.Fatal("no VipdBackendBlackHole in the rules")
	}
	s = s[i:]
	i = strings.Index(s, "description: \"")
	s = s[i+len("description: \""):]
	return s[:strings.Index(s, "\"\n")]
}

// promtoolPath is Prometheus's promtool: on PATH, or where `make
// test-deps` extracts it (bin/tools).
func promtoolPath(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	p, err := filepath.Abs("../../bin/tools/promtool")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Skip("promtool is missing: `make test-deps` as root extracts it from Debian's prometheus package into bin/tools")
	}
	return p
}
