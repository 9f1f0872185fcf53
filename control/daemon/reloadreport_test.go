package daemon

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/admin/client"
	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/testing/testkit"
)

// syncBuffer is a log destination that tests read while the daemon logs.
type syncBuffer = testkit.Buffer

// startLogged is start with the daemon's log kept.
func startLogged(t *testing.T, src string) (*testDaemon, *syncBuffer) {
	t.Helper()
	td := newTestDaemon(t, src, nil)
	buf := &syncBuffer{}
	td.d.log = slog.New(slog.NewTextHandler(buf, nil)) // before Run: nothing logs yet
	td.run()
	td.waitRunning()
	return td, buf
}

func TestReloadReport(t *testing.T) {
	td := start(t, testConfig)
	edited := strings.Replace(testConfig, "address = \"198.18.1.12\"\nport = 8080", "address = \"198.18.1.12\"\nport = 8080\nweight = 5\n[[vip.backend]]\naddress = \"198.18.1.13\"\nport = 8080", 1)
	edited = strings.Replace(edited, `name = "dsr"`, `name = "dsr2"`, 1)
	edited = strings.Replace(edited, "queues = 2", "queues = 2\negress_mtu = 1400", 1)
	td.rewrite(edited)
	rep, err := td.d.ReloadWithReport()
	if err != nil {
		t.Fatalf("reload: %v", err)
	}
	want := &config.Diff{
		VIPsAdded: []string{"dsr2"}, VIPsRemoved: []string{"dsr"},
		BackendsAdded: []config.BackendID{{VIP: "web", Backend: "198.18.1.13:8080"}},
		Reweighted:    []config.Reweight{{BackendID: config.BackendID{VIP: "web", Backend: "198.18.1.12:8080"}, Old: 1, New: 5}},
		Keys:          []config.Change{{Table: "dataplane", Key: "egress_mtu", Old: "0", New: "1400"}},
	}
	if !reflect.DeepEqual(rep.Diff, want) {
		t.Errorf("diff %+v, want %+v", rep.Diff, want)
	}
	if len(rep.Errors) != 0 {
		t.Errorf("errors of an applied reload: %q", rep.Errors)
	}
	// The same through the admin socket.
	td.rewrite(testConfig)
	res, err := client.Reload(context.Background(), td.socket)
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK || !reflect.DeepEqual(res.VIPsAdded, []string{"dsr"}) || len(res.BackendsRemoved) != 1 || res.BackendsRemoved[0] != (api.BackendRef{VIP: "web", Backend: "198.18.1.13:8080"}) ||
		len(res.Reweighted) != 1 || res.Reweighted[0].Old != 5 || !reflect.DeepEqual(res.Changed, []string{"[dataplane] egress_mtu changed (1400 → 0)"}) {
		t.Errorf("reload over the socket: %+v", res)
	}
}

func TestReloadRefusalNamesKeys(t *testing.T) {
	td, logs := startLogged(t, testConfig)
	td.rewrite(strings.Replace(strings.Replace(testConfig, "queues = 2", "queues = 4", 1), "capacity = 65536", "capacity = 131072", 1))
	rep, err := td.d.ReloadWithReport()
	if !errors.Is(err, ErrRestartNeeded) {
		t.Fatalf("queues change: %v", err)
	}
	want := []string{"[dataplane] queues changed (2 → 4): needs a restart", "[conntrack] capacity changed (65536 → 131072): needs a restart"}
	if !reflect.DeepEqual(rep.Errors, want) {
		t.Errorf("errors %q, want %q", rep.Errors, want)
	}
	if got := err.Error(); got != "[dataplane] queues changed (2 → 4), [conntrack] capacity changed (65536 → 131072): needs a restart" {
		t.Errorf("error %q", got)
	}
	if rep.Diff != nil {
		t.Errorf("a refused reload reports changes: %+v", rep.Diff)
	}
	for _, w := range want {
		if !strings.Contains(logs.String(), w) {
			t.Errorf("log lacks %q:\n%s", w, logs)
		}
	}
	// Over the socket: refused, with every reason, and not an error.
	res, err := client.Reload(context.Background(), td.socket)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || !reflect.DeepEqual(res.Errors, want) {
		t.Errorf("refusal over the socket: %+v", res)
	}
}

func TestReloadErrorsOneLogEntryEach(t *testing.T) {
	td, logs := startLogged(t, testConfig)
	bad := strings.Replace(testConfig, "queues = 2", "queues = -1", 1)
	bad = strings.Replace(bad, "port = 8080", "port = 8080\nweight = 99999", 1)
	td.rewrite(bad)
	rep, err := td.d.ReloadWithReport()
	if err == nil {
		t.Fatal("a file with errors reloaded")
	}
	if len(rep.Errors) != 2 {
		t.Fatalf("errors %q: want 2 entries", rep.Errors)
	}
	for _, e := range rep.Errors {
		if !strings.HasPrefix(e, td.path+":") || strings.Contains(e, "\n") {
			t.Errorf("entry %q: want file:line: key: message", e)
		}
	}
	var refused []string
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "reload refused") {
			refused = append(refused, l)
		}
	}
	if len(refused) != 2 {
		t.Errorf("%d log entries for 2 errors:\n%s", len(refused), logs)
	}
	for _, l := range refused {
		if strings.Contains(l, `\n`) {
			t.Errorf("log entry with a literal \\n: %s", l)
		}
	}
}

func TestStateConfigDiffers(t *testing.T) {
	td := start(t, testConfig)
	ctx := context.Background()
	var loadedAt time.Time
	check := func(when string, differs bool, errHas string) {
		t.Helper()
		st, err := td.d.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.ConfigDiffers != differs || (errHas == "") != (st.ConfigError == "") || !strings.Contains(st.ConfigError, errHas) {
			t.Errorf("%s: config_differs %v, config_error %q; want %v, %q", when, st.ConfigDiffers, st.ConfigError, differs, errHas)
		}
		// The same in /metrics: vipd_config_file_differs,
		// vipd_config_last_reload_successful (0 only while the last
		// reload failed) and its timestamp (moved by a load that
		// applied, not by a refusal).
		m := td.d.Metrics().Config
		if m.FileDiffers != differs || m.LastReloadOK != (errHas == "") || m.LoadedAt.IsZero() {
			t.Errorf("%s: metrics %+v; want differs %v, last reload ok %v", when, m, differs, errHas == "")
		}
		if moved := m.LoadedAt.After(loadedAt); moved != strings.Contains(when, "good reload") && !loadedAt.IsZero() {
			t.Errorf("%s: the load time moved %v (%v → %v)", when, moved, loadedAt, m.LoadedAt)
		}
		loadedAt = m.LoadedAt
	}
	check("at start", false, "")
	edited := strings.Replace(testConfig, "address = \"198.18.1.12\"\nport = 8080", "address = \"198.18.1.12\"\nport = 8080\nweight = 5", 1)
	td.rewrite(edited)
	check("edited", true, "")
	td.rewrite(edited + "\n[dataplane]\n")
	if td.d.Reload() == nil {
		t.Fatal("a duplicate table reloaded")
	}
	check("after a failed reload", true, td.path)
	td.rewrite(edited)
	if err := td.d.Reload(); err != nil {
		t.Fatal(err)
	}
	check("after a good reload", false, "")
	td.rewrite(testConfig)
	check("edited back", true, "")
}
