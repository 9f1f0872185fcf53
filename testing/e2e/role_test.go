package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/testing/testbed"
)

// TestNeighborRole: a box started with neighbor_role = "standby" does not
// answer the router's ARP for its VIP, so nothing reaches it; `vipd
// active` announces the VIP at once (the router, accepting unsolicited
// ARP, learns it before any request) and the VIP answers; `vipd standby`
// stops the answers again. The status header, /v1/state and /metrics say
// the role.
func TestNeighborRole(t *testing.T) {
	requireE2E(t)
	bed := testbed.New(t, testbed.Options{})
	e := &env{t: t, bed: bed, c: bed.HTTPClient(60 * time.Second)}
	cfg := bed.Config(testbed.ConfigOptions{})
	standby := strings.Replace(cfg, "[dataplane]\n", "[dataplane]\nneighbor_role = \"standby\"\n", 1)
	if standby == cfg {
		t.Fatal("the bed's configuration has no [dataplane] table")
	}
	e.v = bed.StartVIPD(standby)
	e.waitBackends("web-nat", "none")
	vip := testbed.VIPNAT.String()
	neigh := func() string { return bed.Router.Must(t, "ip", "neigh", "show", vip, "dev", "r1") }
	flush := func() { bed.Router.Must(t, "ip", "neigh", "flush", "to", vip, "dev", "r1") }
	// A request with a short timeout: while the box is standby, the router
	// cannot resolve the VIP and the connection never opens.
	unanswered := func(what string) {
		t.Helper()
		c := bed.HTTPClient(2 * time.Second)
		if _, err := testbed.Get(context.Background(), c, natURL+"/"); err == nil {
			t.Errorf("%s: a request to the VIP was answered", what)
		}
		if n := neigh(); strings.Contains(n, "lladdr") {
			t.Errorf("%s: the router resolved the VIP: %s", what, n)
		}
	}
	role := func() string {
		st, err := e.v.State()
		if err != nil {
			t.Fatal(err)
		}
		return st.Role
	}
	vipd := func(args ...string) string {
		return bed.Box.Must(t, append([]string{bed.Bin.VIPD}, args...)...)
	}

	if r := role(); r != api.RoleStandby {
		t.Fatalf("started with neighbor_role standby, the role is %q", r)
	}
	unanswered("started standby")
	if out := vipd("status", "-admin", testbed.AdminAddr); !strings.Contains(out, "role standby") {
		t.Errorf("vipd status does not say standby:\n%s", out)
	}

	// Active: the gratuitous ARP reaches the router before any request.
	bed.Router.Sysctl(t, "net.ipv4.conf.r1.arp_accept", "1")
	flush()
	if out := vipd("active", "-socket", bed.AdminSocket()); !strings.Contains(out, "active since") || !strings.Contains(out, "(was standby)") {
		t.Errorf("vipd active: %s", out)
	}
	waitFor(t, patience, "the router learning the VIP from a gratuitous ARP", func() bool {
		return strings.Contains(neigh(), "lladdr")
	})
	if got := e.names(natURL, 10); len(got) == 0 {
		t.Errorf("the active VIP answered nothing: %v", got)
	}

	// Standby again: once the router forgets the VIP, it cannot learn it.
	if out := vipd("standby", "-socket", bed.AdminSocket()); !strings.Contains(out, "(was active)") {
		t.Errorf("vipd standby: %s", out)
	}
	flush()
	unanswered("standby again")
	fams, err := e.v.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	if on, changes := testbed.Metric(fams, "vipd_neighbor_role", "role", "standby"), testbed.Metric(fams, "vipd_neighbor_role_changes_total"); on != 1 || changes != 2 {
		t.Errorf("metrics: vipd_neighbor_role{role=standby} %v, changes %v; want 1 and 2", on, changes)
	}
}
