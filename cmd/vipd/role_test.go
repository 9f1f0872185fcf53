package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/control/admin/api"
)

// roleProvider takes role switches over the fake socket.
type roleProvider struct {
	drainProvider
	role string
}

func (p *roleProvider) SetRole(role string) (*api.RoleAnswer, error) {
	prev := p.role
	p.role = role
	return &api.RoleAnswer{Role: role, Previous: prev, Since: time.Now(), Neighbors: map[string]int{api.RoleActive: 1}[role]}, nil
}

// TestRoleCommands: `vipd active` and `vipd standby` reach the socket
// named by -config or -socket, and print the outcome.
func TestRoleCommands(t *testing.T) {
	p := &roleProvider{role: api.RoleStandby}
	sock, cfg := serveSocket(t, p)
	for _, tt := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"active", "-config", cfg}, 0, "(was standby): answers ARP/NDP for 1 VIP addresses"},
		{[]string{"standby", "-socket", sock}, 0, "(was active): forwards what reaches it; answers ARP/NDP for 0 VIP addresses"},
		{[]string{"standby", "-socket", sock}, 0, "(no change)"},
		{[]string{"active", "-socket", sock, "now"}, 2, "usage: vipd active"},
		{[]string{"standby", "-socket", sock + ".missing"}, 1, "is vipd running"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tt.args, &stdout, &stderr)
		out := stdout.String()
		if tt.code != 0 {
			out = stderr.String()
		}
		if code != tt.code || !strings.Contains(out, tt.out) {
			t.Errorf("%v: exit %d, output %q; want %d with %q", tt.args, code, out, tt.code, tt.out)
		}
	}
	if p.role != api.RoleStandby {
		t.Errorf("the provider ends %s, want standby", p.role)
	}
}

// TestWriteRole: vipd active and vipd standby print the role, since when,
// what it was and what the box answers.
func TestWriteRole(t *testing.T) {
	since := time.Date(2026, 12, 4, 16, 0, 0, 0, time.UTC)
	var buf bytes.Buffer
	writeRole(&buf, &api.RoleAnswer{Role: api.RoleActive, Previous: api.RoleStandby, Since: since, Neighbors: 2})
	if want := "active since 2026-12-04T16:00:00Z (was standby): answers ARP/NDP for 2 VIP addresses"; !strings.Contains(buf.String(), want) {
		t.Errorf("writeRole: %q, want %q", buf.String(), want)
	}
	buf.Reset()
	writeRole(&buf, &api.RoleAnswer{Role: api.RoleActive, Previous: api.RoleActive, Since: since, Neighbors: 2})
	if !strings.Contains(buf.String(), "(no change)") {
		t.Errorf("writeRole, same role: %q", buf.String())
	}
}

// TestStatusRole: a standby box says so in the status header.
func TestStatusRole(t *testing.T) {
	var buf bytes.Buffer
	writeStatus(&buf, &api.State{Role: api.RoleStandby})
	if !strings.Contains(buf.String(), "role standby (answers no ARP/NDP for its VIPs: vipd active)") {
		t.Errorf("status header: %q", buf.String())
	}
}
