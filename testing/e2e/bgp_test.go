package e2e

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/testing/testbed"
	"github.com/vipd/vipd/testing/testkit"
)

// routerASN and boxASN are the ASes of the bed's BGP sessions (private
// range, RFC 6996).
const (
	routerASN = 65000
	boxASN    = 65010
)

// bgpKeys is the [bgp] table of a box peering with the bed's router.
func bgpKeys(extra string) string {
	return fmt.Sprintf(`
[bgp]
asn = %d
%s
linger = "2s"
[[bgp.peer]]
address = "%s"
asn = %d
`, boxASN, extra, testbed.RouterBox, routerASN)
}

// bgpHold9 are the timers of TestBGPOneBox: a session lost by its hold
// timer is not what it tests.
const bgpHold9 = "hold_time = \"9s\"\nkeepalive = \"3s\""

func hostRoute(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }

// waitHops polls the router's FIB until the route to a has exactly the
// next hops want (none: no route; sorted), for at most patient(d).
func waitHops(t *testing.T, bed *testbed.Bed, a netip.Addr, want []netip.Addr, d time.Duration, what string) {
	t.Helper()
	d = patient(d)
	var got []netip.Addr
	if !testkit.Poll(d, func() bool {
		var err error
		got, err = testbed.NextHops(bed.Router, hostRoute(a))
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(got, netip.Addr.Compare)
		return slices.Equal(got, want)
	}) {
		t.Fatalf("%s: the router's route to %s has next hops %v after %v, want %v", what, a, got, d, want)
	}
}

// TestBGPOneBox runs vipd with [bgp] against BIRD as the upstream router:
// the VIPs' host routes reach the router's kernel table (and the traffic
// follows them, with no ARP answered for any VIP), a VIP below min_healthy
// is withdrawn and announced again, drain-box withdraws everything and
// reports drained after the linger, and SIGTERM lame-ducks before it
// stops.
func TestBGPOneBox(t *testing.T) {
	requireE2E(t)
	testbed.RequireBird(t)
	bed := testbed.New(t, testbed.Options{IPv6: true})
	// A second session, from the backends' side, signed with TCP MD5.
	const md5 = "vipd-md5-key"
	routerB := netip.MustParseAddr("198.18.1.254")
	router := bed.StartBird(bed.Router, testbed.BirdOptions{
		ASN: routerASN, RouterID: testbed.RouterBox, HoldTime: 9,
		Peers: []testbed.BirdPeer{
			{Name: "box1", Addr: testbed.BoxIngress, ASN: boxASN},
			{Name: "box1md5", Addr: bed.BoxEgress, ASN: boxASN, Password: md5},
		},
	})
	// The linger is the time the test has to see the routes withdrawn
	// before vipd exits on SIGTERM (below): longer than bgpKeys' 2 s, which
	// a busy machine's BIRD and the test's polling of its table can
	// overrun.
	const linger = 6 * time.Second
	keys := strings.Replace(bgpKeys(bgpHold9), `linger = "2s"`, fmt.Sprintf("linger = %q", linger), 1)
	e := &env{t: t, bed: bed, c: bed.HTTPClient(10 * time.Second)}
	e.v = bed.StartVIPD(bed.Config(testbed.ConfigOptions{
		Health:  testbed.FastHealth,
		IPv6:    true,
		VIPKeys: map[string]string{"web-dsr": "min_healthy = 3\n"},
		Extra:   keys + fmt.Sprintf("[[bgp.peer]]\naddress = %q\nasn = %d\npassword = %q\n", routerB, routerASN, md5),
	}))
	t.Cleanup(func() {
		if t.Failed() {
			routes, _ := router.Cmd("show", "route", "all")
			protos, _ := router.Cmd("show", "protocols", "all")
			t.Logf("vipd log:\n%s\nBIRD log:\n%s\nBIRD routes:\n%s\nBIRD protocols:\n%s", tail(e.v.Log(), 30), tail(router.Log(), 40), routes, protos)
		}
	})
	box := []netip.Addr{testbed.BoxIngress}
	for _, vip := range []netip.Addr{testbed.VIPNAT, testbed.VIPDSR, testbed.VIPUDP} {
		waitHops(t, bed, vip, box, 20*time.Second, "announced at start")
	}
	// IPv6 VIPs through MP-BGP over the IPv4 session, with the box's
	// ingress IPv6 address as next hop.
	for _, vip := range []netip.Addr{testbed.VIPNAT6, testbed.VIPDSR6} {
		waitHops(t, bed, vip, []netip.Addr{testbed.BoxIngress6}, 10*time.Second, "IPv6 announced at start")
	}
	if got := e.names("http://["+testbed.VIPNAT6.String()+"]", 10); len(got) == 0 {
		t.Errorf("IPv6 NAT VIP over the BGP route: no answer")
	}
	// The traffic follows the routes: vipd answers no ARP for a VIP
	// announced over BGP, and sends no gratuitous ARP for it. 60 requests
	// miss one of three equal backends once in 10^10 runs (20 did once in
	// 1,000).
	if got := e.names(natURL, 60); len(got) != 3 {
		t.Errorf("NAT VIP over the BGP route: backends %v, want all three", got)
	}
	if got := e.names(dsrURL, 60); len(got) != 3 {
		t.Errorf("DSR VIP over the BGP route: backends %v, want all three", got)
	}
	fams, err := e.v.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []string{"arp_replies", "arp_announcements"} {
		if n := testbed.Metric(fams, "vipd_driver_events_total", "event", ev); n != 0 {
			t.Errorf("%s = %v, want 0: no VIP is answered by ARP", ev, n)
		}
	}
	peer := testbed.RouterBox.String()
	waitFor(t, 10*time.Second, "both sessions established (one with TCP MD5)", func() bool {
		fams, err := e.v.Metrics()
		return err == nil && testbed.Metric(fams, "vipd_bgp_peer_up", "peer", peer) == 1 &&
			testbed.Metric(fams, "vipd_bgp_peer_up", "peer", routerB.String()) == 1
	})

	if testbed.Metric(fams, "vipd_bgp_vip_announced", "vip", "web-dsr") != 1 || testbed.Metric(fams, "vipd_bgp_prefixes_announced") != 5 {
		t.Errorf("metrics: web-dsr announced %v, prefixes %v; want 1 and 5",
			testbed.Metric(fams, "vipd_bgp_vip_announced", "vip", "web-dsr"), testbed.Metric(fams, "vipd_bgp_prefixes_announced"))
	}
	status := bed.Box.Must(t, bed.Bin.VIPD, "status", "-admin", testbed.AdminAddr)
	if !strings.Contains(status, peer) || !strings.Contains(status, "established") || !strings.Contains(status, "bgp announced") {
		t.Errorf("vipd status does not show the established peer and the announcements:\n%s", status)
	}

	// min_healthy: one of three backends down withdraws the DSR VIP
	// (min_healthy 3) and only it.
	bed.Backends[0].Kill()
	waitHops(t, bed, testbed.VIPDSR, nil, 10*time.Second, "DSR VIP below min_healthy")
	waitHops(t, bed, testbed.VIPNAT, box, time.Second, "NAT VIP (min_healthy 1) stays")
	bed.Backends[0].Start()
	waitHops(t, bed, testbed.VIPDSR, box, 10*time.Second, "DSR VIP back to min_healthy")

	// drain-box: everything withdrawn at once, drained after the linger.
	start := time.Now()
	cmd := bed.Box.Cmd(bed.Bin.VIPD, "drain-box", "-socket", bed.AdminSocket())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for _, vip := range []netip.Addr{testbed.VIPNAT, testbed.VIPDSR, testbed.VIPUDP} {
		waitHops(t, bed, vip, nil, 5*time.Second, "drain-box")
	}
	if err := cmd.Wait(); err != nil || !strings.Contains(out.String(), "drained") {
		t.Fatalf("vipd drain-box: %v\n%s", err, out.String())
	}
	if took := time.Since(start); took < linger {
		t.Errorf("drain-box reported drained after %v, before the %v linger", took, linger)
	}
	// Still forwarding while drained (the router has no route now: ask
	// the box's state instead of sending traffic).
	st, err := e.v.State()
	if err != nil || st.BGP == nil || st.BGP.Box != "drained" {
		t.Fatalf("state after drain-box: %+v, %v", st.BGP, err)
	}
	bed.Box.Must(t, bed.Bin.VIPD, "drain-box", "-undo", "-socket", bed.AdminSocket())
	waitHops(t, bed, testbed.VIPNAT, box, 10*time.Second, "drain-box undone")

	// SIGTERM lame-ducks first: the routes go before vipd exits.
	stopped := make(chan error, 1)
	go func() { stopped <- e.v.Stop() }()
	waitHops(t, bed, testbed.VIPNAT, nil, 5*time.Second, "SIGTERM")
	select {
	case err := <-stopped:
		t.Fatalf("vipd exited (%v) before the linger", err)
	default:
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.v.Log(), "draining the box first") {
		t.Errorf("vipd did not log its SIGTERM lame duck")
	}
}

// grBed is a bed whose router, BIRD, helps graceful restart: it keeps
// the routes of a box whose session drops without a NOTIFICATION for the
// restart time the box advertises (bgpGR: 60 s).
func grBed(t *testing.T) (*testbed.Bed, *testbed.Bird) {
	t.Helper()
	requireE2E(t)
	testbed.RequireBird(t)
	bed := testbed.New(t, testbed.Options{})
	router := bed.StartBird(bed.Router, testbed.BirdOptions{
		ASN: routerASN, RouterID: testbed.RouterBox, HoldTime: 9, GracefulRestart: true,
		Peers: []testbed.BirdPeer{{Name: "box1", Addr: testbed.BoxIngress, ASN: boxASN}},
	})
	return bed, router
}

// bgpGR is the [bgp] table of a box that hands its routes over to
// graceful restart when it stops (no lame duck).
var bgpGR = bgpKeys(bgpHold9 + "\ngraceful_restart = \"60s\"\ndrain_on_stop = false")

// TestBGPGracefulRestart: with graceful_restart set and drain_on_stop off,
// a stopped vipd closes its session without a NOTIFICATION and BIRD keeps
// its routes (stale) for the restart time, so a quick restart does not
// take the VIPs off the router; the restarted vipd refreshes them.
func TestBGPGracefulRestart(t *testing.T) {
	bed, router := grBed(t)
	cfg := bed.Config(testbed.ConfigOptions{Extra: bgpGR})
	v := bed.StartVIPD(cfg)
	t.Cleanup(func() {
		if t.Failed() {
			protos, _ := router.Cmd("show", "protocols", "all", "box1")
			t.Logf("vipd log:\n%s\nBIRD log:\n%s\nBIRD box1:\n%s", tail(v.Log(), 30), tail(router.Log(), 20), protos)
		}
	})
	box := []netip.Addr{testbed.BoxIngress}
	waitHops(t, bed, testbed.VIPNAT, box, 20*time.Second, "announced at start")
	if err := v.Stop(); err != nil {
		t.Fatal(err)
	}
	// The session is gone, the route stays: BIRD holds it as stale. (It
	// is watched for 3 s: the period is what the test checks, not a
	// wait.)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		hops, err := testbed.NextHops(bed.Router, hostRoute(testbed.VIPNAT))
		if err != nil || !slices.Equal(hops, box) {
			t.Fatalf("after a graceful stop the router's route to the VIP is %v (%v), want it kept", hops, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if out, _ := router.Cmd("show", "protocols", "box1"); strings.Contains(out, "Established") {
		t.Fatalf("the session is still established after vipd stopped:\n%s", out)
	}
	v = bed.StartVIPD(cfg)
	var out string
	var hops []netip.Addr
	var err error
	if !testkit.Poll(20*time.Second, func() bool {
		out, _ = router.Cmd("show", "protocols", "box1")
		hops, err = testbed.NextHops(bed.Router, hostRoute(testbed.VIPNAT))
		return strings.Contains(out, "Established") && err == nil && slices.Equal(hops, box)
	}) {
		t.Fatalf("the restarted vipd's session and route: %v %v\n%s", hops, err, out)
	}
	if got := (&env{t: t, bed: bed, c: bed.HTTPClient(10 * time.Second)}).names(natURL, 10); len(got) == 0 {
		t.Errorf("no answer through the refreshed route")
	}
}
