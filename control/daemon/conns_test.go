package daemon

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/testing/testkit"
)

// TestConns creates flows on both VIPs of testConfig and lists them with
// each filter, through Daemon.Conns and GET /v1/conns.
func TestConns(t *testing.T) {
	td := start(t, testConfig)
	for p := uint16(7000); p < 7010; p++ {
		td.send(syn(t, "198.18.0.100", p, "S"))
	}
	for p := uint16(7100); p < 7104; p++ {
		td.send(syn(t, "198.18.0.101", p, "S"))
	}
	ctx := context.Background()
	list := func(q api.ConnsQuery) *api.Conns {
		t.Helper()
		c, err := td.d.Conns(ctx, q)
		if err != nil {
			t.Fatalf("Conns(%+v): %v", q, err)
		}
		return c
	}
	testkit.Eventually(t, testkit.Patience, "14 flows listed", func() bool { return len(list(api.ConnsQuery{}).Conns) == 14 })
	all := list(api.ConnsQuery{})
	perBackend := map[string]int{}
	for _, c := range all.Conns {
		if c.Protocol != "tcp" || !strings.HasPrefix(c.Client, "198.18.0.1:") || c.State != "SynSent" || c.FastPath != "off" || c.AgeSeconds < c.IdleSeconds {
			t.Errorf("flow %+v", c)
		}
		if c.VIP == "web" {
			perBackend[c.Backend]++
		}
	}
	for _, tc := range []struct {
		name string
		q    api.ConnsQuery
		want int
	}{
		{"vip by name", api.ConnsQuery{VIP: "web"}, 10},
		{"vip by address", api.ConnsQuery{VIP: "198.18.0.101"}, 4},
		{"vip by address:port", api.ConnsQuery{VIP: "198.18.0.101:80"}, 4},
		{"client", api.ConnsQuery{Client: "198.18.0.1"}, 14},
		{"client:port", api.ConnsQuery{Client: "198.18.0.1:7003"}, 1},
		{"other client", api.ConnsQuery{Client: "198.18.0.2"}, 0},
		{"backend", api.ConnsQuery{VIP: "web", Backend: "198.18.1.12:8080"}, perBackend["198.18.1.12:8080"]},
		{"limit", api.ConnsQuery{Limit: 3}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := list(tc.q)
			if len(c.Conns) != tc.want {
				t.Fatalf("%d flows, want %d: %+v", len(c.Conns), tc.want, c.Conns)
			}
			if tc.q.Limit == 3 && !c.Truncated {
				t.Error("a listing cut at its limit is not marked truncated")
			}
		})
	}
	for _, q := range []api.ConnsQuery{{VIP: "nope"}, {VIP: "198.18.0.101:81"}, {Backend: "198.18.9.9"}} {
		if _, err := td.d.Conns(ctx, q); !errors.Is(err, api.ErrNotFound) {
			t.Errorf("Conns(%+v): %v, want not found", q, err)
		}
	}
	if _, err := td.d.Conns(ctx, api.ConnsQuery{Client: "x"}); err == nil {
		t.Error("a bad client address was taken")
	}
	url := "http://" + td.d.AdminAddr() + "/v1/conns?vip=web&limit=2"
	if code, body := do(t, tcpClient, "GET", url, "", ""); code != http.StatusOK || !strings.Contains(body, `"truncated": true`) && !strings.Contains(body, `"truncated":true`) {
		t.Errorf("GET /v1/conns: %d %s", code, body)
	}
}
