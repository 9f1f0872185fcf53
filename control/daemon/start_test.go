package daemon

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/testing/testkit"
)

// raceDaemon is a daemon with health checks (every 20 ms) that a test
// starts itself, after arranging a reload at some moment of the start.
type raceDaemon struct {
	*testDaemon
	fp *fakeProbes
	// waiting is closed when a reload waits for the start to finish;
	// reloaded receives what the test's background reload returned.
	waiting  chan struct{}
	reloaded chan error
}

// reloadedConfig is healthConfig with backend 198.18.1.12 replaced by
// 198.18.1.13: a reload of it adds one backend and removes one.
var reloadedConfig = strings.Replace(healthConfig, "198.18.1.12", "198.18.1.13", 1)

func newRaceDaemon(t *testing.T) *raceDaemon {
	t.Helper()
	fp := newFakeProbes()
	rd := &raceDaemon{
		testDaemon: newTestDaemon(t, strings.NewReplacer("SLOW", "0s", "ALLDOWN", "drop").Replace(healthConfig), fp.probe),
		fp:         fp, waiting: make(chan struct{}), reloaded: make(chan error, 1),
	}
	rd.d.testHookReloadWaits = func() { close(rd.waiting) }
	return rd
}

// reloadWaiting writes the reloaded configuration, starts a reload in the
// background and returns once that reload waits for the start to finish.
// The platform's first host wait then lasts until the reload is done, so
// that it is applied before the checks start, every time.
func (rd *raceDaemon) reloadWaiting() {
	rd.rewrite(strings.NewReplacer("SLOW", "0s", "ALLDOWN", "drop").Replace(reloadedConfig))
	done := make(chan struct{})
	rd.plat.onRun = func() { <-done }
	go func() {
		defer close(done)
		rd.reloaded <- rd.d.Reload()
	}()
	select {
	case <-rd.waiting:
	case err := <-rd.reloaded:
		rd.t.Errorf("the reload returned (%v) instead of waiting for the start", err)
		rd.reloaded <- err
	case <-time.After(30 * time.Second):
		rd.t.Fatal("the reload did not wait for the start")
	}
}

// reloadNow writes the reloaded configuration and reloads it.
func (rd *raceDaemon) reloadNow() {
	rd.rewrite(strings.NewReplacer("SLOW", "0s", "ALLDOWN", "drop").Replace(reloadedConfig))
	rd.reloaded <- rd.d.Reload()
}

// TestReloadRacesStart lands a reload at each moment of the start where
// one used to be lost or half applied (backends added by a reload before
// the checks started were never probed, got traffic and showed
// "unknown"). Whenever it lands, the reload must be applied whole:
// the added backend probed and up, the removed one neither probed nor
// shown nor steered to, the reload counted once.
func TestReloadRacesStart(t *testing.T) {
	tests := []struct {
		name string
		// arrange sets up the reload and starts the daemon.
		arrange func(rd *raceDaemon)
		// early: the reload lands before the checks start, so the
		// removed backend must never be probed at all.
		early bool
	}{
		{"before Run", func(rd *raceDaemon) {
			rd.reloadWaiting()
			rd.run()
		}, true},
		{"while the dataplane opens", func(rd *raceDaemon) {
			rd.plat.onOpen = rd.reloadWaiting
			rd.run()
		}, true},
		{"while the first snapshot is published", func(rd *raceDaemon) {
			rd.plat.onApply = func(n int) {
				if n == 1 {
					rd.reloadWaiting()
				}
			}
			rd.run()
		}, true},
		{"while the workers wait for the host", func(rd *raceDaemon) {
			rd.plat.onRun = rd.reloadNow
			rd.run()
		}, true},
		{"after the workers run", func(rd *raceDaemon) {
			rd.run()
			rd.waitRunning()
			rd.reloadNow()
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rd := newRaceDaemon(t)
			tt.arrange(rd)
			select {
			case err := <-rd.reloaded:
				if err != nil {
					t.Fatalf("reload: %v", err)
				}
			case err := <-rd.done:
				t.Fatalf("daemon exited: %v", err)
			case <-time.After(30 * time.Second):
				t.Fatal("the reload did not finish")
			}
			rd.waitRunning()
			rd.checkReloaded(tt.early)
		})
	}
}

// checkReloaded checks that the daemon runs on reloadedConfig, wholly.
func (rd *raceDaemon) checkReloaded(early bool) {
	t := rd.t
	t.Helper()
	want := []string{"198.18.1.11", "198.18.1.13"}
	testkit.Eventually(t, testkit.Patience, "the reloaded backends up", func() bool {
		st, err := rd.d.State(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, b := range st.VIPs[0].Backends {
			if b.Health != "up" || b.Forwarding != "up" {
				return false
			}
			got = append(got, b.Address)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("backends %v, want %v", got, want)
		}
		return true
	})

	probed := rd.fp.takeProbed()
	if early && probed[netip.MustParseAddr("198.18.1.12")] > 0 {
		t.Errorf("the removed backend was probed %d times", probed[netip.MustParseAddr("198.18.1.12")])
	}
	// Some more rounds of checks: the new set only.
	testkit.Eventually(t, testkit.Patience, "more probes", func() bool {
		rd.fp.mu.Lock()
		defer rd.fp.mu.Unlock()
		p := rd.fp.probed
		return p[netip.MustParseAddr("198.18.1.13")] >= 3 && p[netip.MustParseAddr("198.18.1.11")] >= 3
	})

	if n := rd.fp.takeProbed()[netip.MustParseAddr("198.18.1.12")]; n > 0 {
		t.Errorf("the removed backend is still probed (%d times)", n)
	}
	hops := rd.plat.lastSteering().NextHops
	if !slices.Contains(hops, netip.MustParseAddr("198.18.1.13")) || slices.Contains(hops, netip.MustParseAddr("198.18.1.12")) {
		t.Errorf("next hops %v after the reload", hops)
	}
	if r := rd.d.Metrics().Reloads; r["ok"] != 1 || r["error"] != 0 {
		t.Errorf("reload counters %v, want one ok", r)
	}
}

// TestReloadWhenNotRunning: a reload waiting for a start that fails, and
// one after the daemon stopped, return ErrNotRunning instead of hanging.
func TestReloadWhenNotRunning(t *testing.T) {
	rd := newRaceDaemon(t)
	rd.plat.openErr = errors.New("no such device")
	rd.reloadWaiting()
	rd.run()
	if err := <-rd.done; err == nil || !strings.Contains(err.Error(), "no such device") {
		t.Errorf("Run: %v", err)
	}
	rd.cancel = nil // Run returned already
	select {
	case err := <-rd.reloaded:
		if !errors.Is(err, ErrNotRunning) {
			t.Errorf("reload waiting for a failed start: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the reload still waits for a start that failed")
	}
	if !rd.plat.closed {
		t.Errorf("platform not closed after a failed start")
	}

	td := start(t, testConfig)
	if err := td.stop(); err != nil {
		t.Fatal(err)
	}
	if err := td.d.Reload(); !errors.Is(err, ErrNotRunning) {
		t.Errorf("reload after stop: %v", err)
	}
	if err := td.d.SetDrain("web", "198.18.1.11:8080", true, ""); !errors.Is(err, ErrNotRunning) {
		t.Errorf("drain after stop: %v", err)
	}
}
