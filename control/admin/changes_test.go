package admin

import (
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/admin/client"
)

// overrideProvider is a fakeProvider that takes overrides: VIP "web" has
// one backend, 198.18.1.11:8080; its file disables 198.18.1.12:8080.
type overrideProvider struct {
	fakeProvider
	got []api.OverrideRequest
}

func (p *overrideProvider) SetOverride(req api.OverrideRequest) (*api.OverrideAnswer, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case req.VIP != "web":
		return nil, fmt.Errorf("no VIP %q: %w", req.VIP, api.ErrNotFound)
	case req.Backend == "198.18.1.12:8080":
		return nil, fmt.Errorf("the file disables it: %w", api.ErrConflict)
	case req.Weight != nil && *req.Weight > 1000:
		return nil, fmt.Errorf("weight %d: %w", *req.Weight, api.ErrInvalid)
	}
	p.got = append(p.got, req)
	ans := &api.OverrideAnswer{VIP: "web", Backend: "198.18.1.11:8080", FileWeight: 1, FileState: "active"}
	if req.Weight != nil {
		ans.Override = &api.Override{Weight: req.Weight, Since: time.Now()}
	}
	return ans, nil
}

// TestOverrideHandler: POST /v1/override is served on the socket only,
// JSON only, one change at a time, with the daemon's errors mapped.
func TestOverrideHandler(t *testing.T) {
	p := &overrideProvider{}
	ro, ctl := Handler(p, ReadOnly), Handler(p, Control)
	const js = "application/json"
	for _, tt := range []struct {
		name string
		h    http.Handler
		body string
		code int
		want string
	}{
		{"read-only listener", ro, `{"vip":"web","backend":"198.18.1.11","weight":5}`, 403, "vipd weight"},
		{"weight", ctl, `{"vip":"web","backend":"198.18.1.11","weight":5}`, 200, `"weight":5`},
		{"weight 0", ctl, `{"vip":"web","backend":"198.18.1.11","weight":0}`, 200, `"weight":0`},
		{"reset", ctl, `{"vip":"web","backend":"198.18.1.11","reset_weight":true}`, 200, `"file_weight":1`},
		{"disable", ctl, `{"vip":"web","backend":"198.18.1.11","disabled":true}`, 200, `"backend":"198.18.1.11:8080"`},
		{"two changes at once", ctl, `{"vip":"web","backend":"198.18.1.11","weight":5,"disabled":true}`, 400, "one of"},
		{"no change", ctl, `{"vip":"web","backend":"198.18.1.11"}`, 400, "one of"},
		{"no backend", ctl, `{"vip":"web","weight":5}`, 400, "one of"},
		{"unknown field", ctl, `{"vip":"web","backend":"198.18.1.11","weight":5,"drain":true}`, 400, "one of"},
		{"unknown VIP", ctl, `{"vip":"db","backend":"198.18.1.11","weight":5}`, 404, `no VIP "db"`},
		{"the file decides", ctl, `{"vip":"web","backend":"198.18.1.12:8080","disabled":false}`, 409, "the file disables it"},
		{"weight out of range", ctl, `{"vip":"web","backend":"198.18.1.11","weight":1001}`, 400, "weight 1001"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, body := serve(t, tt.h, "POST", "/v1/override", js, tt.body)
			if code != tt.code || !strings.Contains(body, tt.want) {
				t.Errorf("%d %q, want %d with %q", code, body, tt.code, tt.want)
			}
		})
	}
	if len(p.got) != 4 {
		t.Errorf("%d overrides applied, want 4: %+v", len(p.got), p.got)
	}
	if code, _ := serve(t, ctl, "POST", "/v1/override", "text/plain", `{"vip":"web","backend":"198.18.1.11","weight":5}`); code != http.StatusUnsupportedMediaType {
		t.Errorf("a text/plain body: %d, want 415", code)
	}
	// A provider without overrides says so.
	if code, _ := serve(t, Handler(&fakeProvider{}, Control), "POST", "/v1/override", js, `{"vip":"web","backend":"198.18.1.11","weight":5}`); code != http.StatusNotImplemented {
		t.Errorf("no Overrider: %d, want 501", code)
	}
}

// TestSetOverrideClient: the client reaches the socket and reads the
// answer, or the server's error.
func TestSetOverrideClient(t *testing.T) {
	p := &overrideProvider{}
	sock := filepath.Join(t.TempDir(), "admin.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: Handler(p, Control)}
	go srv.Serve(ln)
	defer srv.Close()
	w := uint32(7)
	ans, err := client.SetOverride(t.Context(), sock, api.OverrideRequest{VIP: "web", Backend: "198.18.1.11", Weight: &w})
	if err != nil || ans.Backend != "198.18.1.11:8080" || ans.Override == nil || *ans.Override.Weight != 7 {
		t.Fatalf("%+v %v", ans, err)
	}
	if _, err := client.SetOverride(t.Context(), sock, api.OverrideRequest{VIP: "db", Backend: "198.18.1.11", Weight: &w}); err == nil || !strings.Contains(err.Error(), `no VIP "db"`) {
		t.Errorf("unknown VIP: %v", err)
	}
}

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
