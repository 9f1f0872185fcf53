package packaging

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDashboard checks the Grafana dashboard without Grafana: panel ids
// unique, panels inside the 24-column grid and not overlapping, the
// rates per VIP and per backend (packets, bytes, new flows per second,
// as vipd status and vipd top show them) each on a panel, and every
// vipd_ metric it or the alerting rules query named in the admin
// package's collectors (the e2e test TestMonitoredMetricsExist checks
// them on a running vipd's /metrics).
func TestDashboard(t *testing.T) {
	data, err := os.ReadFile("monitoring/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			ID      int
			Title   string
			GridPos struct{ X, Y, W, H int }
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	ids := map[int]string{}
	type cell struct{ x, y int }
	cells := map[cell]string{}
	var exprs []string
	for _, p := range dash.Panels {
		if other, ok := ids[p.ID]; ok {
			t.Errorf("panels %q and %q share id %d", other, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, g)
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := cells[cell{x, y}]; ok {
					t.Fatalf("panels %q and %q overlap at %d,%d", other, p.Title, x, y)
				}
				cells[cell{x, y}] = p.Title
			}
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, want := range []string{
		"sum by (vip) (rate(vipd_vip_packets_total",
		"sum by (vip) (rate(vipd_vip_bytes_total",
		"sum by (vip) (rate(vipd_vip_new_flows_total",
		"sum by (vip, backend) (rate(vipd_backend_packets_total",
		"sum by (vip, backend) (rate(vipd_backend_bytes_total",
		"sum by (vip, backend) (rate(vipd_backend_new_flows_total",
	} {
		found := false
		for _, e := range exprs {
			found = found || strings.HasPrefix(e, want)
		}
		if !found {
			t.Errorf("no panel queries %s...)", want)
		}
	}

	rules, err := os.ReadFile("monitoring/prometheus-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^\s*expr: (.*)$`).FindAllStringSubmatch(string(rules), -1) {
		exprs = append(exprs, m[1])
	}
	srcs, err := filepath.Glob("../control/admin/*.go")
	if err != nil || len(srcs) == 0 {
		t.Fatalf("no admin sources (%v)", err)
	}
	var src strings.Builder
	for _, f := range srcs {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.Write(b)
	}
	for _, e := range exprs {
		for _, name := range regexp.MustCompile(`\bvipd_[a-z0-9_]+`).FindAllString(e, -1) {
			if !strings.Contains(src.String(), `"`+strings.TrimPrefix(name, "vipd_")+`"`) {
				t.Errorf("%s (in %s) is not a metric of package admin", name, e)
			}
		}
	}
}
