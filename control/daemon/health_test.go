package daemon

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vipd/vipd/health"
	"github.com/vipd/vipd/testing/testkit"
)

// fakeProbes answers health probes from a table the test edits, and
// counts the probes per address.
type fakeProbes struct {
	mu     sync.Mutex
	res    map[netip.Addr]health.Result
	probed map[netip.Addr]int
}

func newFakeProbes() *fakeProbes {
	return &fakeProbes{res: map[netip.Addr]health.Result{}, probed: map[netip.Addr]int{}}
}

// takeProbed returns the probe counts since the last call and resets them.
func (f *fakeProbes) takeProbed() map[netip.Addr]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.probed
	f.probed = map[netip.Addr]int{}
	return p
}

func (f *fakeProbes) set(a string, r health.Result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.res[netip.MustParseAddr(a)] = r
}

func (f *fakeProbes) probe(_ context.Context, t *health.Target) health.Result {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.probed[t.Addr.Addr()]++
	if r, ok := f.res[t.Addr.Addr()]; ok {
		return r
	}
	return health.Result{OK: true}
}

func startHealth(t *testing.T, slow, allDown string) (*testDaemon, *fakeProbes) {
	t.Helper()
	fp := newFakeProbes()
	td := newTestDaemon(t, strings.NewReplacer("SLOW", slow, "ALLDOWN", allDown).Replace(healthConfig), fp.probe)
	td.run()
	td.waitRunning()
	return td, fp
}

func (td *testDaemon) backend(i int) map[string]string {
	st, err := td.d.State(context.Background())
	if err != nil {
		td.t.Fatal(err)
	}
	b := st.VIPs[0].Backends[i]
	return map[string]string{"health": b.Health, "forwarding": b.Forwarding}
}

func TestHealthDownAndUp(t *testing.T) {
	td, fp := startHealth(t, "0s", "drop")
	testkit.Eventually(t, testkit.Patience, "checks known", func() bool { return td.backend(0)["health"] == "up" && td.backend(1)["health"] == "up" })
	fp.set("198.18.1.11", health.Result{})
	testkit.Eventually(t, testkit.Patience, "backend 1 down", func() bool { return td.backend(0)["forwarding"] == "down" })
	for p := uint16(100); p < 150; p++ {
		if got := td.send(syn(t, "198.18.0.100", p, "S")); got != netip.MustParseAddr("198.18.1.12") {
			t.Fatalf("new flow %d went to %v while .11 is down", p, got)
		}
	}
	fp.set("198.18.1.11", health.Result{OK: true})
	testkit.Eventually(t, testkit.Patience, "backend 1 back", func() bool { return td.backend(0)["forwarding"] == "up" })
}

func TestHealthAllDown(t *testing.T) {
	for _, mode := range []string{"drop", "ignore_health"} {
		t.Run(mode, func(t *testing.T) {
			td, fp := startHealth(t, "0s", mode)
			testkit.Eventually(t, testkit.Patience, "checks known", func() bool { return td.backend(1)["health"] == "up" })
			fp.set("198.18.1.11", health.Result{})
			fp.set("198.18.1.12", health.Result{})
			testkit.Eventually(t, testkit.Patience, "all down", func() bool { return td.backend(0)["health"] == "down" && td.backend(1)["health"] == "down" })
			q := td.plat.queues[0]
			q.Inject(syn(t, "198.18.0.100", 999, "S"), 0)
			// A forwarded frame comes within milliseconds; 30 s lets a
			// loaded machine under -race deliver it. A dropped one is
			// waited for 300 ms: waiting less can only hide a forwarded
			// frame.
			wait := 30 * time.Second
			if mode == "drop" {
				wait = 300 * time.Millisecond
			}
			select {
			case <-q.Output():
				if mode == "drop" {
					t.Errorf("forwarded a new flow while every backend is down")
				}
			case <-time.After(wait):
				if mode == "ignore_health" {
					t.Errorf("ignore_health dropped the flow")
				}
			}
			if n := td.d.Metrics().AllDown["web"]; n != 1 {
				t.Errorf("all-down events %d", n)
			}
		})
	}
}

func TestHealthDrainAndSlowStart(t *testing.T) {
	// A slow start of 6 s: the first sample must come before 70% of it
	// has passed, which a busy machine can delay by a second or more.
	td, fp := startHealth(t, "6s", "drop")
	testkit.Eventually(t, testkit.Patience, "checks known", func() bool { return td.backend(1)["health"] == "up" })
	fp.set("198.18.1.12", health.Result{OK: true, Draining: true})
	testkit.Eventually(t, testkit.Patience, "drain", func() bool { return td.backend(1)["forwarding"] == "draining" })
	fp.set("198.18.1.12", health.Result{OK: true})
	testkit.Eventually(t, testkit.Patience, "undrain", func() bool { return td.backend(1)["forwarding"] == "up" })

	// Down then up: the weight ramps over slow_start. The test samples
	// the ramp through /v1/state, as often as a loaded machine allows: it
	// needs a partial weight, a monotonic climb and the end at full weight.
	fp.set("198.18.1.11", health.Result{})
	testkit.Eventually(t, testkit.Patience, "down", func() bool { return td.backend(0)["forwarding"] == "down" })
	fp.set("198.18.1.11", health.Result{OK: true})
	var ramps []float64
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := td.d.State(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		b := st.VIPs[0].Backends[0]
		if b.Forwarding == "up" && (len(ramps) == 0 || ramps[len(ramps)-1] != b.SlowStart) {
			ramps = append(ramps, b.SlowStart)
		}
		if b.SlowStart == 1 && len(ramps) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slow start did not finish: %v", ramps)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i := 1; i < len(ramps); i++ {
		if ramps[i] < ramps[i-1] {
			t.Errorf("slow start went backwards: %v", ramps)
		}
	}
	if ramps[0] >= 0.7 {
		t.Errorf("slow start began at %v, want a small share: %v", ramps[0], ramps)
	}
}

// reloadDeadBackend starts a daemon on healthConfig whose backend .11
// fails its checks, waits until it is down, and reloads the same
// configuration with old replaced by new.
func reloadDeadBackend(t *testing.T, old, new string) (*testDaemon, *fakeProbes) {
	t.Helper()
	td, fp := startHealth(t, "0s", "drop")
	fp.set("198.18.1.11", health.Result{})
	testkit.Eventually(t, testkit.Patience, ".11 down", func() bool { return td.backend(0)["forwarding"] == "down" })
	cfg := strings.NewReplacer("SLOW", "0s", "ALLDOWN", "drop").Replace(healthConfig)
	td.rewrite(strings.Replace(cfg, old, new, 1))
	if err := td.d.Reload(); err != nil {
		t.Fatal(err)
	}
	return td, fp
}

// TestHealthCheckTurnedOff: a backend that was down when a reload turns
// its VIP's check off (type = "none") is in service again at once; its
// last status went with the check, and no report was left to publish
// that.
func TestHealthCheckTurnedOff(t *testing.T) {
	td, _ := reloadDeadBackend(t, `type = "http"`, `type = "none"`)
	testkit.Eventually(t, testkit.Patience, ".11 back in service without a check", func() bool { return td.backend(0)["forwarding"] == "up" })
}

// TestHealthReloadKeepsVerdict: a reload that changes only a VIP's check
// settings (its timeout) leaves a dead backend down; a fresh checker
// would have started it up and kept it there for fall - 1 probes.
func TestHealthReloadKeepsVerdict(t *testing.T) {
	td, fp := reloadDeadBackend(t, `timeout = "10ms"`, `timeout = "15ms"`)
	// Watched for as long as fall + 1 probes of it take after the reload
	// (a fresh checker's window), however slowly a busy machine runs them.
	dead := netip.MustParseAddr("198.18.1.11")
	fp.takeProbed()
	deadline := time.Now().Add(30 * time.Second)
	for probes := 0; ; probes += fp.takeProbed()[dead] {
		if b := td.backend(0); b["forwarding"] != "down" {
			t.Fatalf("the dead backend after a reload that changed its check's timeout: %v", b)
		}
		if probes >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d probes of the dead backend in 30 s after the reload", probes)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
