package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vipd/vipd/control"
	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/admin/client"
	"github.com/vipd/vipd/dataplane"
	"github.com/vipd/vipd/testing/testkit"
)

// logBuffer is a log the tests read while the daemon writes it.
type logBuffer struct{ testkit.Buffer }

// lines returns the lines of the log that contain every one of subs.
func (b *logBuffer) lines(subs ...string) []string {
	var out []string
	for _, l := range strings.Split(b.String(), "\n") {
		ok := l != ""
		for _, s := range subs {
			ok = ok && strings.Contains(l, s)
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}

// logTo sends td's log to a buffer; before run.
func (td *testDaemon) logTo() *logBuffer {
	lb := &logBuffer{}
	td.d.log = slog.New(slog.NewTextHandler(lb, nil))
	return lb
}

// backendState returns backend addr of VIP vip from /v1/state.
func (td *testDaemon) backendState(vip, addr string) api.BackendState {
	td.t.Helper()
	st, err := td.d.State(context.Background())
	if err != nil {
		td.t.Fatal(err)
	}
	for _, v := range st.VIPs {
		if v.Name != vip {
			continue
		}
		for _, b := range v.Backends {
			if b.Address == addr {
				return b
			}
		}
	}
	td.t.Fatalf("no backend %s of %s in the state", addr, vip)
	return api.BackendState{}
}

// specBackend returns backend j of VIP i in the last published spec.
func (td *testDaemon) specBackend(i, j int) dataplane.BackendSpec {
	td.d.mu.Lock()
	defer td.d.mu.Unlock()
	return td.d.spec.VIPs[i].Backends[j]
}

func (td *testDaemon) override(req api.OverrideRequest) *api.OverrideAnswer {
	td.t.Helper()
	ans, err := td.d.SetOverride(req)
	if err != nil {
		td.t.Fatalf("%+v: %v", req, err)
	}
	return ans
}

func weight(n uint32) *uint32 { return &n }
func flag(b bool) *bool       { return &b }

// TestOverrides: vipd weight, disable and enable change the snapshot's
// Maglev weights and states, the flows new connections get, and what
// /v1/state shows, until undone.
func TestOverrides(t *testing.T) {
	td := start(t, testConfig)
	// A backend by its address alone: its port is unambiguous.
	ans := td.override(api.OverrideRequest{VIP: "web", Backend: "198.18.1.12", Weight: weight(5)})
	if ans.VIP != "web" || ans.Backend != "198.18.1.12:8080" || ans.FileWeight != 1 || ans.FileState != "active" ||
		ans.Override == nil || *ans.Override.Weight != 5 || ans.Override.Since.IsZero() {
		t.Errorf("answer %+v", ans)
	}
	if b := td.specBackend(0, 1); b.Weight != 5000 || b.State != dataplane.BackendUp {
		t.Errorf("spec after weight 5: %+v", b)
	}
	b := td.backendState("web", "198.18.1.12")
	if b.Weight != 1 || b.MaglevWeight != 5000 || b.EffectiveWeight != 5 || b.Override == nil || *b.Override.Weight != 5 {
		t.Errorf("state after weight 5: %+v", b)
	}
	if b := td.backendState("web", "198.18.1.11"); b.Override != nil {
		t.Errorf("the other backend has an override: %+v", b.Override)
	}

	// Disabled: no new flow goes there.
	td.override(api.OverrideRequest{VIP: "web", Backend: "198.18.1.11:8080", Disabled: flag(true)})
	if b := td.specBackend(0, 0); b.State != dataplane.BackendDown {
		t.Errorf("spec after disable: %+v", b)
	}
	if b := td.backendState("web", "198.18.1.11"); b.Forwarding != "down" || b.Override == nil || !b.Override.Disabled || b.Override.Weight != nil {
		t.Errorf("state after disable: %+v", b)
	}
	for p := uint16(100); p < 140; p++ {
		if got := td.send(syn(t, "198.18.0.100", p, "S")); got != netip.MustParseAddr("198.18.1.12") {
			t.Fatalf("new flow %d went to %v while .11 is disabled", p, got)
		}
	}

	// Weight 0: no new flows, like a drain; here the VIP's last one.
	td.override(api.OverrideRequest{VIP: "web", Backend: "198.18.1.12", Weight: weight(0)})
	if b := td.backendState("web", "198.18.1.12"); b.Forwarding != "draining" || b.MaglevWeight != 0 || *b.Override.Weight != 0 {
		t.Errorf("state after weight 0: %+v", b)
	}

	// Undone: the file rules again.
	ans = td.override(api.OverrideRequest{VIP: "web", Backend: "198.18.1.11", Disabled: flag(false)})
	if ans.Override != nil || ans.Note != "" {
		t.Errorf("enable: %+v", ans)
	}
	ans = td.override(api.OverrideRequest{VIP: "web", Backend: "198.18.1.12", ResetWeight: true})
	if ans.Override != nil {
		t.Errorf("reset: %+v", ans)
	}
	for i, addr := range []string{"198.18.1.11", "198.18.1.12"} {
		if b := td.backendState("web", addr); b.Override != nil || b.Forwarding != "up" || b.MaglevWeight != 1000 {
			t.Errorf("state after undoing: %+v", b)
		}
		if b := td.specBackend(0, i); b.State != dataplane.BackendUp || b.Weight != 1000 {
			t.Errorf("spec after undoing: %+v", b)
		}
	}
	td.d.mu.Lock()
	n := len(td.d.overrides)
	td.d.mu.Unlock()
	if n != 0 {
		t.Errorf("%d overrides left after undoing them", n)
	}

	// What needs no change says so; what makes no sense is refused.
	if ans := td.override(api.OverrideRequest{VIP: "web", Backend: "198.18.1.11", Disabled: flag(false)}); !strings.Contains(ans.Note, "not disabled") {
		t.Errorf("enable of an enabled backend: %+v", ans)
	}
	if ans := td.override(api.OverrideRequest{VIP: "web", Backend: "198.18.1.11", ResetWeight: true}); !strings.Contains(ans.Note, "no weight override") {
		t.Errorf("reset without an override: %+v", ans)
	}
	if _, err := td.d.SetOverride(api.OverrideRequest{VIP: "web", Backend: "198.18.1.11", Weight: weight(1001)}); !errors.Is(err, api.ErrInvalid) {
		t.Errorf("weight 1001: %v", err)
	}
	_, err := td.d.SetOverride(api.OverrideRequest{VIP: "web", Backend: "198.18.1.19", Weight: weight(2)})
	if !errors.Is(err, api.ErrNotFound) || !strings.Contains(err.Error(), "198.18.1.11:8080 or 198.18.1.12:8080") {
		t.Errorf("unknown backend: %v", err)
	}
}

// TestEnableFileDisabled: enable undoes vipd disable, not the file's
// state = "disabled", and says so.
func TestEnableFileDisabled(t *testing.T) {
	td := start(t, strings.Replace(testConfig, "port = 8080\n", "port = 8080\nstate = \"disabled\"\n", 1))
	_, err := td.d.SetOverride(api.OverrideRequest{VIP: "web", Backend: "198.18.1.11", Disabled: flag(false)})
	if !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "disabled by the file") {
		t.Errorf("enable of a backend the file disables: %v", err)
	}
	td.override(api.OverrideRequest{VIP: "web", Backend: "198.18.1.11", Disabled: flag(true)})
	ans := td.override(api.OverrideRequest{VIP: "web", Backend: "198.18.1.11", Disabled: flag(false)})
	if ans.Override != nil || !strings.Contains(ans.Note, "the file disables it too") {
		t.Errorf("enable of a backend disabled by both: %+v", ans)
	}
	if b := td.backendState("web", "198.18.1.11"); b.Forwarding != "down" {
		t.Errorf("the file's disabled backend forwards: %+v", b)
	}
}

// savedOverrides reads the overrides of a state file.
func savedOverrides(t *testing.T, path string) map[string]savedOverride {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := control.UnmarshalPrevious(b); err != nil {
		t.Fatalf("the state file is not one control reads: %v\n%s", err, b)
	}
	saved, err := unmarshalOverrides(b)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]savedOverride{}
	for _, s := range saved {
		m[s.VIP+" "+s.Backend.String()] = s
	}
	return m
}

// TestOverridesPersist: overrides and drains stay in force across reloads
// (a WARN when the file changes what they replace) and restarts (the
// state file); a backend the file removes loses its overrides, at WARN,
// on a reload or at start.
func TestOverridesPersist(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.json")
	cfg := strings.Replace(testConfig, "[dataplane]\n", fmt.Sprintf("[dataplane]\nstate_file = %q\n", state), 1)
	td := newTestDaemon(t, cfg, nil)
	lb := td.logTo()
	td.run()
	td.waitRunning()
	td.override(api.OverrideRequest{VIP: "web", Backend: "198.18.1.12", Weight: weight(5)})
	// The DSR backend keeps the client's port: named by its address, or
	// with the VIP's port.
	if ans := td.override(api.OverrideRequest{VIP: "198.18.0.101", Backend: "198.18.1.11:80", Disabled: flag(true)}); ans.VIP != "dsr" || ans.Backend != "198.18.1.11" {
		t.Errorf("answer %+v", ans)
	}
	if err := td.d.SetDrain("198.18.0.100:80", "198.18.1.11", true, ""); err != nil {
		t.Fatal(err)
	}
	saved := savedOverrides(t, state)
	if s := saved["198.18.0.100:80/tcp 198.18.1.12:8080"]; s.Weight == nil || *s.Weight != 5 || s.Disabled || s.Since.IsZero() {
		t.Errorf("saved weight override: %+v", s)
	}
	if s := saved["198.18.0.101:80/tcp 198.18.1.11:0"]; !s.Disabled || s.Weight != nil {
		t.Errorf("saved disable: %+v", s)
	}
	if s := saved["198.18.0.100:80/tcp 198.18.1.11:8080"]; !s.Drained {
		t.Errorf("saved drain: %+v", s)
	}

	// The file changes what the overrides replace: they stay, and the
	// log says so.
	changed := strings.Replace(cfg, "address = \"198.18.1.12\"\nport = 8080\n", "address = \"198.18.1.12\"\nport = 8080\nweight = 3\n", 1)
	changed = strings.Replace(changed, "address = \"198.18.1.11\"\nport = 8080\n", "address = \"198.18.1.11\"\nport = 8080\nstate = \"draining\"\n", 1)
	// The DSR backend is the file's last line.
	const dsrBackend = "address = \"198.18.1.11\"\n"
	if !strings.HasSuffix(changed, dsrBackend) || strings.Count(changed, "weight = 3") != 1 || strings.Count(changed, "draining") != 1 {
		t.Fatal("the test's edits do not apply")
	}
	changed += "weight = 7\n"
	td.rewrite(changed)
	if err := td.d.Reload(); err != nil {
		t.Fatal(err)
	}
	if l := lb.lines("level=WARN", "changes the weight of a backend with a run-time weight override", "backend=198.18.1.12:8080", "file_weight_was=1", "file_weight=3", "override_weight=5"); len(l) != 1 {
		t.Errorf("weight change WARN: %q\n%s", l, lb)
	}
	if l := lb.lines("level=WARN", "changes the state of a backend with a run-time override", "backend=198.18.1.11:8080", "file_state=draining", "override=drained"); len(l) != 1 {
		t.Errorf("state change WARN: %q\n%s", l, lb)
	}
	if l := lb.lines("level=WARN", "vip=dsr"); len(l) != 0 {
		t.Errorf("a WARN for a change the override does not replace (the weight of a disabled backend): %q", l)
	}
	if b := td.backendState("web", "198.18.1.12"); b.Weight != 3 || b.MaglevWeight != 5000 || *b.Override.Weight != 5 {
		t.Errorf("weight override after the reload: %+v", b)
	}

	// A restart restores them from the state file.
	td.stop()
	td2 := newTestDaemon(t, changed, nil)
	lb2 := td2.logTo()
	td2.run()
	td2.waitRunning()
	if b := td2.backendState("web", "198.18.1.12"); b.MaglevWeight != 5000 || b.Override == nil || *b.Override.Weight != 5 {
		t.Errorf("weight override after the restart: %+v", b)
	}
	if b := td2.backendState("dsr", "198.18.1.11"); b.Forwarding != "down" || b.Override == nil || !b.Override.Disabled {
		t.Errorf("disable after the restart: %+v", b)
	}
	if b := td2.backendState("web", "198.18.1.11"); !b.Drained {
		t.Errorf("drain after the restart: %+v", b)
	}
	if l := lb2.lines("level=WARN", "from the state file is in force"); len(l) != 3 {
		t.Errorf("restored overrides logged %d times, want 3:\n%s", len(l), lb2)
	}

	// A reload that removes an overridden backend drops its override.
	// (A VIP needs an active backend: .11 is active again in the file,
	// and still drained.)
	removed := strings.Replace(changed, "[[vip.backend]]\naddress = \"198.18.1.12\"\nport = 8080\nweight = 3\n", "", 1)
	removed = strings.Replace(removed, "state = \"draining\"\n", "", 1)
	td2.rewrite(removed)
	if err := td2.d.Reload(); err != nil {
		t.Fatal(err)
	}
	if l := lb2.lines("level=WARN", "no longer has a backend with a run-time override", "backend=198.18.1.12:8080", "override_weight=5"); len(l) != 1 {
		t.Errorf("removal WARN: %q\n%s", l, lb2)
	}
	if saved := savedOverrides(t, state); len(saved) != 2 || saved["198.18.0.100:80/tcp 198.18.1.12:8080"].Backend.IsValid() {
		t.Errorf("the state file after the removal: %+v", saved)
	}
	td2.d.mu.Lock()
	n := len(td2.d.overrides)
	td2.d.mu.Unlock()
	if n != 1 {
		t.Errorf("%d overrides after the removal, want 1 (the disable)", n)
	}

	// One removed while vipd was down is dropped at start.
	td2.stop()
	moved := strings.TrimSuffix(removed, dsrBackend+"weight = 7\n") + "address = \"198.18.1.19\"\n"
	td3 := newTestDaemon(t, moved, nil)
	lb3 := td3.logTo()
	td3.run()
	td3.waitRunning()
	if l := lb3.lines("level=WARN", "no longer has a backend with a run-time override from the state file", "backend=198.18.1.11:0"); len(l) != 1 {
		t.Errorf("drop at start: %q\n%s", l, lb3)
	}
	if saved := savedOverrides(t, state); len(saved) != 1 {
		t.Errorf("the state file after a drop at start: %+v", saved)
	}
}

// TestStateFileCompat: the overrides are one more key in the version 1
// state file, which a vipd without them reads as before; without
// overrides the file is what it was.
func TestStateFileCompat(t *testing.T) {
	b, err := control.NewPrevious().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := marshalOverrides(b, nil); err != nil || !bytes.Equal(got, b) {
		t.Errorf("no overrides: %s %v, want %s", got, err, b)
	}
	saved := []savedOverride{{VIP: "198.18.0.100:80/tcp", Backend: netip.MustParseAddrPort("198.18.1.11:8080"), Weight: weight(0), Drained: true}}
	with, err := marshalOverrides(b, saved)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := control.UnmarshalPrevious(with); err != nil {
		t.Errorf("a vipd without overrides cannot read the file: %v\n%s", err, with)
	}
	var f struct{ Version int }
	if json.Unmarshal(with, &f); f.Version != 1 {
		t.Errorf("version %d, want 1", f.Version)
	}
	got, err := unmarshalOverrides(with)
	if err != nil || len(got) != 1 || got[0].Backend != saved[0].Backend || got[0].Weight == nil || *got[0].Weight != 0 || !got[0].Drained {
		t.Errorf("read back %+v %v", got, err)
	}
	if got, err := unmarshalOverrides(b); err != nil || got != nil {
		t.Errorf("a file without overrides: %+v %v", got, err)
	}
}

// TestForgivingNames: drain and where take a VIP by address and a
// backend by address alone, and list the candidates when they cannot.
func TestForgivingNames(t *testing.T) {
	td := start(t, testConfig)
	if err := td.d.SetDrain("198.18.0.100", "198.18.1.11", true, ""); err != nil {
		t.Fatal(err)
	}
	if b := td.backendState("web", "198.18.1.11"); !b.Drained {
		t.Errorf("drain by addresses: %+v", b)
	}
	err := td.d.SetDrain("web", "198.18.1.13", true, "")
	if !errors.Is(err, api.ErrNotFound) || !strings.Contains(err.Error(), `VIP "web" has no backend "198.18.1.13"; did you mean 198.18.1.11:8080 or 198.18.1.12:8080?`) {
		t.Errorf("drain of an unknown backend: %v", err)
	}
	ans, err := td.d.Where("198.18.0.101", "198.18.0.1:1000", 0)
	if err != nil || ans.VIP != "dsr" || ans.Backend != "198.18.1.11" {
		t.Errorf("where by address: %+v %v", ans, err)
	}
	_, err = td.d.Where("198.18.0.102", "198.18.0.1:1000", 0)
	if !errors.Is(err, api.ErrNotFound) || !strings.Contains(err.Error(), "web (198.18.0.100:80/tcp) or dsr (198.18.0.101:80/tcp)") {
		t.Errorf("where of an unknown VIP: %v", err)
	}
}

// TestOverrideOverSocket: the whole way, as vipd weight takes it: the
// admin socket applies it and the state vipd status prints shows it; the
// TCP listener refuses it.
func TestOverrideOverSocket(t *testing.T) {
	td := start(t, testConfig)
	ctx := context.Background()
	ans, err := client.SetOverride(ctx, td.socket, api.OverrideRequest{VIP: "198.18.0.100:80", Backend: "198.18.1.11", Weight: weight(5)})
	if err != nil || ans.Backend != "198.18.1.11:8080" || ans.Override == nil {
		t.Fatalf("%+v %v", ans, err)
	}
	if _, err := client.SetOverride(ctx, td.socket, api.OverrideRequest{VIP: "web", Backend: "198.18.1.12", Disabled: flag(true)}); err != nil {
		t.Fatal(err)
	}
	_, err = client.SetOverride(ctx, td.socket, api.OverrideRequest{VIP: "web", Backend: "198.18.1.1", Disabled: flag(true)})
	if err == nil || !strings.Contains(err.Error(), "did you mean 198.18.1.11:8080 or 198.18.1.12:8080?") {
		t.Errorf("unknown backend over the socket: %v", err)
	}
	st, err := client.FetchSocketState(ctx, td.socket)
	if err != nil {
		t.Fatal(err)
	}
	// vipd status shows them as "up(weight 5*)" and "down(disabled*)"
	// (TestWriteStatusOverrides in cmd/vipd).
	b := st.VIPs[0].Backends
	if o := b[0].Override; o == nil || o.Weight == nil || *o.Weight != 5 || b[0].Forwarding != "up" {
		t.Errorf("the reweighted backend in the state: %+v", b[0])
	}
	if o := b[1].Override; o == nil || !o.Disabled || b[1].Forwarding != "down" {
		t.Errorf("the disabled backend in the state: %+v", b[1])
	}
	resp, err := http.Post("http://"+td.d.AdminAddr()+"/v1/override", "application/json",
		strings.NewReader(`{"vip":"web","backend":"198.18.1.11","reset_weight":true}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("the TCP listener answered %s, want 403", resp.Status)
	}
	if b := td.backendState("web", "198.18.1.11"); b.Override == nil {
		t.Errorf("the TCP listener undid the override")
	}
}

// TestReloadReleasesRemovedRefs: with overrides present, a reload that
// removes a backend releases its reference as control.Registry says — on
// hold from that reload, not given to a new backend within the hold,
// and reused by the next new backend once the hold has passed — rather
// than binding it again while it reconciles the overrides.
func TestReloadReleasesRemovedRefs(t *testing.T) {
	for _, tt := range []struct {
		name string
		set  func(td *testDaemon)
	}{
		{"weight override", func(td *testDaemon) {
			td.override(api.OverrideRequest{VIP: "web", Backend: "198.18.1.11", Weight: weight(5)})
		}},
		{"drain", func(td *testDaemon) {
			if err := td.d.SetDrain("198.18.0.100:80", "198.18.1.11", true, ""); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			td := newTestDaemon(t, testConfig, nil)
			clock := time.Unix(1e9, 0)
			var mu sync.Mutex
			now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
			advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
			td.d.reg.SetClock(now)
			td.run()
			td.waitRunning()
			tt.set(td)
			gone := td.specBackend(0, 1)
			if gone.Addr != netip.MustParseAddr("198.18.1.12") {
				t.Fatalf("backend 1 of web is %v", gone.Addr)
			}
			const b12 = "[[vip.backend]]\naddress = \"198.18.1.12\"\nport = 8080\n"
			with := func(addr string) string {
				return strings.Replace(testConfig, b12, "[[vip.backend]]\naddress = \""+addr+"\"\nport = 8080\n", 1)
			}
			if with("x") == testConfig {
				t.Fatal("the test's edit does not apply")
			}
			reload := func(src string) {
				t.Helper()
				td.rewrite(src)
				if err := td.d.Reload(); err != nil {
					t.Fatal(err)
				}
			}
			reload(strings.Replace(testConfig, b12, "", 1)) // .12 leaves
			hold := td.d.reg.Hold()
			advance(hold / 2)
			reload(with("198.18.1.13")) // within the hold: a new reference
			if b := td.specBackend(0, 1); b.Ref == gone.Ref {
				t.Fatalf("a new backend got the removed backend's reference %d within the hold", gone.Ref)
			}
			reload(strings.Replace(testConfig, b12, "", 1)) // .13 leaves
			// The hold runs from the reload that removed .12: once it has
			// passed, its reference, released first, goes to the next
			// new backend, under a new epoch.
			advance(hold/2 + time.Second)
			reload(with("198.18.1.14"))
			b := td.specBackend(0, 1)
			if b.Ref != gone.Ref || b.Epoch == gone.Epoch {
				t.Errorf("the next new backend after the hold got ref %d epoch %d; want the removed backend's ref %d under a new epoch (it had %d)",
					b.Ref, b.Epoch, gone.Ref, gone.Epoch)
			}
		})
	}
}
