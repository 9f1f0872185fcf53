package daemon

import (
	"context"
	"strings"
	"testing"

	"github.com/vipd/vipd/control/admin/api"
)

// TestRole: a box that starts standby answers ARP/NDP for none of its
// VIPs; vipd active hands the responder every one (which announces them)
// and vipd standby takes them back; asking for the role the box has
// changes nothing; State and Metrics report the role and the switches;
// and a reload that changes neighbor_role in the file is taken without a
// restart and leaves the role as it is.
func TestRole(t *testing.T) {
	cfg := strings.NewReplacer("SLOW", "0s", "ALLDOWN", "drop").Replace(healthConfig)
	standby := strings.Replace(cfg, "egress = \"eth1\"\n", "egress = \"eth1\"\nneighbor_role = \"standby\"\n", 1)
	if standby == cfg {
		t.Fatal("the fixture has no egress line to add neighbor_role after")
	}
	td := newTestDaemon(t, standby, nil)
	lb := td.logTo()
	td.run()
	td.waitRunning()
	role := func() (string, int) {
		st, err := td.d.State(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return st.Role, len(td.plat.lastNeighborVIPs())
	}
	if r, n := role(); r != api.RoleStandby || n != 0 {
		t.Fatalf("started standby: role %q, answering for %d VIPs; want standby, 0", r, n)
	}
	steps := []struct {
		set, previous string
		neighbors     int
		changes       uint64
	}{
		{api.RoleActive, api.RoleStandby, 1, 1},
		{api.RoleActive, api.RoleActive, 1, 1}, // no change
		{api.RoleStandby, api.RoleActive, 0, 2},
		{api.RoleActive, api.RoleStandby, 1, 3},
	}
	for _, s := range steps {
		ans, err := td.d.SetRole(s.set)
		if err != nil {
			t.Fatalf("SetRole(%s): %v", s.set, err)
		}
		if ans.Role != s.set || ans.Previous != s.previous || ans.Neighbors != s.neighbors || ans.Routes != "" {
			t.Errorf("SetRole(%s): %+v, want previous %s and %d neighbor VIPs", s.set, ans, s.previous, s.neighbors)
		}
		if r, n := role(); r != s.set || n != s.neighbors {
			t.Errorf("after SetRole(%s): role %q, answering for %d VIPs", s.set, r, n)
		}
		if m := td.d.Metrics(); m.Role != s.set || m.RoleChanges != s.changes {
			t.Errorf("after SetRole(%s): metrics role %q, %d changes; want %d", s.set, m.Role, m.RoleChanges, s.changes)
		}
	}

	// Standby again, and the file edited to say active (the default): the
	// reload is taken, says the file's role is the start role, and the box
	// stays standby.
	if _, err := td.d.SetRole(api.RoleStandby); err != nil {
		t.Fatal(err)
	}
	td.rewrite(cfg)
	if err := td.d.Reload(); err != nil {
		t.Fatalf("a reload that changes neighbor_role: %v", err)
	}
	if got := lb.lines("neighbor_role changed in the file", "file=active", "role=standby"); len(got) != 1 {
		t.Errorf("the reload logged %q, want one WARN naming the file's role and the box's", got)
	}
	if r, n := role(); r != api.RoleStandby || n != 0 {
		t.Errorf("after the reload: role %q, answering for %d VIPs; want standby, 0", r, n)
	}
}
