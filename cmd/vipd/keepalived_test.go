package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vipd/vipd/admin"
)

// kaProvider is a vipd as the keepalived commands see it: a role, and a
// VIP with some backends up against its min_healthy.
type kaProvider struct {
	drainProvider
	mu       sync.Mutex
	role     string
	up, min  int
	switches int
}

func (p *kaProvider) State(context.Context) (*admin.State, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return &admin.State{Role: p.role, VIPs: []admin.VIPState{{Name: "web", BackendsUp: p.up, MinHealthy: p.min}}}, nil
}

func (p *kaProvider) SetRole(role string) (*admin.RoleAnswer, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	prev := p.role
	if role != prev {
		p.switches++
	}
	p.role = role
	return &admin.RoleAnswer{Role: role, Previous: prev, Since: time.Now()}, nil
}

// TestKeepalivedCommands: keepalived-notify maps keepalived's states to
// roles and records them; keepalived-check fails while vipd is down or a
// VIP is below min_healthy, and puts the role right when it differs from
// what keepalived last notified.
func TestKeepalivedCommands(t *testing.T) {
	p := &kaProvider{role: admin.RoleStandby, up: 2, min: 1}
	sock, _ := serveSocket(t, p)
	state := filepath.Join(t.TempDir(), "run", "keepalived.state")
	recorded := func() string {
		b, _ := os.ReadFile(state)
		return strings.TrimSpace(string(b))
	}
	for _, tt := range []struct {
		name     string
		args     []string
		before   func()
		code     int
		out      string // stdout when 0, else stderr ("" : nothing)
		role     string
		recorded string
	}{
		{"check, no state recorded", []string{"keepalived-check"}, nil, 0, "", admin.RoleStandby, ""},
		{"MASTER", []string{"keepalived-notify", "INSTANCE", "VI_1", "MASTER", "100"}, nil, 0, "keepalived VI_1 MASTER: active; vipd active", admin.RoleActive, "MASTER"},
		{"check, in step", []string{"keepalived-check"}, nil, 0, "", admin.RoleActive, "MASTER"},
		{"vipd restarted standby while MASTER", []string{"keepalived-check"}, func() { p.role = admin.RoleStandby }, 0,
			"keepalived says MASTER: vipd was standby, now active", admin.RoleActive, "MASTER"},
		{"FAULT, a group's three words", []string{"keepalived-notify", "GROUP", "G1", "FAULT"}, nil, 0, "keepalived G1 FAULT: standby", admin.RoleStandby, "FAULT"},
		{"BACKUP", []string{"keepalived-notify", "INSTANCE", "VI_1", "BACKUP", "100"}, nil, 0, "standby", admin.RoleStandby, "BACKUP"},
		{"below min_healthy", []string{"keepalived-check"}, func() { p.up, p.min = 1, 2 }, 1, "below min_healthy: web: 1 backends up, min_healthy 2", admin.RoleStandby, "BACKUP"},
		{"unknown state", []string{"keepalived-notify", "INSTANCE", "VI_1", "MAYBE", "100"}, nil, 2, `state "MAYBE"`, admin.RoleStandby, "BACKUP"},
		{"too few words", []string{"keepalived-notify", "INSTANCE", "VI_1"}, nil, 2, "usage: vipd keepalived-notify", admin.RoleStandby, "BACKUP"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.before != nil {
				p.mu.Lock()
				tt.before()
				p.mu.Unlock()
			}
			args := append([]string{tt.args[0], "-socket", sock, "-state-file", state}, tt.args[1:]...)
			var stdout, stderr bytes.Buffer
			code := run(args, &stdout, &stderr)
			out := stdout.String()
			if tt.code != 0 {
				out = stderr.String()
			}
			if code != tt.code || (tt.out == "" && out != "") || !strings.Contains(out, tt.out) {
				t.Errorf("exit %d, output %q (stderr %q); want %d with %q", code, out, stderr.String(), tt.code, tt.out)
			}
			p.mu.Lock()
			role := p.role
			p.mu.Unlock()
			if role != tt.role || recorded() != tt.recorded {
				t.Errorf("vipd %s, recorded %q; want %s, %q", role, recorded(), tt.role, tt.recorded)
			}
		})
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"keepalived-check", "-socket", sock + ".gone", "-state-file", state}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "vipd is down or not ready") {
		t.Errorf("vipd gone: exit %d, %q", code, stderr.String())
	}
}
