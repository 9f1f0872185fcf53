package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipd/vipd/control/admin"
	"github.com/vipd/vipd/control/admin/api"
)

// reloadProvider is an admin.Provider and admin.Reloader that answers
// every reload with res, and every state request with st.
type reloadProvider struct {
	drainProvider
	res *api.ReloadResult
	st  api.State
}

func (p *reloadProvider) ReloadConfig() (*api.ReloadResult, error)  { return p.res, nil }
func (p *reloadProvider) State(context.Context) (*api.State, error) { return &p.st, nil }

// serveFake serves p's admin API, all of it, on a socket and read-only
// on a TCP port; it returns both addresses.
func serveFake(t *testing.T, p admin.Provider) (socket, tcp string) {
	t.Helper()
	socket = filepath.Join(t.TempDir(), "admin.sock")
	for _, l := range []struct {
		network, addr string
		access        admin.Access
	}{{"unix", socket, admin.Control}, {"tcp", "127.0.0.1:0", admin.ReadOnly}} {
		ln, err := net.Listen(l.network, l.addr)
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: admin.Handler(p, l.access)}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		if l.network == "tcp" {
			tcp = ln.Addr().String()
		}
	}
	return socket, tcp
}

func TestReloadCommand(t *testing.T) {
	p := &reloadProvider{}
	sock, tcp := serveFake(t, p)
	for _, tt := range []struct {
		name   string
		res    api.ReloadResult
		code   int
		stdout []string
		stderr []string
	}{
		{
			name: "applied",
			res: api.ReloadResult{OK: true, File: "/etc/vipd/vipd.toml", VIPsAdded: []string{"api"},
				BackendsRemoved: []api.BackendRef{{VIP: "web", Backend: "198.18.1.12:8080"}},
				Reweighted:      []api.Reweight{{BackendRef: api.BackendRef{VIP: "web", Backend: "198.18.1.11:8080"}, Old: 1, New: 5}},
				Changed:         []string{`[vip "web"] healthcheck.interval changed ("2s" → "5s")`},
				Warnings:        []string{"w.toml:3: dataplane.busy_poll_budget: has no effect"}},
			stdout: []string{"reloaded /etc/vipd/vipd.toml:", `+ vip "api"`, `- backend 198.18.1.12:8080 of vip "web"`,
				`~ backend 198.18.1.11:8080 of vip "web" weight 1 → 5`, `~ [vip "web"] healthcheck.interval changed ("2s" → "5s")`},
			stderr: []string{"warning: w.toml:3: dataplane.busy_poll_budget"},
		},
		{
			name:   "nothing",
			res:    api.ReloadResult{OK: true, File: "/etc/vipd/vipd.toml"},
			stdout: []string{"reloaded /etc/vipd/vipd.toml: nothing changed"},
		},
		{
			name: "refused",
			res: api.ReloadResult{File: "/etc/vipd/vipd.toml", Errors: []string{
				"/etc/vipd/vipd.toml:4: dataplane.queues: must be from 1 to 64, not 0",
				"/etc/vipd/vipd.toml:19: vip[0].backend[1].weight: must be from 1 to 1000, not 0"}},
			code: 1,
			stderr: []string{"reload of /etc/vipd/vipd.toml refused: the running configuration stays",
				"\n  /etc/vipd/vipd.toml:4: dataplane.queues: must be", "\n  /etc/vipd/vipd.toml:19: vip[0].backend[1].weight"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p.res = &tt.res
			var stdout, stderr bytes.Buffer
			code := run([]string{"reload", "-socket", sock}, &stdout, &stderr)
			if code != tt.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.code, &stderr)
			}
			for _, w := range tt.stdout {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, &stdout)
				}
			}
			for _, w := range tt.stderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, &stderr)
				}
			}
		})
	}
	// The TCP listener refuses reloads.
	resp, err := http.Post("http://"+tcp+"/v1/reload", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST /v1/reload on TCP: %s, want 403", resp.Status)
	}
}

func TestStatusSaysConfigDiffers(t *testing.T) {
	p := &reloadProvider{}
	_, tcp := serveFake(t, p)
	status := func() string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := run([]string{"status", "-admin", tcp}, &stdout, &stderr); code != 0 {
			t.Fatalf("status: exit %d: %s", code, &stderr)
		}
		return stdout.String()
	}
	p.st = api.State{ConfigFile: "/etc/vipd/vipd.toml"}
	if out := status(); strings.Contains(out, "differs") || strings.Contains(out, "reload failed") {
		t.Errorf("status of a file that runs as it is:\n%s", out)
	}
	p.st.ConfigDiffers = true
	p.st.ConfigError = "/etc/vipd/vipd.toml:4: dataplane.queues: must be from 1 to 64, not 0\n/etc/vipd/vipd.toml:9: vip[0].port: must be 0..65535"
	out := status()
	for _, w := range []string{
		"config /etc/vipd/vipd.toml on disk differs from the running configuration: `vipd reload` applies it\n",
		"the last reload failed (the running configuration stays):\n  /etc/vipd/vipd.toml:4: dataplane.queues",
		"\n  /etc/vipd/vipd.toml:9: vip[0].port",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("status lacks %q:\n%s", w, out)
		}
	}
}
