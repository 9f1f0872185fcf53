package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/testing/nstest"
	"github.com/vipd/vipd/testing/testbed"
	"github.com/vipd/vipd/testing/testbed/stream"
	"github.com/vipd/vipd/testing/testkit"
)

// patience bounds every wait for something that should happen. A wait
// ends as soon as the thing happens, so the bound costs nothing then, and
// it leaves a machine whose CPUs are busy with other work (CI's normal
// case) the time it needs: how fast vipd is belongs to the benchmarks.
const patience = 30 * time.Second

// patient returns d, or patience when d is shorter: the time a scenario
// expects a wait to take is no bound on a busy machine.
func patient(d time.Duration) time.Duration { return max(d, patience) }

// waitFor fails t unless cond holds within patient(limit).
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, patient(limit), what, cond)
}

// waitStable fails t unless cond holds for window without a break within
// patient(limit).
func waitStable(t *testing.T, limit, window time.Duration, what string, cond func() bool) {
	t.Helper()
	testkit.Stable(t, patient(limit), window, what, cond)
}

// env is one scenario's bed and vipd.
type env struct {
	t   *testing.T
	bed *testbed.Bed
	v   *testbed.VIPD
	c   *http.Client
}

// requireE2E skips unless the suite can run: as root, and not in -short
// mode (make test runs it once, in the unit-test pass, not again under the
// race detector).
func requireE2E(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end suite skipped in -short mode")
	}
	nstest.RequireRoot(t)
}

func setup(t *testing.T, o testbed.Options, co testbed.ConfigOptions) *env {
	t.Helper()
	requireE2E(t)
	bed := testbed.New(t, o)
	e := &env{t: t, bed: bed, c: bed.HTTPClient(60 * time.Second)}
	e.v = bed.StartVIPD(bed.Config(co))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("vipd log:\n%s", tail(e.v.Log(), 60))
		}
	})
	return e
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// urls of the bed's VIPs.
var (
	natURL = fmt.Sprintf("http://%s", testbed.VIPNAT)
	dsrURL = fmt.Sprintf("http://%s", testbed.VIPDSR)
)

// names sends n requests on fresh connections and counts answers per
// backend. Every request must succeed.
func (e *env) names(url string, n int) map[string]int {
	e.t.Helper()
	counts := map[string]int{}
	for i := 0; i < n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		body, err := testbed.Get(ctx, e.c, url+"/")
		cancel()
		if err != nil {
			e.t.Fatalf("request %d of %d to %s: %v", i+1, n, url, err)
		}
		counts[strings.TrimSpace(body)]++
	}
	return counts
}

// download fetches n bytes and checks them against the stream.
func (e *env) download(url string, n int64) (backend string, err error) {
	resp, err := e.c.Get(fmt.Sprintf("%s/bytes?n=%d", url, n))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	want := sha256.New()
	io.CopyN(want, stream.New(), n)
	got := sha256.New()
	m, err := io.Copy(got, resp.Body)
	if err != nil {
		return "", fmt.Errorf("after %d bytes: %w", m, err)
	}
	if m != n || hex.EncodeToString(got.Sum(nil)) != hex.EncodeToString(want.Sum(nil)) {
		return "", fmt.Errorf("downloaded %d bytes, sha256 mismatch (want %d bytes)", m, n)
	}
	return resp.Header.Get("X-Backend"), nil
}

// upload posts n bytes of the stream and checks the backend's sha256.
func (e *env) upload(url string, n int64) (backend string, err error) {
	resp, err := e.c.Post(url+"/upload", "application/octet-stream", io.LimitReader(stream.New(), n))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	want := sha256.New()
	io.CopyN(want, stream.New(), n)
	var name, sum string
	var got int64
	if _, err := fmt.Sscanf(string(body), "%s %d %s", &name, &got, &sum); err != nil {
		return "", fmt.Errorf("upload answer %q: %v", body, err)
	}
	if got != n || sum != hex.EncodeToString(want.Sum(nil)) {
		return name, fmt.Errorf("backend received %d bytes with sha256 %s, want %d bytes", got, sum, n)
	}
	return name, nil
}

// checkShares checks per-backend counts against weights. Each backend's
// count is binomial(n, p_i) if flows hash like independent draws (Maglev
// over kernel-chosen source ports); the bound is 4.5 standard deviations,
// so a correct balancer fails it with probability below 1e-5 per backend,
// while a backend missing or taking twice its share fails it for n=300.
func checkShares(t *testing.T, counts map[string]int, weights map[string]int, n int) {
	t.Helper()
	fw := make(map[string]float64, len(weights))
	for name, w := range weights {
		fw[name] = float64(w)
	}
	checkFloatShares(t, counts, fw, n)
}

// checkFloatShares is checkShares for weights that are not integers
// (effective weights scaled by load reports).
func checkFloatShares(t *testing.T, counts map[string]int, weights map[string]float64, n int) {
	t.Helper()
	total := 0.0
	for _, w := range weights {
		total += w
	}
	for name, w := range weights {
		p := w / total
		mean, sd := p*float64(n), math.Sqrt(float64(n)*p*(1-p))
		if got := float64(counts[name]); math.Abs(got-mean) > 4.5*sd {
			t.Errorf("%s took %v of %d, want %.0f ± %.0f (weight %.4g of %.4g): %v", name, got, n, mean, 4.5*sd, w, total, counts)
		}
	}
	for name := range counts {
		if _, ok := weights[name]; !ok {
			t.Errorf("unexpected backend %q answered", name)
		}
	}
}

// metric reads one metric from vipd.
func (e *env) metric(name string, labels ...string) float64 {
	e.t.Helper()
	fams, err := e.v.Metrics()
	if err != nil {
		e.t.Fatalf("metrics: %v", err)
	}
	return testbed.Metric(fams, name, labels...)
}

// eventually reads a metric until cond holds (workers publish their
// counters every 100 ms) or patience runs out, and returns the last value.
func (e *env) eventually(cond func(float64) bool, name string, labels ...string) float64 {
	e.t.Helper()
	return e.eventuallyFor(patience, cond, name, labels...)
}

// eventuallyFor is eventually for at most patient(d).
func (e *env) eventuallyFor(d time.Duration, cond func(float64) bool, name string, labels ...string) float64 {
	e.t.Helper()
	var v float64
	testkit.Poll(patient(d), func() bool { v = e.metric(name, labels...); return cond(v) })
	return v
}

// tcpInSegs returns how many TCP segments the namespaces have received
// (the Tcp InSegs counter of each one's /proc/net/snmp, summed).
func tcpInSegs(t *testing.T, nss ...*nstest.NS) float64 { return tcpCounter(t, "InSegs", nss...) }

// tcpOutSegs is tcpInSegs for the segments they sent (Tcp OutSegs,
// retransmissions included).
func tcpOutSegs(t *testing.T, nss ...*nstest.NS) float64 { return tcpCounter(t, "OutSegs", nss...) }

// tcpCounter sums the Tcp counter name of the namespaces' /proc/net/snmp.
func tcpCounter(t *testing.T, name string, nss ...*nstest.NS) float64 {
	t.Helper()
	total := 0.0
	for _, ns := range nss {
		var snmp []byte
		err := ns.Do(func() (err error) {
			snmp, err = os.ReadFile("/proc/thread-self/net/snmp")
			return err
		})
		if err != nil {
			t.Fatalf("TCP counters of %s: %v", ns.Name, err)
		}
		v, err := snmpValue(string(snmp), "Tcp", name)
		if err != nil {
			t.Fatalf("TCP counters of %s: %v", ns.Name, err)
		}
		total += v
	}
	return total
}

// snmpValue finds a counter in /proc/net/snmp: a line of names after the
// group's prefix, then a line of values.
func snmpValue(snmp, group, name string) (float64, error) {
	lines := strings.Split(snmp, "\n")
	for i := 0; i+1 < len(lines); i++ {
		names, values := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(names) == 0 || names[0] != group+":" || len(values) != len(names) || values[0] != group+":" {
			continue
		}
		for j, n := range names {
			if n == name {
				return strconv.ParseFloat(values[j], 64)
			}
		}
	}
	return 0, fmt.Errorf("no %s %s in /proc/net/snmp", group, name)
}

// natMark is the state before some TCP traffic through a NAT VIP, for
// settled.
type natMark struct {
	vip     string
	ends    []*nstest.NS
	packets float64 // natPackets
	inSegs  float64 // tcpInSegs(ends...)
}

// markNAT notes the counters before TCP traffic through NAT VIP vip
// between the namespaces ends (its clients and backends). No traffic of
// the VIP may be in flight, and the ends must have no other TCP traffic
// until settled returns.
func (e *env) markNAT(vip string, ends ...*nstest.NS) natMark {
	e.t.Helper()
	fams, err := e.v.Metrics()
	if err != nil {
		e.t.Fatalf("metrics: %v", err)
	}
	return natMark{vip: vip, ends: ends, packets: natPackets(fams, vip), inSegs: tcpInSegs(e.t, ends...)}
}

// natPackets is what NAT VIP vip forwarded both ways: its clients'
// packets and its backends' replies.
func natPackets(fams map[string]*dto.MetricFamily, vip string) float64 {
	return testbed.Metric(fams, "vipd_vip_packets_total", "vip", vip) + testbed.Metric(fams, "vipd_vip_out_packets_total", "vip", vip)
}

// backendNS returns the backends' namespaces.
func (e *env) backendNS() []*nstest.NS {
	var nss []*nstest.NS
	for _, be := range e.bed.Backends {
		nss = append(nss, be.NS)
	}
	return nss
}

// settled waits until vipd has published counters that include all of the
// traffic since m that had reached its ends when settled was called, and
// returns that scrape. In NAT mode vipd forwarded, and counted in
// vipd_vip_packets_total (from clients) or vipd_vip_out_packets_total
// (replies), each segment an end received before it arrived,
// so the wait ends. A worker publishes all its counters at once, so the
// scrape also shows whatever a worker did before it forwarded the last of
// those segments: the drops and ICMP messages the traffic caused, but for
// packets still in flight when settled was called. (Each segment vipd
// counted but did not deliver — too big, or lost on the way — lets the wait
// end one segment early.)
func (e *env) settled(m natMark) map[string]*dto.MetricFamily {
	e.t.Helper()
	want := m.packets + tcpInSegs(e.t, m.ends...) - m.inSegs
	var fams map[string]*dto.MetricFamily
	var got float64
	if !testkit.Poll(patience, func() bool {
		var err error
		if fams, err = e.v.Metrics(); err != nil {
			e.t.Fatalf("metrics: %v", err)
		}
		got = natPackets(fams, m.vip)
		return got >= want
	}) {
		e.t.Fatalf("vipd counted %v packets for %s, the namespaces received %v", got-m.packets, m.vip, want-m.packets)
	}
	return fams
}

// waitBackends polls vipd's state until every backend of VIP vip has been
// checked and has the health want ("up", "down", ...), for at most
// patience, and returns that state. It replaces sleeping for "the first
// checks", which a busy machine makes late.
func (e *env) waitBackends(vip, want string) *api.State {
	e.t.Helper()
	var st *api.State
	var err error
	if !testkit.Poll(patience, func() bool {
		if st, err = e.v.State(); err != nil {
			return false
		}
		for _, v := range st.VIPs {
			if v.Name != vip {
				continue
			}
			all := len(v.Backends) > 0
			for _, b := range v.Backends {
				all = all && b.Health == want
			}
			if all {
				return true
			}
		}
		return false
	}) {
		e.t.Fatalf("the backends of %s are not all %s after %v: %+v (%v)", vip, want, patience, st, err)
	}
	return st
}
