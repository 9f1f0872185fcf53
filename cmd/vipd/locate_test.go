package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/control"
	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/control/daemon"
	"github.com/vipd/vipd/dataplane"
	"github.com/vipd/vipd/dataplane/memq"
	"github.com/vipd/vipd/testing/testkit"
)

// memPlatform is a daemon.Platform in memory: memq queues and a fixed
// host whose next hops are all resolved.
type memPlatform struct{}

func (memPlatform) OpenQueues(dp *config.Dataplane) ([]dataplane.Queue, error) {
	qs := make([]dataplane.Queue, dp.Queues)
	for i := range qs {
		qs[i] = memq.New(64)
	}
	return qs, nil
}

func (memPlatform) Host() control.Host {
	return control.Host{
		Host: dataplane.Host{
			MAC:   [2][6]byte{{2, 0, 0, 0, 0, 0x10}, {2, 0, 0, 0, 0, 0x10}},
			MTU:   [2]int{1500, 1500},
			Addr4: [2]netip.Addr{netip.MustParseAddr("198.18.0.254"), netip.MustParseAddr("198.18.0.254")},
		},
		NextHop: func(netip.Addr) ([6]byte, bool) {
			return [6]byte{2, 0, 0, 0, 0, 0x20}, true
		},
	}
}

func (memPlatform) Apply(daemon.Steering) error    { return nil }
func (memPlatform) SetNeighborVIPs([]netip.Addr)   {}
func (memPlatform) DriverStats() map[string]uint64 { return nil }
func (memPlatform) Close() error                   { return nil }

func (memPlatform) Run(ctx context.Context, changed func()) error {
	changed()
	<-ctx.Done()
	return nil
}

// runDaemon runs a vipd in this process, on an in-memory platform, with
// the configuration src, whose @DIR@ is replaced by a fresh directory;
// it returns the daemon and the file, and stops the daemon when the test
// ends.
func runDaemon(t *testing.T, src string) (*daemon.Daemon, string) {
	t.Helper()
	return runDaemonLog(t, src, io.Discard)
}

// runDaemonLog is runDaemon with the daemon's log written to log.
func runDaemonLog(t *testing.T, src string, log io.Writer) (*daemon.Daemon, string) {
	t.Helper()
	// Not t.TempDir: a long test name would pass the 107 bytes a
	// socket path may have.
	dir, err := os.MkdirTemp("", "vipd-cli")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "vipd.toml")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(src, "@DIR@", dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	d := daemon.New(cfg, daemon.Options{ConfigPath: path, Platform: memPlatform{}, Version: "test",
		Log: slog.New(slog.NewTextHandler(log, nil)), PollTimeout: 10 * time.Millisecond})
	running := testkit.Go(t, "vipd", testkit.Patience, d.Run)
	select {
	case <-d.Running():
	case <-running.Done():
		t.Fatalf("vipd exited: %v", running.Err())
	case <-time.After(testkit.Patience):
		t.Fatal("vipd did not start")
	}
	return d, path
}

const cliConfig = `[dataplane]
ingress = "eth0"
queues = 1
state_file = "@DIR@/state.json"
[conntrack]
capacity = 4096
[admin]
listen = "@LISTEN@"
socket = "@DIR@/admin.sock"
[[vip]]
name = "web"
address = "198.18.0.100"
port = 80
[vip.healthcheck]
type = "none"
[[vip.backend]]
address = "198.18.1.11"
port = 8080
`

// TestBrokenFileReachesVipd: vipd reload -config and vipd status -config
// with a file that does not load — a syntax error outside [admin], or
// values that do not validate — reach the vipd running on it, which
// refuses the reload with every error, counts it
// (vipd_config_reloads_total{result="error"}, VipdReloadFailed) and
// shows it in its status. The client reads only [admin] of the file.
func TestBrokenFileReachesVipd(t *testing.T) {
	d, path := runDaemon(t, strings.Replace(cliConfig, "@LISTEN@", "127.0.0.1:0", 1))
	// The file from now on names the port the listener got.
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(string(good), "127.0.0.1:0", d.AdminAddr(), 1)
	for i, tc := range []struct {
		name string
		edit func(string) string
		errs []string // in the refusal, each with its file:line
	}{
		{"syntax error after [admin]", func(s string) string { return s + "[[vip]\nname = \"api\"\n" },
			[]string{path + ":20: "}},
		{"syntax error before [admin]", func(s string) string { return strings.Replace(s, "queues = 1", "queues = = 1", 1) },
			[]string{path + ":3: "}},
		{"values that do not validate", func(s string) string {
			return strings.Replace(strings.Replace(s, "queues = 1", "queues = 0", 1), "port = 8080", "port = 8080\nweight = 0", 1)
		}, []string{path + ":3: dataplane.queues", path + ":19: vip[0].backend[0].weight"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(path, []byte(tc.edit(src)), 0o644); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			if code := run([]string{"reload", "-config", path}, &stdout, &stderr); code != 1 {
				t.Errorf("reload: exit %d, want 1\nstdout: %s\nstderr: %s", code, &stdout, &stderr)
			}
			out := stderr.String()
			if !strings.Contains(out, "reload of "+path+" refused: the running configuration stays") {
				t.Errorf("reload: no refusal from vipd:\n%s", out)
			}
			for _, e := range tc.errs {
				if !strings.Contains(out, "\n  "+e) {
					t.Errorf("reload: the refusal lacks %q:\n%s", e, out)
				}
			}
			if n := d.Metrics().Reloads["error"]; n != uint64(i+1) {
				t.Errorf("vipd counted %d failed reloads, want %d", n, i+1)
			}
			stdout.Reset()
			stderr.Reset()
			if code := run([]string{"status", "-config", path}, &stdout, &stderr); code != 0 {
				t.Fatalf("status: exit %d\nstderr: %s", code, &stderr)
			}
			if out := stdout.String(); !strings.Contains(out, "the last reload failed (the running configuration stays):\n  "+tc.errs[0]) {
				t.Errorf("status lacks the failed reload:\n%s", out)
			}
		})
	}
}

// TestBrokenAdminFallsBack: when [admin] itself does not parse, the
// commands take the default socket and listener, and say why. (Asked
// without dialling them: a vipd on this machine may own the defaults.)
func TestBrokenAdminFallsBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vipd.toml")
	if err := os.WriteFile(path, []byte("[admin]\nsocket = \"/run/vipd-x/admin.sock\nlisten = \"127.0.0.1:1\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	note := "note: " + path + ":2: [admin] does not parse: "
	var stderr bytes.Buffer
	sock, err := socketFor("", "", path, &stderr)
	if want := "; trying the default admin socket " + config.DefaultAdminSocket + " (-socket PATH names another)\n"; sock != config.DefaultAdminSocket || err != nil ||
		!strings.HasPrefix(stderr.String(), note) || !strings.HasSuffix(stderr.String(), want) {
		t.Errorf("socket %q (%v), stderr %q; want the default and %q ... %q", sock, err, &stderr, note, want)
	}
	stderr.Reset()
	addr, err := adminAddr("", path, &stderr)
	if want := "; trying the default admin listener " + config.DefaultAdminListen + " (-admin HOST:PORT names another)\n"; addr != config.DefaultAdminListen || err != nil ||
		!strings.HasPrefix(stderr.String(), note) || !strings.HasSuffix(stderr.String(), want) {
		t.Errorf("listener %q (%v), stderr %q; want the default and %q ... %q", addr, err, &stderr, note, want)
	}
}
