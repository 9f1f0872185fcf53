package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/vipd/vipd/testing/testbed"
)

// Previous-owner forwarding end to end, which keeps connections whose
// Maglev owner changed mid-flow from being reset: DSR in GUE with
// previous_owner on the echo VIP, backends running vipd-decap with
// chaining, which hands a hinted packet whose connection it does not hold
// to the previous owner.

// decapMetrics is where each backend's vipd-decap serves its metrics, on
// its own namespace's loopback.
const decapMetrics = "127.0.0.1:9190"

// chainDecapArgs turn chaining on in the backends' vipd-decap and serve
// metrics. Their subnet is the chain peers: whom they chain to and take
// chained packets from.
var chainDecapArgs = []string{"-chain", "-chain-peers", "198.18.1.0/24", "-metrics", decapMetrics}

// previousKeys make the echo DSR VIP a GUE one with previous_owner.
func previousKeys(on bool) (encap string, keys map[string]string) {
	return "encap = \"gue\"\n", map[string]string{"echo-dsr": fmt.Sprintf("previous_owner = %v\n", on)}
}

// decapCounter sums a vipd-decap counter family over the backends, by
// label value of label (all values when label is "").
func decapCounter(t *testing.T, bed *testbed.Bed, name string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, be := range bed.Backends {
		c := &http.Client{Transport: &http.Transport{DialContext: testbed.Dialer(be.NS), DisableKeepAlives: true}, Timeout: patience}
		resp, err := c.Get("http://" + decapMetrics + "/metrics")
		if err != nil {
			t.Fatalf("%s's vipd-decap metrics: %v", be.Name, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(strings.NewReader(string(b)))
		if err != nil {
			t.Fatalf("%s's vipd-decap metrics: %v", be.Name, err)
		}
		f := fams[name]
		if f == nil {
			t.Fatalf("%s's vipd-decap has no %s", be.Name, name)
		}
		for _, m := range f.GetMetric() {
			key := ""
			for _, l := range m.GetLabel() {
				key += l.GetName() + "=" + l.GetValue() + " "
			}
			out[strings.TrimSpace(key)] += m.GetCounter().GetValue()
		}
	}
	return out
}

// checkChained requires that the backends' vipd-decap chained packets
// to previous owners, which received them: the flows survived by the
// mechanism, not by luck.
func checkChained(t *testing.T, bed *testbed.Bed) {
	t.Helper()
	o := decapCounter(t, bed, "vipd_decap_hint_outcomes_total")
	t.Logf("vipd-decap hint outcomes over the backends: %v", o)
	if o["outcome=chained_out"] == 0 || o["outcome=chained_in"] == 0 {
		t.Errorf("hinted packets: chained out %v, chained in %v; want both > 0", o["outcome=chained_out"], o["outcome=chained_in"])
	}
}

// TestPreviousOwnerRestart: on one box, 300 long-lived DSR connections
// stream while a fourth backend is added, then vipd restarts and loses its
// connection table: every flow comes back as a mid-stream miss and is
// picked by the new table. Without previous_owner the flows whose Maglev
// entry moved break (counted, and it must be some, or the test shows
// nothing); with it, none.
func TestPreviousOwnerRestart(t *testing.T) {
	for _, tc := range []struct {
		name string
		on   bool
	}{{"without", false}, {"with", true}} {
		t.Run(tc.name, func(t *testing.T) {
			requireE2E(t)
			bed := testbed.New(t, testbed.Options{Backends: 4, DecapArgs: chainDecapArgs})
			encap, keys := previousKeys(tc.on)
			co := testbed.ConfigOptions{Health: testbed.FastHealth, Echo: true, Backends: 3, DSREncap: encap, VIPKeys: keys}
			v := bed.StartVIPD(bed.Config(co))
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("vipd log:\n%s", tail(v.Log(), 40))
				}
			})
			ef, err := bed.StartEchoFlows(testbed.VIPDSR, 300)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("300 DSR connections on %v", ef.Backends())
			co.Backends = 4
			if err := v.Reload(bed.Config(co), "ok"); err != nil {
				t.Fatal(err)
			}
			if broken := ef.Settle(settleWait); len(broken) > 0 {
				t.Fatalf("the reload alone broke %d connections:\n  %s", len(broken), testbed.FirstN(broken, 5))
			}
			if err := v.Stop(); err != nil {
				t.Fatal(err)
			}
			v = bed.StartVIPD(bed.Config(co))
			broken := ef.Settle(settleWait)
			t.Logf("PREVIOUS OWNER %s: backend added, then vipd restarted: %d of %d connections broken", tc.name, len(broken), ef.Len())
			if tc.on {
				if len(broken) > 0 {
					t.Errorf("%d connections broken (goal 0):\n  %s", len(broken), testbed.FirstN(broken, 5))
				}
				checkChained(t, bed)
			} else if len(broken) == 0 {
				t.Errorf("no connection broke without previous_owner: the scenario does not move any flow")
			}
			ef.Finish()
		})
	}
}

// TestPreviousOwnerECMP: three boxes behind BIRD, 300 long-lived DSR
// connections; a fourth backend is added on every box, then a box dies
// silently and its flows reach boxes that never saw them, which pick by
// the new table: with previous_owner, none breaks (TestECMP's "combined
// churn" is the same without it). Then the fourth backend is removed and
// stopped: the connections it served break, as they must, and no other.
func TestPreviousOwnerECMP(t *testing.T) {
	encap, keys := previousKeys(true)
	e := newECMPEnv(t, testbed.Options{Backends: 4, DecapArgs: chainDecapArgs},
		testbed.ConfigOptions{Health: testbed.FastHealth, Echo: true, Backends: 3, DSREncap: encap, VIPKeys: keys})
	bed := e.bed
	ef := e.startEcho(t, testbed.VIPDSR, 300)
	broken := e.addThenKill(t, ef)
	t.Logf("COMBINED CHURN WITH PREVIOUS OWNER: backend added, then a box killed: %d of %d connections broken", len(broken), ef.Len())
	if len(broken) > 0 {
		t.Errorf("%d connections broken (goal 0):\n  %s", len(broken), testbed.FirstN(broken, 5))
	}
	checkChained(t, bed.Bed)

	// Remove the fourth backend (and stop it): its own connections break,
	// no other. Box 2 comes back first, with the configuration of the others.
	e.unsilence(t, 1)
	e.start(1)
	waitHops(t, bed.Bed, testbed.VIPDSR, e.allBoxes(), 20*time.Second, "box 2 back")
	ef.Finish()
	ef2 := e.startEcho(t, testbed.VIPDSR, 200)
	on4 := ef2.Backends()["backend4"]
	t.Logf("200 DSR connections on %v", ef2.Backends())
	if on4 == 0 {
		t.Fatal("no connection reached the fourth backend")
	}
	e.co.Backends = 3
	e.reloadAll(t)
	bed.Backends[3].Kill()
	broken = ef2.Settle(settleWait)
	t.Logf("backend4 removed: %d of %d connections broken, %d were on it", len(broken), ef2.Len(), on4)
	for _, b := range broken {
		if !strings.Contains(b, "(backend backend4)") {
			t.Errorf("a connection of another backend broke: %s", b)
		}
	}
	ef2.Finish()
}
