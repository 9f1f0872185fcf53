package daemon

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vipd/vipd/health"
	"github.com/vipd/vipd/testing/testkit"
)

// TestStateWhyDown: a down backend's State carries the check's error, when
// it went down and the check's latency, which the status printer shows;
// /metrics' raw material has the checks' totals.
func TestStateWhyDown(t *testing.T) {
	td, fp := startHealth(t, "0s", "drop")
	testkit.Eventually(t, testkit.Patience, "checks known", func() bool { return td.backend(0)["health"] == "up" })
	before := time.Now()
	fp.set("198.18.1.11", health.Result{Err: errors.New("HTTP 503")})
	testkit.Eventually(t, testkit.Patience, "backend 1 down", func() bool { return td.backend(0)["health"] == "down" })
	st, err := td.d.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b := st.VIPs[0].Backends[0]
	if b.LastError != "HTTP 503" || b.StateSince.Before(before) || b.LastCheckSeconds <= 0 {
		t.Errorf("last_error %q, state_since %v (failed after %v), last_check_seconds %v", b.LastError, b.StateSince, before, b.LastCheckSeconds)
	}
	if up := st.VIPs[0].Backends[1]; up.LastError != "" || up.StateSince.IsZero() {
		t.Errorf("healthy backend: last_error %q, state_since %v", up.LastError, up.StateSince)
	}
	// vipd status prints them as "down 3s ... HTTP 503" (TestWriteStatus
	// in cmd/vipd).
	if b.Health != "down" {
		t.Errorf("health %q, want down", b.Health)
	}
	m := td.d.Metrics()
	if r := m.HealthChecks[b.Ref]; r.Fail == 0 || r.OK == 0 {
		t.Errorf("metrics' check totals of %d: %+v", b.Ref, r)
	}
}
