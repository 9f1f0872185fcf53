package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/testing/testkit"
)

// kaProvider is a vipd as the keepalived commands see it: a role, and a
// VIP with some backends up against its min_healthy.
type kaProvider struct {
	drainProvider
	mu       sync.Mutex
	role     string
	up, min  int
	switches int
	refuse   bool // SetRole fails
}

func (p *kaProvider) State(context.Context) (*api.State, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return &api.State{Role: p.role, VIPs: []api.VIPState{{Name: "web", BackendsUp: p.up, MinHealthy: p.min}}}, nil
}

func (p *kaProvider) SetRole(role string) (*api.RoleAnswer, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.refuse {
		return nil, errors.New("refused")
	}
	prev := p.role
	if role != prev {
		p.switches++
	}
	p.role = role
	return &api.RoleAnswer{Role: role, Previous: prev, Since: time.Now()}, nil
}

// TestKeepalivedCommands: keepalived-notify maps keepalived's states to
// roles and records them (and leaves no record rather than an old one
// when it cannot write); keepalived-check fails while vipd is down, a VIP
// is below min_healthy, or vipd is standby and no state is recorded, and
// puts the role right when it differs from what keepalived last notified.
func TestKeepalivedCommands(t *testing.T) {
	p := &kaProvider{role: api.RoleStandby, up: 2, min: 1}
	sock, _ := serveSocket(t, p)
	state := filepath.Join(t.TempDir(), "run", "keepalived.state")
	recorded := func() string {
		b, _ := os.ReadFile(state)
		return strings.TrimSpace(string(b))
	}
	set := func(role string) func() { return func() { p.role = role } }
	record := func(content string) func() {
		return func() {
			if err := os.WriteFile(state, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	const unknown = "vipd is standby and keepalived's state is unknown"
	for _, tt := range []struct {
		name     string
		args     []string
		before   func()
		code     int
		out      string // stdout when 0, else stderr ("" : nothing)
		role     string
		recorded string
		warn     string // stderr when 0
	}{
		{"check, none recorded, standby: cannot know", []string{"keepalived-check"}, nil, 1, unknown + " (open " + state + ": no such file", api.RoleStandby, "", ""},
		{"check, none recorded, active", []string{"keepalived-check"}, set(api.RoleActive), 0, "", api.RoleActive, "", ""},
		{"MASTER", []string{"keepalived-notify", "INSTANCE", "VI_1", "MASTER", "100"}, set(api.RoleStandby), 0, "keepalived VI_1 MASTER: active; vipd active", api.RoleActive, "MASTER", ""},
		{"check, in step", []string{"keepalived-check"}, nil, 0, "", api.RoleActive, "MASTER", ""},
		{"vipd restarted standby while MASTER", []string{"keepalived-check"}, set(api.RoleStandby), 0,
			"keepalived says MASTER: vipd was standby, now active", api.RoleActive, "MASTER", ""},
		{"vipd restarted standby while MASTER, and the switch fails", []string{"keepalived-check"}, func() { p.role, p.refuse = api.RoleStandby, true }, 1,
			"keepalived says MASTER, vipd is standby, and switching it failed", api.RoleStandby, "MASTER", ""},
		{"FAULT, a group's three words", []string{"keepalived-notify", "GROUP", "G1", "FAULT"}, func() { p.refuse = false }, 0, "keepalived G1 FAULT: standby", api.RoleStandby, "FAULT", ""},
		{"BACKUP", []string{"keepalived-notify", "INSTANCE", "VI_1", "BACKUP", "100"}, nil, 0, "standby", api.RoleStandby, "BACKUP", ""},
		{"below min_healthy", []string{"keepalived-check"}, func() { p.up, p.min = 1, 2 }, 1, "below min_healthy: web: 1 backends up, min_healthy 2", api.RoleStandby, "BACKUP", ""},
		{"below min_healthy and cannot know", []string{"keepalived-check"}, record("MAYBE\n"), 1, "below min_healthy", api.RoleStandby, "MAYBE", ""},
		{"check, garbage recorded, standby", []string{"keepalived-check"}, func() { p.up, p.min = 2, 1 }, 1, unknown + " (" + state + ` holds "MAYBE"`, api.RoleStandby, "MAYBE", ""},
		{"check, garbage recorded, active", []string{"keepalived-check"}, set(api.RoleActive), 0, "", api.RoleActive, "MAYBE", "vipd is active, keepalived's state unknown: " + state + ` holds "MAYBE"`},
		{"check, unreadable, standby", []string{"keepalived-check"}, func() {
			p.role = api.RoleStandby
			os.Remove(state)
			os.Mkdir(state, 0o755)
		}, 1, unknown + " (read " + state + ": is a directory", api.RoleStandby, "", ""},
		{"MASTER again", []string{"keepalived-notify", "INSTANCE", "VI_1", "MASTER", "100"}, func() { os.Remove(state) }, 0, "vipd active", api.RoleActive, "MASTER", ""},
		{"BACKUP that cannot be recorded leaves no record", []string{"keepalived-notify", "INSTANCE", "VI_1", "BACKUP", "100"}, func() { os.Mkdir(state+".tmp", 0o755) }, 0, "standby", api.RoleStandby, "", "vipd keepalived-notify: recording BACKUP: "},
		{"check after that, standby: cannot know", []string{"keepalived-check"}, nil, 1, unknown, api.RoleStandby, "", ""},
		{"unknown state", []string{"keepalived-notify", "INSTANCE", "VI_1", "MAYBE", "100"}, nil, 2, `state "MAYBE"`, api.RoleStandby, "", ""},
		{"too few words", []string{"keepalived-notify", "INSTANCE", "VI_1"}, nil, 2, "usage: vipd keepalived-notify", api.RoleStandby, "", ""},
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
			if code == 0 && ((tt.warn == "") != (stderr.Len() == 0) || !strings.Contains(stderr.String(), tt.warn)) {
				t.Errorf("stderr %q, want %q", stderr.String(), tt.warn)
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

// TestKeepalivedCheckDuringSlowStateWrite: while vipd writes its state
// file to a disk that hangs (the write's temporary file is a FIFO nobody
// reads), vipd keepalived-check and vipd status still answer within
// 100 ms: keepalived allows the check 2 s, and a check that times out
// fails the box over.
func TestKeepalivedCheckDuringSlowStateWrite(t *testing.T) {
	var log testkit.Buffer
	d, path := runDaemonLog(t, strings.Replace(cliConfig, "@LISTEN@", "127.0.0.1:0", 1), &log)
	dir := filepath.Dir(path)
	socket := filepath.Join(dir, "admin.sock")
	fifo := filepath.Join(dir, ".state.json.tmp") // the state file's temporary file
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Let the write go on: a reader lets the FIFO's open return.
		if f, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			t.Cleanup(func() { f.Close() })
		}
	})
	state := filepath.Join(dir, "keepalived.state")
	if err := os.WriteFile(state, []byte("MASTER\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	go d.SetOverride(api.OverrideRequest{VIP: "web", Backend: "198.18.1.11", Weight: func(w uint32) *uint32 { return &w }(5)})
	if !testkit.Poll(10*time.Second, func() bool { return strings.Contains(log.String(), "run-time override changed") }) {
		t.Fatal("the override was not applied")
	}
	// Its state file write is now blocked (or about to be).
	for _, tc := range []struct {
		name string
		run  func(stdout, stderr io.Writer) int
	}{
		{"vipd keepalived-check", func(o, e io.Writer) int {
			return keepalivedCheck([]string{"-socket", socket, "-state-file", state}, o, e)
		}},
		{"vipd status", func(o, e io.Writer) int { return run([]string{"status", "-admin", d.AdminAddr()}, o, e) }},
	} {
		done := make(chan int, 1)
		var stdout, stderr bytes.Buffer
		start := time.Now()
		go func() { done <- tc.run(&stdout, &stderr) }()
		select {
		case code := <-done:
			if took := time.Since(start); code != 0 || took > 100*time.Millisecond {
				t.Errorf("%s: exit %d after %v, want 0 within 100 ms\nstderr: %s", tc.name, code, took, &stderr)
			}
		case <-time.After(100 * time.Millisecond):
			t.Errorf("%s: no answer within 100 ms while the state file was being written", tc.name)
			// It answers once the write is let go (the cleanup).
		}
	}
}
