package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/testing/testbed"
	"github.com/vipd/vipd/testing/testkit"
)

func main() {
	testbed.MustBeRoot("make demo-ha", "it creates network namespaces and attaches XDP programs inside them")
	if _, err := exec.LookPath("keepalived"); err != nil {
		fmt.Fprintln(os.Stderr, "make demo-ha needs Debian's keepalived (not found): sudo make demo-ha installs it")
		os.Exit(1)
	}
	took := testbed.NewRun("demo-ha").Go(demo)
	fmt.Printf("\nAll namespaces, links and processes removed. Demo took %.1f s.\n", took.Seconds())
}

func demo(r *testbed.Run) {
	const perVIP = 100
	fmt.Println("== building vipd; bringing up a client, a router (no BGP), two vipd boxes on one segment and three backends")
	bed := testbed.NewECMP(r, 2, 3)
	for _, be := range bed.Backends {
		be.NS.Must(r, "ip", "route", "replace", "default", "via", testbed.GatewayVRRP)
	}
	co := testbed.ConfigOptions{Health: testbed.FastHealth, Echo: true}
	v := make([]*testbed.VIPD, 2)
	for i := range v {
		cfg := strings.Replace(bed.BoxConfig(i, co, ""), "[dataplane]\n", "[dataplane]\nneighbor_role = \"standby\"\n", 1)
		v[i] = bed.StartBox(i, cfg) // boxN.toml for boxN, as the output counts them
	}
	for i, prio := range []int{150, 100} {
		bed.StartKeepalived(i, prio, true)
		fmt.Printf("   box%d: vipd (neighbor_role = \"standby\") and keepalived, priority %d, the package's keepalived.conf\n", i+1, prio)
	}
	role := func(i int) string {
		st, err := v[i].State()
		if err != nil {
			return "down"
		}
		return st.Role
	}
	if !testkit.Poll(testkit.Patience, func() bool { return role(0) == api.RoleActive && role(1) == api.RoleStandby }) {
		r.Fatalf("box1 never became active: roles %s and %s", role(0), role(1))
	}
	fmt.Printf("   keepalived elected box1 MASTER: its notify ran `vipd keepalived-notify ... MASTER`: box1 %s, box2 %s\n", role(0), role(1))

	fmt.Printf("\n== %d long-lived TCP connections through the DSR VIP and %d through the NAT VIP, streaming both ways (every chunk echoed and compared)\n", perVIP, perVIP)
	dsr, err := bed.StartEchoFlows(testbed.VIPDSR, perVIP)
	if err != nil {
		r.Fatalf("%v", err)
	}
	nat, err := bed.StartEchoFlows(testbed.VIPNAT, perVIP)
	if err != nil {
		r.Fatalf("%v", err)
	}
	mac := func(i int) string {
		return strings.TrimSpace(bed.Boxes[i].Must(r, "cat", "/sys/class/net/eth0/address"))
	}
	fmt.Printf("   the router resolves the VIPs to box1 (eth0 %s): %s", mac(0), bed.Router.Must(r, "ip", "neigh", "show", testbed.VIPNAT.String()))

	fmt.Printf("\n== kill -9 vipd on box1, the active box\n")
	t0 := time.Now()
	v[0].Kill()
	if !testkit.Poll(testkit.Patience, func() bool { return role(1) == api.RoleActive }) {
		r.Fatalf("box2 never became active")
	}
	active := time.Since(t0)
	bd, bn := dsr.Settle(30*time.Second), nat.Settle(30*time.Second)
	moving := time.Since(t0)
	// Box2's status while it carries every connection that is left, once
	// its active-flow counts (sampled each second) have them all.
	testkit.Poll(testkit.Patience, func() bool {
		st, err := v[1].State()
		if err != nil {
			return false
		}
		held := map[string]int{}
		for _, vip := range st.VIPs {
			held[vip.Name] = vip.ActiveFlows
		}
		return held["echo-dsr"] >= perVIP-len(bd) && held["echo-nat"] >= perVIP-len(bn)
	})
	status := bed.Boxes[1].Must(r, bed.Bin.VIPD, "status")
	dsr.Finish()
	nat.Finish()
	fmt.Printf("   box1's track script (`vipd keepalived-check`) failed; keepalived put box1 in FAULT and box2 became MASTER:\n")
	fmt.Printf("   box2's vipd active after %.1f s (gratuitous ARP for its VIPs at once); every connection moving again after %.1f s\n", active.Seconds(), moving.Seconds())
	fmt.Printf("   the router now resolves the VIPs to box2 (eth0 %s): %s", mac(1), bed.Router.Must(r, "ip", "neigh", "show", testbed.VIPNAT.String()))
	fmt.Printf("   broken: %d of %d DSR connections, %d of %d NAT connections (the same Maglev table on both boxes; nothing copied)\n",
		len(bd), perVIP, len(bn), perVIP)
	for _, b := range append(bd, bn...) {
		fmt.Printf("   %s\n", b)
	}
	fmt.Printf("\n== vipd status on box2, the active box, taken while the connections streamed through it\n")
	fmt.Printf("$ vipd status\n%s", status)
	if len(bd)+len(bn) > 0 {
		r.Fatalf("%d connections broke", len(bd)+len(bn))
	}
}
