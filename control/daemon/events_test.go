package daemon

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/health"
	"github.com/vipd/vipd/testing/testkit"
)

// TestEvents: the event log has each backend's first verdict and its
// transitions with the check's error, a drain and an override with
// their reasons, and a reload with its changes, in order; /metrics
// counts the transitions and says when the last was.
func TestEvents(t *testing.T) {
	td, fp := startHealth(t, "0s", "drop")
	testkit.Eventually(t, testkit.Patience, "first verdicts", func() bool { return td.backend(0)["health"] == "up" && td.backend(1)["health"] == "up" })
	fp.set("198.18.1.11", health.Result{Err: errors.New("refused")})
	testkit.Eventually(t, testkit.Patience, ".11 down", func() bool { return td.backend(0)["forwarding"] == "down" })
	if err := td.d.SetDrain("web", "198.18.1.12:8080", true, "kernel update"); err != nil {
		t.Fatal(err)
	}
	w := uint32(5)
	if _, err := td.d.SetOverride(api.OverrideRequest{VIP: "web", Backend: "198.18.1.12:8080", Weight: &w, Reason: "canary"}); err != nil {
		t.Fatal(err)
	}
	if b := td.backendState("web", "198.18.1.12"); b.Override == nil || b.Override.Reason != "canary" || b.DrainReason != "kernel update" {
		t.Errorf("the reasons in /v1/state: override %+v, drain %q", b.Override, b.DrainReason)
	}
	td.d.mu.Lock()
	saved := td.d.savedOverridesLocked()
	td.d.mu.Unlock()
	if len(saved) != 1 || saved[0].Reason != "canary" || saved[0].DrainReason != "kernel update" {
		t.Errorf("the state file's overrides %+v", saved)
	}
	if err := td.d.Reload(); err != nil {
		t.Fatal(err)
	}
	ans := td.d.Events(0, 0)
	var lines []string
	for i, e := range ans.Events {
		if e.Seq != uint64(i+1) || e.Time.IsZero() {
			t.Errorf("event %d: seq %d time %v", i, e.Seq, e.Time)
		}
		lines = append(lines, strings.Join([]string{e.Kind, e.VIP, e.Backend, e.What, e.Reason}, "|"))
	}
	for _, want := range []string{
		"health|web|198.18.1.11:8080|unknown → up|",
		"health|web|198.18.1.12:8080|unknown → up|",
		"health|web|198.18.1.11:8080|up → down: refused|",
		"drain|web|198.18.1.12:8080|drained|kernel update",
		"override|web|198.18.1.12:8080|weight 5|canary",
		"reload|||applied: the file is unchanged|",
	} {
		if !slices.Contains(lines, want) {
			t.Errorf("no event %q in\n%s", want, strings.Join(lines, "\n"))
		}
	}
	if ans.Last != uint64(len(ans.Events)) {
		t.Errorf("last %d of %d events", ans.Last, len(ans.Events))
	}
	if ans := td.d.Events(ans.Last-1, 0); len(ans.Events) != 1 || ans.Events[0].Kind != api.EventReload {
		t.Errorf("since the one before the last: %+v", ans.Events)
	}
	m := td.d.Metrics()
	var n11 uint64
	for ref, l := range m.Backends {
		if l.Backend == "198.18.1.11:8080" {
			n11 = m.HealthTransitions[ref]
			if m.LastChange[ref].IsZero() {
				t.Error("no last change for .11")
			}
		}
	}
	if n11 != 2 {
		t.Errorf(".11's transitions %d, want 2 (its first verdict, then down)", n11)
	}
}

// TestInactiveFlows: /v1/state counts, of a backend's flows, the ones not
// established (here SYNs only: all of them), as ipvsadm's InActConn.
func TestInactiveFlows(t *testing.T) {
	td := start(t, testConfig)
	for p := uint16(2000); p < 2005; p++ {
		td.send(syn(t, "198.18.0.100", p, "S"))
	}
	st, err := td.d.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	v := st.VIPs[0]
	if v.ActiveFlows != 5 || v.InactiveFlows != 5 {
		t.Errorf("VIP %s: %d flows, %d inactive; want 5 and 5", v.Name, v.ActiveFlows, v.InactiveFlows)
	}
}

// TestMaxFlows: a backend at its max_flows takes no new flows (status says
// why, an event records it), the other does; a reload that lifts the
// limit lets it take them again.
func TestMaxFlows(t *testing.T) {
	cfg := strings.Replace(testConfig, "address = \"198.18.1.11\"\nport = 8080\n", "address = \"198.18.1.11\"\nport = 8080\nmax_flows = 3\n", 1)
	if cfg == testConfig {
		t.Fatal("the test configuration has no backend 198.18.1.11:8080 to limit")
	}
	td := start(t, cfg)
	to := map[string]int{}
	for p := uint16(3000); to["198.18.1.11"] < 3; p++ {
		if p == 3200 {
			t.Fatal("200 new flows and none reached .11 thrice")
		}
		to[td.send(syn(t, "198.18.0.100", p, "S")).String()]++
	}
	td.d.maxFlowsRound(context.Background())
	testkit.Eventually(t, testkit.Patience, ".11 at max_flows, published", func() bool {
		b := td.backendState("web", "198.18.1.11")
		return b.AtMaxFlows && b.Forwarding == "draining"
	})
	for p := uint16(4000); p < 4050; p++ {
		if got := td.send(syn(t, "198.18.0.100", p, "S")); got.String() == "198.18.1.11" {
			t.Fatalf("a new flow reached .11 at its max_flows")
		}
	}
	if b := td.backendState("web", "198.18.1.11"); b.Forwarding != "draining" || b.MaxFlows != 3 {
		t.Errorf(".11 at max_flows: %+v", b)
	}
	evs := td.d.Events(0, 0).Events
	if e := evs[len(evs)-1]; e.Kind != api.EventMaxFlows || e.Backend != "198.18.1.11:8080" || !strings.HasPrefix(e.What, "at max_flows (3 of 3)") {
		t.Errorf("the last event: %+v", e)
	}
	td.rewrite(testConfig)
	if err := td.d.Reload(); err != nil {
		t.Fatal(err)
	}
	td.d.maxFlowsRound(context.Background())
	testkit.Eventually(t, testkit.Patience, ".11 without a limit, published", func() bool {
		b := td.backendState("web", "198.18.1.11")
		return !b.AtMaxFlows && b.Forwarding == "up"
	})
	n := 0
	for p := uint16(5000); p < 5100; p++ {
		if td.send(syn(t, "198.18.0.100", p, "S")).String() == "198.18.1.11" {
			n++
		}
	}
	if n == 0 {
		t.Error("no new flow reached .11 once its limit was lifted")
	}
}
