package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/control/admin/api"
)

// overrideProvider records overrides and answers like the daemon: VIP
// "web" (also "198.18.0.100") has backend 198.18.1.11:8080 of weight 1.
type overrideProvider struct {
	drainProvider
	got []string // the requests, as JSON
	ov  *api.Override
}

func (p *overrideProvider) SetOverride(req api.OverrideRequest) (*api.OverrideAnswer, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if req.VIP != "web" && req.VIP != "198.18.0.100" {
		return nil, fmt.Errorf(`no VIP %q; did you mean web (198.18.0.100:80/tcp)?: %w`, req.VIP, api.ErrNotFound)
	}
	b, _ := json.Marshal(req)
	p.got = append(p.got, string(b))
	o := api.Override{Since: time.Now()}
	if p.ov != nil {
		o = *p.ov
	}
	switch {
	case req.Weight != nil:
		o.Weight = req.Weight
	case req.ResetWeight:
		o.Weight = nil
	default:
		o.Disabled = *req.Disabled
	}
	ans := &api.OverrideAnswer{VIP: "web", Backend: "198.18.1.11:8080", FileWeight: 1, FileState: "active"}
	p.ov = nil
	if o.Weight != nil || o.Disabled {
		p.ov = &o
		ans.Override = &o
	} else {
		ans.Note = "no change: it was already so"
	}
	return ans, nil
}

// TestOverrideCommands: vipd weight, disable and enable keep their
// command lines, reach the admin socket and say what is in force.
func TestOverrideCommands(t *testing.T) {
	p := &overrideProvider{}
	sock, cfg := serveSocket(t, p)
	for _, tt := range []struct {
		args []string
		code int
		out  string // on stdout when 0, else on stderr
	}{
		{[]string{"weight", "-config", cfg, "web", "198.18.1.11", "5"}, 0, "web 198.18.1.11:8080: weight 5 in force (the file says 1) until vipd weight -reset web 198.18.1.11:8080"},
		{[]string{"weight", "-socket", sock, "198.18.0.100", "198.18.1.11", "0"}, 0, "weight 0 in force"},
		{[]string{"weight", "-socket", sock, "web", "198.18.1.11", "-reset"}, 0, "web 198.18.1.11:8080: the file's weight 1 is in force"},
		{[]string{"weight", "-reset", "-socket", sock, "web", "198.18.1.11"}, 0, "note: no change"},
		{[]string{"disable", "-socket", sock, "-reason", "disk failing", "web", "198.18.1.11"}, 0, "web 198.18.1.11:8080: disabled, it takes no flows, until vipd enable web 198.18.1.11:8080"},
		{[]string{"enable", "web", "198.18.1.11", "-socket", sock}, 0, `web 198.18.1.11:8080: enabled (the file says state = "active")`},
		{[]string{"disable", "-socket", sock, "db", "198.18.1.11"}, 1, `vipd disable: no VIP "db"; did you mean web`},
		{[]string{"weight", "-socket", sock, "web", "198.18.1.11"}, 2, "usage: vipd weight"},
		{[]string{"weight", "-socket", sock, "-reset", "web", "198.18.1.11", "5"}, 2, "usage: vipd weight"},
		{[]string{"weight", "-socket", sock, "web", "198.18.1.11", "1001"}, 2, `weight "1001": want 0 to 1000`},
		{[]string{"weight", "-socket", sock, "web", "198.18.1.11", "heavy"}, 2, `weight "heavy"`},
		{[]string{"disable", "-socket", sock, "web"}, 2, "usage: vipd disable"},
		{[]string{"enable", "-socket", sock, "web", "a", "b"}, 2, "usage: vipd enable"},
		{[]string{"enable", "-bogus", "web", "a"}, 2, "flag provided but not defined"},
		{[]string{"weight", "-admin", "127.0.0.1:9180", "web", "198.18.1.11", "5"}, 1, "not served over TCP"},
		{[]string{"disable", "-socket", filepath.Join(filepath.Dir(sock), "missing.sock"), "web", "198.18.1.11"}, 1, "is vipd running"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tt.args, &stdout, &stderr)
		out := stdout.String()
		if tt.code != 0 {
			out = stderr.String()
		}
		if code != tt.code || !strings.Contains(out, tt.out) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %d with %q", tt.args, code, &stdout, &stderr, tt.code, tt.out)
		}
	}
	want := []string{
		`{"vip":"web","backend":"198.18.1.11","weight":5}`,
		`{"vip":"198.18.0.100","backend":"198.18.1.11","weight":0}`,
		`{"vip":"web","backend":"198.18.1.11","reset_weight":true}`,
		`{"vip":"web","backend":"198.18.1.11","reset_weight":true}`,
		`{"vip":"web","backend":"198.18.1.11","disabled":true,"reason":"disk failing"}`,
		`{"vip":"web","backend":"198.18.1.11","disabled":false}`,
	}
	if !slices.Equal(p.got, want) {
		t.Errorf("requests\n%q\nwant\n%q", p.got, want)
	}
}
