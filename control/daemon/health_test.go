package daemon

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/health"
	"github.com/vipd/vipd/testing/testkit"
)

// fakeProbes answers health probes from a table the test edits, and
// counts the probes per address.
type fakeProbes struct {
	mu     sync.Mutex
	res    map[netip.Addr]health.Result
	probed map[netip.Addr]int
	held   map[netip.Addr]chan struct{} // probes wait for it to close
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

// hold makes the probes of a wait until release(a) (which t.Cleanup also
// does): no check of a ends meanwhile. Call it after the daemon is made,
// so that the release comes before the daemon's stop.
func (f *fakeProbes) hold(t *testing.T, a string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held == nil {
		f.held = map[netip.Addr]chan struct{}{}
	}
	f.held[netip.MustParseAddr(a)] = make(chan struct{})
	t.Cleanup(func() { f.release(a) })
}

// release lets the probes of a held by hold go on.
func (f *fakeProbes) release(a string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ch, ok := f.held[netip.MustParseAddr(a)]; ok {
		close(ch)
		delete(f.held, netip.MustParseAddr(a))
	}
}

func (f *fakeProbes) probe(_ context.Context, t *health.Target) health.Result {
	f.mu.Lock()
	ch := f.held[t.Addr.Addr()]
	f.mu.Unlock()
	if ch != nil {
		<-ch
	}
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

// TestNoFlowBeforeVerdict: with init_state "down" (the default) the
// workers do not start before the first round of checks is over (or its
// time is up), a backend takes no new flow before its first check ends,
// at start and when a reload adds it; with "up" it takes flows at once.
func TestNoFlowBeforeVerdict(t *testing.T) {
	for _, init := range []string{"down", "up"} {
		t.Run(init, func(t *testing.T) {
			fp := newFakeProbes()
			cfg := strings.NewReplacer("SLOW", "0s", `on_all_down = "ALLDOWN"`, "on_all_down = \"drop\"\ninit_state = \""+init+"\"").Replace(healthConfig)
			td := newTestDaemon(t, cfg, fp.probe)
			const limit = 2 * time.Second
			td.d.firstRoundMax = limit
			// Held after the daemon is made: the hold's cleanup (a
			// release) runs before the daemon's (a stop, which waits
			// for the probes).
			fp.hold(t, "198.18.1.11")
			td.run()
			testkit.Eventually(t, testkit.Patience, "the checks to start", td.d.checksStarted)
			started := time.Now()
			if init == "down" {
				// Within the round's time, with .11 unchecked: not done,
				// not ready, no worker running.
				done, ready := td.d.FirstRoundDone(), td.d.Ready()
				running := false
				select {
				case <-td.d.Running():
					running = true
				default:
				}
				if time.Since(started) < limit*3/4 && (done || ready == nil || running) {
					t.Errorf("before .11's first verdict: round done %v, ready %v, workers running %v", done, ready, running)
				}
			}
			// After the round's time .11 has no verdict still: the
			// workers run, and it takes no new flow (init "down").
			td.waitRunning()
			testkit.Eventually(t, testkit.Patience, ".12's first verdict", func() bool { return td.backend(1)["health"] == "up" })
			reached := func(port uint16, addr string) int {
				n := 0
				for p := port; p < port+60; p++ {
					if td.send(syn(t, "198.18.0.100", p, "S")) == netip.MustParseAddr(addr) {
						n++
					}
				}
				return n
			}
			b := td.backendState("web", "198.18.1.11")
			if init == "up" {
				if n := reached(100, "198.18.1.11"); n == 0 || b.AwaitingCheck || b.Forwarding != "up" {
					t.Errorf("init_state up: %d of 60 new flows reached .11 before its check (%+v)", n, b)
				}
				return
			}
			if !b.AwaitingCheck || b.Forwarding != "draining" || b.Health != "unknown" {
				t.Errorf(".11 before its first check: %+v", b)
			}
			if n := reached(100, "198.18.1.11"); n != 0 {
				t.Errorf("%d of 60 new flows reached .11 before its first check", n)
			}
			fp.release("198.18.1.11")
			testkit.Eventually(t, testkit.Patience, ".11's first verdict", func() bool { return td.backend(0)["forwarding"] == "up" })
			if n := reached(200, "198.18.1.11"); n == 0 {
				t.Error("no new flow reached .11 after its first verdict")
			}
			// A backend a reload adds waits for its first check too,
			// and the box stays ready.
			fp.hold(t, "198.18.1.13")
			td.rewrite(cfg + "[[vip.backend]]\naddress = \"198.18.1.13\"\nport = 8080\n")
			if err := td.d.Reload(); err != nil {
				t.Fatal(err)
			}
			if b := td.backendState("web", "198.18.1.13"); !b.AwaitingCheck || b.Forwarding != "draining" {
				t.Errorf(".13, added by a reload: %+v", b)
			}
			if err := td.d.Ready(); err != nil {
				t.Errorf("a backend added by a reload made the box unready: %v", err)
			}
			if n := reached(300, "198.18.1.13"); n != 0 {
				t.Errorf("%d of 60 new flows reached .13 before its first check", n)
			}
			fp.release("198.18.1.13")
			testkit.Eventually(t, testkit.Patience, ".13's first verdict", func() bool { return td.backendState("web", "198.18.1.13").Forwarding == "up" })
		})
	}
}

// TestFirstRoundLimit: the default limit of the first round is the
// slowest check's interval plus timeout plus 5 s.
func TestFirstRoundLimit(t *testing.T) {
	cfg, _, err := config.Parse("health.toml", []byte(strings.NewReplacer("SLOW", "0s", "ALLDOWN", "drop", "@SOCKET@", "/nonexistent/admin.sock").Replace(healthConfig)))
	if err != nil {
		t.Fatal(err)
	}
	if got := firstRoundLimit(cfg); got != 5*time.Second+30*time.Millisecond {
		t.Errorf("limit %v, want interval + timeout + 5 s", got)
	}
}

// checksStarted reports whether the health checks have started.
func (d *Daemon) checksStarted() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.checking
}
