package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/vipd/vipd/testbed"
)

// TestTunnelProbe (issue 15): a DSR backend whose VIP is removed from its
// loopback — reachable on its own address, black-holing every flow sent
// through its tunnel — is marked down by the tunnel check within
// fall × interval (plus one interval's wait and the probe timeout), while
// with probe = "direct" it stays up. With the VIP back, it comes back.
func TestTunnelProbe(t *testing.T) {
	const interval, timeout, fall = 200 * time.Millisecond, 100 * time.Millisecond, 2
	tests := []struct {
		probe string
		down  bool
	}{
		{"tunnel", true},
		{"direct", false},
	}
	for _, tt := range tests {
		t.Run(tt.probe, func(t *testing.T) {
			health := testbed.FastHealth
			if tt.probe == "direct" {
				health += "probe = \"direct\"\n" // NAT VIPs take it too: it is theirs by default
			}
			e := setup(t, testbed.Options{}, testbed.ConfigOptions{Health: health})
			state := func(i int) string {
				st, err := e.v.State()
				if err != nil {
					t.Fatal(err)
				}
				for _, v := range st.VIPs {
					if v.Name == "web-dsr" {
						return v.Backends[i].Health
					}
				}
				t.Fatalf("no VIP web-dsr in %+v", st.VIPs)
				return ""
			}
			waitFor(t, 5*time.Second, "every DSR backend checked up", func() bool {
				return state(0) == "up" && state(1) == "up" && state(2) == "up"
			})
			victim := e.bed.Backends[0]
			lo := []string{"ip", "addr", "del", testbed.VIPDSR.String() + "/32", "dev", "lo"}
			victim.NS.Must(t, lo...)
			removed := time.Now()
			// Jitter stretches an interval by up to 10%.
			bound := time.Duration(float64((fall+1)*interval)*1.1) + timeout + 100*time.Millisecond
			if tt.down {
				waitFor(t, 5*time.Second, "the backend without the VIP down", func() bool { return state(0) == "down" })
				took := time.Since(removed)
				if took > bound {
					t.Errorf("marked down %v after the VIP was removed; bound %v", took.Round(time.Millisecond), bound)
				}
				t.Logf("marked down %v after the VIP was removed (bound %v)", took.Round(time.Millisecond), bound)
				if state(1) != "up" || state(2) != "up" {
					t.Errorf("the other backends: %s, %s, want up", state(1), state(2))
				}
				// Clients are no longer sent to the black hole.
				for i := 0; i < 20; i++ {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					body, err := testbed.Get(ctx, e.c, dsrURL+"/")
					cancel()
					if err != nil || body == victim.Name+"\n" {
						t.Fatalf("request %d to the DSR VIP after the backend went down: %q, %v", i, body, err)
					}
				}
				victim.NS.Must(t, "ip", "addr", "add", testbed.VIPDSR.String()+"/32", "dev", "lo")
				waitFor(t, 5*time.Second, "the backend with its VIP back up", func() bool { return state(0) == "up" })
				return
			}
			// Direct: twice the bound, and the backend is still up.
			for time.Since(removed) < 2*bound {
				if s := state(0); s != "up" {
					t.Fatalf("direct check: the backend without the VIP is %s %v after the removal", s, time.Since(removed).Round(time.Millisecond))
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// waitFor polls cond every 20 ms until it holds, failing after limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
