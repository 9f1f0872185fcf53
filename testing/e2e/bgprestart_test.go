package e2e

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/testing/testbed"
)

// ghostVIP is a VIP left to ARP whose one backend does not exist: its
// next hop never resolves, so every start of vipd waits for it
// (firstHostWait, 2 s) while it publishes what it learns of the host.
func ghostVIP(bed *testbed.Bed) string {
	ghost := bed.BackendNet.Addr().As4()
	ghost[3] = 250 // no host of the bed
	return fmt.Sprintf(`
[[vip]]
name = "ghost"
address = "198.18.0.103"
port = 80
announce = false
[vip.healthcheck]
type = "none"
[[vip.backend]]
address = "%d.%d.%d.%d"
port = 8080
`, ghost[0], ghost[1], ghost[2], ghost[3])
}

// TestBGPRestartUnresolved restarts vipd 20 times in front of BIRD as a
// graceful-restart helper, with one backend whose next hop never
// resolves, and counts the times the router's kernel loses its route to
// the NAT VIP (ip monitor in the router's namespace): 0. Each restart
// waits until BIRD is through the graceful restart (the new session's
// End-of-RIB) before the next stop. Before the fix a session came up
// during the start's wait for the next hop with an empty table, and its
// End-of-RIB made BIRD drop the route it kept (5 of 5 restarts, withdrawn
// for 61–469 ms); without "forwarding state preserved" in the OPEN, BIRD
// drops the kept routes as the new session comes up, before its UPDATE.
func TestBGPRestartUnresolved(t *testing.T) {
	bed, router := grBed(t)
	// Every change of the router's IPv4 routes, from now on.
	bed.Spawn(bed.Router, "routemon", "ip", "-4", "monitor", "route")
	cfg := bed.Config(testbed.ConfigOptions{Extra: ghostVIP(bed) + bgpGR})
	var v *testbed.VIPD
	t.Cleanup(func() {
		if t.Failed() && v != nil {
			protos, _ := router.Cmd("show", "protocols", "all", "box1")
			t.Logf("vipd log:\n%s\nBIRD log:\n%s\nBIRD box1:\n%s\nroute monitor:\n%s", tail(v.Log(), 40), tail(router.Log(), 20), protos, bed.Log("routemon"))
		}
	})
	deleted := regexp.MustCompile(`(?m)^Deleted ` + regexp.QuoteMeta(testbed.VIPNAT.String()) + ` `)
	losses := func() int { return len(deleted.FindAllString(bed.Log("routemon"), -1)) }
	const restarts = 20
	var took []time.Duration
	for i := range restarts {
		start := time.Now()
		v = bed.StartVIPD(cfg)
		// The session is up and BIRD is through the graceful restart:
		// the new session's End-of-RIB came, its routes replaced the
		// kept ones.
		waitFor(t, 60*time.Second, fmt.Sprintf("restart %d: the session up and its graceful restart over", i+1), func() bool {
			out, _ := router.Cmd("show", "protocols", "all", "box1")
			return strings.Contains(out, "Established") && !strings.Contains(out, "graceful restart active")
		})

		waitHops(t, bed, testbed.VIPNAT, hopsOf(testbed.BoxIngress), 10*time.Second, "announced")
		took = append(took, time.Since(start).Round(10*time.Millisecond))
		if err := v.Stop(); err != nil {
			t.Fatal(err)
		}
		if n := losses(); n > 0 {
			t.Fatalf("restart %d: the router lost its route to the VIP %d times", i+1, n)
		}
	}
	t.Logf("%d restarts, the route lost 0 times; start to routes refreshed: %v", restarts, took)
}

func hopsOf(a ...netip.Addr) []netip.Addr { return a }
