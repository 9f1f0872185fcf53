package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/admin/api"
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
