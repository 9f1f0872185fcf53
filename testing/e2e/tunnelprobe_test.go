package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/vipd/vipd/testing/testbed"
)

// TestTunnelProbe: a direct check reaches a DSR backend on its own
// address and cannot see a broken tunnel path. A DSR backend whose VIP
// is removed from its loopback — reachable on its own address,
// black-holing every flow sent through its tunnel — is marked down by
// the tunnel check (on an idle machine within fall × interval, plus one
// interval's wait and the probe timeout), while with probe = "direct"
// it stays up. With the VIP back, it comes back.
func TestTunnelProbe(t *testing.T) {
	const interval, timeout, fall = 200 * time.Millisecond, 200 * time.Millisecond, 2 // testbed.FastHealth
	tests := []struct {
		name  string
		probe string
		ipv6  bool
		down  bool
		encap string // the DSR VIPs' encapsulation keys
	}{
		{"tunnel", "tunnel", false, true, ""},
		{"direct", "direct", false, false, ""},
		{"tunnel, IPv6", "tunnel", true, true, ""},
		{"tunnel, GUE", "tunnel", false, true, "encap = \"gue\"\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			health := testbed.FastHealth
			if tt.probe == "direct" {
				health += "probe = \"direct\"\n" // NAT VIPs take it too: it is theirs by default
			}
			vipName, vip, bits, url := "web-dsr", testbed.VIPDSR.String(), "/32", dsrURL
			if tt.ipv6 {
				vipName, vip, bits, url = "web6-dsr", testbed.VIPDSR6.String(), "/128", "http://["+testbed.VIPDSR6.String()+"]"
			}
			e := setup(t, testbed.Options{IPv6: tt.ipv6}, testbed.ConfigOptions{Health: health, IPv6: tt.ipv6, DSREncap: tt.encap})
			state := func(i int) string {
				st, err := e.v.State()
				if err != nil {
					t.Fatal(err)
				}
				for _, v := range st.VIPs {
					if v.Name == vipName {
						return v.Backends[i].Health
					}
				}
				t.Fatalf("no VIP %s in %+v", vipName, st.VIPs)
				return ""
			}
			// A backend is up before its first check, and stays up through
			// fall-1 failures: up for longer than fall+1 intervals is up
			// by its checks. (IPv6 probes fail for the first second or
			// two, while the bed's neighbours are discovered.)
			waitStable(t, 10*time.Second, (fall+1)*interval, "every DSR backend checked up", func() bool {
				return state(0) == "up" && state(1) == "up" && state(2) == "up"
			})
			victim := e.bed.Backends[0]
			victim.NS.Must(t, "ip", "addr", "del", vip+bits, "dev", "lo")
			removed := time.Now()
			// On an idle machine: at worst the last good probe ended just
			// before the removal, and each of fall failures waits an
			// interval (stretched by up to 10% of jitter) and its timeout;
			// 300 ms more for the report, the publish and the state
			// request. A busy machine stretches all of it, so the bound is
			// reported, and the wait is patience.
			bound := fall*(interval*11/10+timeout) + 300*time.Millisecond
			if tt.down {
				waitFor(t, patience, "the backend without the VIP down", func() bool { return state(0) == "down" })
				took := time.Since(removed)
				t.Logf("marked down %v after the VIP was removed (%v on an idle machine)", took.Round(time.Millisecond), bound)
				if state(1) != "up" || state(2) != "up" {
					t.Errorf("the other backends: %s, %s, want up", state(1), state(2))
				}
				// Clients are no longer sent to the black hole.
				for i := 0; i < 20; i++ {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					body, err := testbed.Get(ctx, e.c, url+"/")
					cancel()
					if err != nil || body == victim.Name+"\n" {
						t.Fatalf("request %d to the DSR VIP after the backend went down: %q, %v", i, body, err)
					}
				}
				victim.NS.Must(t, "ip", "addr", "add", vip+bits, "dev", "lo", "nodad")
				waitFor(t, 5*time.Second, "the backend with its VIP back up", func() bool { return state(0) == "up" })
				return
			}
			// Direct: twice the bound, and the backend is still up. (A
			// busy machine checks less often in that time, so it may miss
			// a wrong verdict, but never reports one that is not there.)
			for time.Since(removed) < 2*bound {
				if s := state(0); s != "up" {
					t.Fatalf("direct check: the backend without the VIP is %s %v after the removal", s, time.Since(removed).Round(time.Millisecond))
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}
