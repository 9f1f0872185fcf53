package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vipd/vipd/control/admin"
	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/internal/procs"
)

func TestRun(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.toml")
	if err := os.WriteFile(bad, []byte("[dataplane]\nio = \"dpdk\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	noAdmin := filepath.Join(t.TempDir(), "noadmin.toml")
	if err := os.WriteFile(noAdmin, []byte("[dataplane]\ningress = \"eth0\"\n[admin]\nlisten = \"\"\nsocket = \"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	nobody := filepath.Join(t.TempDir(), "nobody.sock")
	nobodyCfg := filepath.Join(t.TempDir(), "nobody.toml")
	if err := os.WriteFile(nobodyCfg, []byte("[dataplane]\ningress = \"eth0\"\n[admin]\nsocket = \""+nobody+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		args       []string
		code       int
		out, errIn string
	}{
		{"check example", []string{"-check", "-config", "../../config.toml.example"}, 0, "VIP web-nat", ""},
		{"check shows backends", []string{"-check", "-config", "../../config.toml.example"}, 0, "198.18.1.11:8080", ""},
		{"check shows the tunnel probe", []string{"-check", "-config", "../../config.toml.example"}, 0, "probe tunnel (VIP through each backend's tunnel)", ""},
		{"check broken file", []string{"-check", "-config", bad}, 1, "", "bad.toml:2: dataplane.io"},
		{"check reports every error", []string{"-check", "-config", bad}, 1, "", "dataplane.ingress"},
		{"missing file", []string{"-check", "-config", "/nonexistent/vipd.toml"}, 1, "", "no such file"},
		{"no config", []string{}, 2, "", "-config FILE is required"},
		{"version", []string{"-version"}, 0, "vipd ", ""},
		{"help", []string{"-h"}, 0, "", "usage:"},
		{"unknown flag", []string{"-bogus"}, 2, "", "flag provided but not defined"},
		{"stray argument", []string{"-config", "x", "extra"}, 2, "", "unexpected argument"},
		{"status without a server", []string{"status", "-admin", "127.0.0.1:1"}, 1, "", "is vipd running"},
		{"status with a config without admin", []string{"status", "-config", noAdmin}, 1, "", "disables the admin server"},
		{"drain needs two arguments", []string{"drain", "web"}, 2, "", "usage: vipd drain"},
		{"drain without vipd", []string{"drain", "-socket", nobody, "web", "198.18.1.11:8080"}, 1, "", "is vipd running"},
		{"drain finds the socket in -config", []string{"drain", "-config", nobodyCfg, "web", "198.18.1.11:8080"}, 1, "", nobody + " does not exist"},
		{"drain with a config without socket", []string{"drain", "-config", noAdmin, "web", "198.18.1.11:8080"}, 1, "", "disables the admin socket"},
		{"drain over TCP is refused", []string{"drain", "-admin", "127.0.0.1:9180", "web", "198.18.1.11:8080"}, 1, "", "not served over TCP"},
		{"drain -admin takes a socket path", []string{"drain", "-admin", nobody, "web", "198.18.1.11:8080"}, 1, "", nobody + " does not exist"},
		{"where needs two arguments", []string{"where", "web"}, 2, "", "usage: vipd where"},
		{"where without a server", []string{"where", "-admin", "127.0.0.1:1", "web", "198.18.0.1:5"}, 1, "", "admin server"},
		{"bad log level", []string{"-config", "../../config.toml.example", "-log-level", "loud"}, 2, "", "-log-level"},
		{"bad log format", []string{"-config", "../../config.toml.example", "-log-format", "xml"}, 2, "", "-log-format"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tt.args, &stdout, &stderr)
			if code != tt.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, &stdout, &stderr)
			}
			if tt.out != "" && !strings.Contains(stdout.String(), tt.out) {
				t.Errorf("stdout lacks %q:\n%s", tt.out, &stdout)
			}
			if tt.errIn != "" && !strings.Contains(stderr.String(), tt.errIn) {
				t.Errorf("stderr lacks %q:\n%s", tt.errIn, &stderr)
			}
		})
	}
}

// drainProvider is an admin.Provider that records drains.
type drainProvider struct {
	mu     sync.Mutex
	drains []string
	events []api.Event // served by Events
}

func (p *drainProvider) Histories() *api.Histories { return nil }

// Events serves p.events after seq, as the daemon's log does.
func (p *drainProvider) Events(seq uint64, most int) *api.EventsAnswer {
	p.mu.Lock()
	defer p.mu.Unlock()
	ans := &api.EventsAnswer{Events: []api.Event{}}
	for _, e := range p.events {
		if e.Seq > seq {
			ans.Events = append(ans.Events, e)
		}
		ans.Last = max(ans.Last, e.Seq)
	}
	if most > 0 && len(ans.Events) > most {
		ans.Events = ans.Events[len(ans.Events)-most:]
	}
	return ans
}

func (p *drainProvider) Ready() error                              { return nil }
func (p *drainProvider) State(context.Context) (*api.State, error) { return &api.State{}, nil }
func (p *drainProvider) Metrics() *admin.Metrics                   { return &admin.Metrics{} }
func (p *drainProvider) Where(string, string, uint16) (*api.WhereAnswer, error) {
	return nil, api.ErrNotFound
}

func (p *drainProvider) SetDrain(vip, backend string, drain bool, _ string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drains = append(p.drains, fmt.Sprint(vip, " ", backend, " ", drain))
	return nil
}

// serveSocket serves the admin API over p with Control access on a Unix
// socket in a temporary directory until the test ends, and returns a
// configuration file whose [admin] socket names it, and the socket's path.
func serveSocket(t *testing.T, p admin.Provider) (sock, cfg string) {
	t.Helper()
	dir := t.TempDir()
	sock = filepath.Join(dir, "admin.sock")
	cfg = filepath.Join(dir, "vipd.toml")
	if err := os.WriteFile(cfg, []byte("[dataplane]\ningress = \"eth0\"\n[admin]\nsocket = \""+sock+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: admin.Handler(p, admin.Control)}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock, cfg
}

// TestDrain: `vipd drain` keeps its command line and reaches the admin
// socket named by -config (or -socket).
func TestDrain(t *testing.T) {
	p := &drainProvider{}
	sock, cfg := serveSocket(t, p)
	for _, tt := range []struct {
		args []string
		out  string
	}{
		{[]string{"drain", "-config", cfg, "web", "198.18.1.11:8080"}, "draining 198.18.1.11:8080 of web"},
		{[]string{"drain", "-undo", "-socket", sock, "web", "198.18.1.11:8080"}, "undrained 198.18.1.11:8080 of web"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tt.args, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), tt.out) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", tt.args, code, &stdout, &stderr)
		}
	}
	if want := []string{"web 198.18.1.11:8080 true", "web 198.18.1.11:8080 false"}; !slices.Equal(p.drains, want) {
		t.Errorf("drains %q, want %q", p.drains, want)
	}
	if got, err := drainSocket("", "", ""); got != config.DefaultAdminSocket || err != nil {
		t.Errorf("without flags the socket is %q (%v), want the default %q", got, err, config.DefaultAdminSocket)
	}
	if got, err := drainSocket("", "", "../../config.toml.example"); got != config.DefaultAdminSocket || err != nil {
		t.Errorf("with the example the socket is %q (%v), want the default %q", got, err, config.DefaultAdminSocket)
	}
}

// TestLogProcs: vipd says when it raised GOMAXPROCS, and warns when one
// from the environment leaves no P besides the workers; otherwise it is
// silent. (internal/procs tests what Spare does.)
func TestLogProcs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pr      procs.Result
		workers int
		log     string // "" = nothing logged
	}{
		{"raised", procs.Result{Before: 1, After: 2}, 1, `level=INFO msg="GOMAXPROCS raised to leave one P besides the workers" from=1 to=2 workers=1`},
		{"enough already", procs.Result{Before: 4, After: 4}, 2, ""},
		{"environment, short", procs.Result{Before: 2, After: 2, FromEnv: true}, 2, `level=WARN msg="GOMAXPROCS from the environment leaves no P besides the workers`},
		{"environment, enough", procs.Result{Before: 3, After: 3, FromEnv: true}, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			logProcs(tc.pr, tc.workers, slog.New(slog.NewTextHandler(&buf, nil)))
			if tc.log == "" && buf.Len() > 0 || !strings.Contains(buf.String(), tc.log) {
				t.Errorf("log %q, want %q", buf.String(), tc.log)
			}
		})
	}
}

// TestDrainBoxUndoneMeanwhile: drain-box waits for "drained"; when the
// drain is undone meanwhile (another admin, a restart), the box reports
// "announcing" and will never drain: the command says so and fails, where
// it used to poll without pause once the linger had passed.
func TestDrainBoxUndoneMeanwhile(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "admin.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var polls atomic.Int64
	until := time.Now().Add(50 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/drain-box", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"box":"draining","linger_until":"` + until + `"}`))
	})
	mux.HandleFunc("GET /v1/state", func(w http.ResponseWriter, r *http.Request) {
		polls.Add(1)
		w.Write([]byte(`{"bgp":{"box":"announcing"}}`))
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer srv.Close()
	done := make(chan int, 1)
	var stdout, stderr bytes.Buffer
	go func() { done <- run([]string{"drain-box", "-socket", sock}, &stdout, &stderr) }()
	select {
	case code := <-done:
		if code == 0 || !strings.Contains(stderr.String(), "announcing again") {
			t.Errorf("exit %d, stderr %q; want a failure that says the drain was undone", code, &stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("drain-box still waiting after 30 s, %d polls", polls.Load())
	}
}
