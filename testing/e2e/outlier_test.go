package e2e

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/vipd/vipd/testing/testbed"
	"github.com/vipd/vipd/testing/testkit"
)

// TestOutlier: a NAT backend that passes its health checks but resets real
// clients' connections on the service port (an nftables reject rule in its
// namespace, for the client's address only) is ejected by passive outlier
// detection within its window, clients stop reaching it, and it returns
// once the rule is gone, its ejection time is up and its check passes.
func TestOutlier(t *testing.T) {
	requireE2E(t)
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft (nftables) is not installed: make test-deps installs it as root")
	}
	const outlierCfg = `[vip.outlier]
enabled = true
window = "2s"
timeout = "1s"
min_handshakes = 5
base_ejection = "3s"
max_ejection = "30s"
`
	e := setup(t, testbed.Options{}, testbed.ConfigOptions{Health: testbed.FastHealth, VIPKeys: map[string]string{"web-nat": outlierCfg}})
	be := e.bed.Backends[0]
	// Real clients get a reset; the box's health checks still pass.
	be.NS.Must(t, "nft", "add", "table", "inet", "vipdtest")
	t.Cleanup(func() { be.NS.Cmd("nft", "delete", "table", "inet", "vipdtest").Run() }) // gone already if the test got that far
	be.NS.Must(t, "nft", "add", "chain", "inet", "vipdtest", "in", "{ type filter hook input priority 0 ; }")
	be.NS.Must(t, "nft", "add", "rule", "inet", "vipdtest", "in", "ip", "saddr", testbed.ClientAddr.String(), "tcp", "dport", "8080", "reject", "with", "tcp", "reset")

	health := func() string {
		st, err := e.v.State()
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range st.VIPs {
			if v.Name == "web-nat" {
				return v.Backends[0].Health
			}
		}
		t.Fatal("no VIP web-nat")
		return ""
	}
	// Fresh connections, a few per 100 ms, until backend1 is ejected.
	start := time.Now()
	failed := 0
	for health() != "ejected" {
		if time.Since(start) > patience {
			t.Fatalf("not ejected after %v (%d requests failed); health %q", time.Since(start), failed, health())
		}
		for i := 0; i < 5; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if _, err := testbed.Get(ctx, e.c, natURL+"/"); err != nil {
				failed++
			}
			cancel()
		}
		time.Sleep(100 * time.Millisecond)
	}
	// On an idle machine within ~4 s: window 2 s + timeout 1 s + a 1 s
	// tick, and the publication. A busy machine stretches it (and sends
	// fewer requests a window), so only patience bounds it.
	t.Logf("backend1 ejected after %v; %d requests were reset meanwhile", time.Since(start), failed)
	if failed == 0 {
		t.Error("no request failed: the reject rule did not bite")
	}
	if v := e.eventually(func(v float64) bool { return v == 1 }, "vipd_backend_ejected", "vip", "web-nat"); v != 1 {
		t.Errorf("vipd_backend_ejected = %v", v)
	}
	// Out of the pool: every request succeeds, none reaches backend1.
	counts := e.names(natURL, 60)
	if counts["backend1"] != 0 {
		t.Errorf("an ejected backend answered: %v", counts)
	}
	// Fixed: it returns when its ejection time (3 s) is up and its check
	// passes, and takes clients again.
	be.NS.Must(t, "nft", "delete", "table", "inet", "vipdtest")
	fixed := time.Now()
	if !testkit.Poll(patience, func() bool { return health() == "up" }) {
		t.Fatalf("not back after %v; health %q", time.Since(fixed), health())
	}
	t.Logf("backend1 back %v after the fix", time.Since(fixed))
	waitFor(t, patience, "backend1 to take clients after its return", func() bool { return e.names(natURL, 30)["backend1"] != 0 })
	if v := e.metric("vipd_backend_ejections_total", "vip", "web-nat"); v < 1 {
		t.Errorf("vipd_backend_ejections_total = %v", v)
	}
}
