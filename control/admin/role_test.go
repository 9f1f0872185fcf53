package admin

import (
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/admin/client"
)

// roleProvider is a fakeProvider with a neighbor role.
type roleProvider struct {
	fakeProvider
	role string
}

func (p *roleProvider) SetRole(role string) (*api.RoleAnswer, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	prev := p.role
	p.role = role
	return &api.RoleAnswer{Role: role, Previous: prev, Since: time.Date(2026, 12, 4, 16, 0, 0, 0, time.UTC), Neighbors: map[string]int{api.RoleActive: 2}[role]}, nil
}

// TestRoleHandler: POST /v1/role is served on the socket only, with
// "active" or "standby" and nothing else; the client reads the outcome;
// the role is in /metrics (vipd's printing of it: TestWriteRole and
// TestStatusRole in cmd/vipd).
func TestRoleHandler(t *testing.T) {
	p := &roleProvider{role: api.RoleStandby}
	ro, ctl := Handler(p, ReadOnly), Handler(p, Control)
	const js = "application/json"
	for _, tt := range []struct {
		name string
		h    http.Handler
		body string
		code int
		want string
	}{
		{"read-only listener", ro, `{"role":"active"}`, 403, "vipd active"},
		{"active", ctl, `{"role":"active"}`, 200, `"previous":"standby"`},
		{"standby", ctl, `{"role":"standby"}`, 200, `"neighbor_vips":0`},
		{"unknown role", ctl, `{"role":"master"}`, 400, `want {"role": "active"|"standby"}`},
		{"unknown field", ctl, `{"role":"active","force":true}`, 400, "want"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, body := serve(t, tt.h, "POST", "/v1/role", js, tt.body)
			if code != tt.code || !strings.Contains(body, tt.want) {
				t.Errorf("%d %q, want %d with %q", code, body, tt.code, tt.want)
			}
		})
	}
	if code, _ := serve(t, Handler(&fakeProvider{}, Control), "POST", "/v1/role", js, `{"role":"active"}`); code != http.StatusNotImplemented {
		t.Errorf("no RoleSetter: %d, want 501", code)
	}

	sock := filepath.Join(t.TempDir(), "admin.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: ctl}
	go srv.Serve(ln)
	defer srv.Close()
	ans, err := client.SetRole(t.Context(), sock, api.RoleActive)
	if err != nil {
		t.Fatal(err)
	}
	if ans.Role != api.RoleActive || ans.Previous != api.RoleStandby || ans.Neighbors != 2 || !ans.Since.Equal(time.Date(2026, 12, 4, 16, 0, 0, 0, time.UTC)) {
		t.Errorf("SetRole: %+v", ans)
	}
	ans, err = client.SetRole(t.Context(), sock, api.RoleActive)
	if err != nil || ans.Previous != api.RoleActive {
		t.Errorf("SetRole, same role: %+v %v", ans, err)
	}
	got := gather(t, &Metrics{Role: api.RoleStandby, RoleChanges: 3}, "vipd_neighbor_role", "role")
	if got[api.RoleStandby] != 1 || got[api.RoleActive] != 0 || len(got) != 2 {
		t.Errorf("vipd_neighbor_role: %v", got)
	}
}
