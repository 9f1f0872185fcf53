package health

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vipd/vipd/control"
	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/health/tunprobe"
	"github.com/vipd/vipd/testing/testkit"
)

type reports struct {
	mu   sync.Mutex
	last map[uint32]control.Status
	n    map[uint32]int
	// ramped: a report since the last down one was up with a partial
	// ramp (slow start), seen here rather than by polling last, which a
	// stalled test could miss.
	ramped map[uint32]bool
}

func (r *reports) report(ref uint32, st control.Status, up, known bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last[ref] = st
	r.n[ref]++
	if r.ramped == nil {
		r.ramped = map[uint32]bool{}
	}
	switch {
	case st.Down:
		r.ramped[ref] = false
	case st.Ramp > 0:
		r.ramped[ref] = true
	}
}

func (r *reports) sawRamp(ref uint32) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ramped[ref]
}

func (r *reports) get(ref uint32) (control.Status, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last[ref], r.n[ref]
}

func fastCheck() config.HealthCheck {
	return config.HealthCheck{Type: config.CheckTCP, Interval: config.Duration(20 * time.Millisecond),
		Timeout: config.Duration(10 * time.Millisecond), Rise: 2, Fall: 2}
}

// TestManagerSetKeepsState: a Set with the same targets keeps the state, a
// removed target stops being probed.
func TestManagerSetKeepsState(t *testing.T) {
	var probes [3]atomic.Int64
	healthy := [3]atomic.Bool{}
	healthy[0].Store(true)
	probe := func(_ context.Context, tg *Target) Result {
		probes[tg.Ref].Add(1)
		if healthy[tg.Ref].Load() {
			return Result{OK: true}
		}
		return Result{}
	}
	r := &reports{last: map[uint32]control.Status{}, n: map[uint32]int{}}
	m := NewManager(slog.New(slog.NewTextHandler(io.Discard, nil)), probe, r.report)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	targets := []Target{{Ref: 0, Check: fastCheck()}, {Ref: 1, Check: fastCheck()}, {Ref: 2, Check: config.HealthCheck{Type: config.CheckNone}}}
	m.Set(targets)
	m.Start(ctx)
	testkit.Eventually(t, testkit.Patience, "backend 1 down", func() bool { st, _ := r.get(1); return st.Down })
	// A backend's first probe result is always reported.
	testkit.Eventually(t, testkit.Patience, "backend 0's first report", func() bool { _, n := r.get(0); return n > 0 })
	if st, n := r.get(0); st.Down {
		t.Errorf("backend 0: %+v after %d reports", st, n)
	}
	m.Set(targets) // unchanged: backend 1 stays down without a new report
	_, before := r.get(1)
	// A checker probes, reports, then waits for its next probe: a probe
	// that starts proves the round before it was reported. Of three probes
	// after Set, at most one belongs to a checker Set may have replaced
	// (caught between its timer and its cancellation), so at least two ran
	// in the checker Set left, and a restarted checker would have reported
	// its first result.
	p1 := probes[1].Load()
	testkit.Eventually(t, testkit.Patience, "three more probes of backend 1", func() bool { return probes[1].Load() >= p1+3 })
	if st, n := r.get(1); !st.Down || n != before {
		t.Errorf("re-Set reset backend 1: %+v, %d reports (was %d)", st, n, before)
	}
	healthy[1].Store(true)
	testkit.Eventually(t, testkit.Patience, "backend 1 back up", func() bool { st, _ := r.get(1); return !st.Down })
	m.mu.Lock()
	removed := m.running[1]
	m.mu.Unlock()
	m.Set(targets[:1])
	select {
	case <-removed.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the removed backend's checker did not stop")
	}
	// Its checker is gone; three probe rounds of backend 0 later, nothing
	// else has probed it (nor the type none backend).
	n, p0 := probes[1].Load(), probes[0].Load()
	testkit.Eventually(t, testkit.Patience, "three more probes of backend 0", func() bool { return probes[0].Load() >= p0+3 })
	if probes[1].Load() != n {
		t.Errorf("a removed backend is still probed")
	}
	if probes[2].Load() != 0 {
		t.Errorf("type none was probed")
	}
	m.Stop()
}

// TestProbes runs the real TCP and HTTP probes against local servers.
func TestProbes(t *testing.T) {
	var status atomic.Int32
	status.Store(200)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		if status.Load() == 503 {
			w.Header().Set("X-Drain", "1")
		}
		w.WriteHeader(int(status.Load()))
	}))
	defer srv.Close()
	ap := netip.MustParseAddrPort(srv.Listener.Addr().String())
	check := config.HealthCheck{Type: config.CheckHTTP, Path: "/healthz", Timeout: config.Duration(time.Second), DrainStatus: 503, DrainHeader: "X-Drain"}
	tg := &Target{Addr: ap, Check: check}
	for _, tc := range []struct {
		status    int32
		ok, drain bool
	}{{200, true, false}, {302, true, false}, {404, false, false}, {500, false, false}, {503, true, true}} {
		status.Store(tc.status)
		res := Probe(context.Background(), tg)
		if res.OK != tc.ok || res.Draining != tc.drain {
			t.Errorf("HTTP %d: %+v", tc.status, res)
		}
	}
	// 503 without the header is a failure.
	check.DrainHeader = "X-Other"
	if res := Probe(context.Background(), &Target{Addr: ap, Check: check}); res.OK {
		t.Errorf("503 without the drain header counted as healthy")
	}
	tcp := &Target{Addr: ap, Check: config.HealthCheck{Type: config.CheckTCP, Timeout: config.Duration(time.Second)}}
	if res := Probe(context.Background(), tcp); !res.OK {
		t.Errorf("TCP probe of a listening port: %v", res.Err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := netip.MustParseAddrPort(ln.Addr().String())
	ln.Close()
	tcp.Addr = closed
	if res := Probe(context.Background(), tcp); res.OK {
		t.Errorf("TCP probe of a closed port succeeded")
	}
}

// TestManagerRampEnds: the slow-start ramp always ends with a report of the
// full weight, also when a probe (not a ramp tick) is the first to notice
// the end — probes here are 5 ms apart, ramp ticks 10 ms.
func TestManagerRampEnds(t *testing.T) {
	for round := 0; round < 5; round++ {
		var up atomic.Bool
		probe := func(context.Context, *Target) Result { return Result{OK: up.Load()} }
		r := &reports{last: map[uint32]control.Status{}, n: map[uint32]int{}}
		m := NewManager(slog.New(slog.NewTextHandler(io.Discard, nil)), probe, r.report)
		check := fastCheck()
		check.Interval = config.Duration(5 * time.Millisecond)
		check.Timeout = config.Duration(5 * time.Millisecond)
		check.Rise, check.Fall = 1, 1
		check.SlowStart = config.Duration(100 * time.Millisecond)
		m.Set([]Target{{Ref: 7, Check: check}})
		ctx, cancel := context.WithCancel(context.Background())
		m.Start(ctx)
		testkit.Eventually(t, testkit.Patience, "down", func() bool { st, _ := r.get(7); return st.Down })
		up.Store(true)
		testkit.Eventually(t, testkit.Patience, "full weight reported", func() bool { st, _ := r.get(7); return !st.Down && st.Ramp == 0 })
		if !r.sawRamp(7) {
			t.Errorf("round %d: up at full weight without a slow-start ramp", round)
		}
		cancel()
		m.Stop()
	}
}

// TestManagerSetBeforeStart: a target removed before Start (a reload that
// lands before the checks start) is dropped without being launched, and
// only what remains is probed once started.
func TestManagerSetBeforeStart(t *testing.T) {
	var probes [2]atomic.Int64
	probe := func(_ context.Context, tg *Target) Result {
		probes[tg.Ref].Add(1)
		return Result{OK: true}
	}
	r := &reports{last: map[uint32]control.Status{}, n: map[uint32]int{}}
	m := NewManager(slog.New(slog.NewTextHandler(io.Discard, nil)), probe, r.report)
	m.Set([]Target{{Ref: 0, Check: fastCheck()}, {Ref: 1, Check: fastCheck()}})
	m.Set([]Target{{Ref: 1, Check: fastCheck()}}) // panicked on an unlaunched runner
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m.Start(ctx)
	defer m.Stop()
	testkit.Eventually(t, testkit.Patience, "backend 1 probed", func() bool { return probes[1].Load() >= 3 })
	if n := probes[0].Load(); n != 0 {
		t.Errorf("the removed backend was probed %d times", n)
	}
}

// fakeTunnel is a TunnelDialer that connects every tunnel probe to to
// (a local server standing in for the VIP behind the backend) and records
// what it was asked for.
type fakeTunnel struct {
	to    netip.AddrPort
	mu    sync.Mutex
	calls []string // "VIP via backend"
}

func (f *fakeTunnel) Dial(ctx context.Context, vip netip.AddrPort, path tunprobe.Path) (net.Conn, error) {
	f.mu.Lock()
	f.calls = append(f.calls, vip.String()+" via "+path.Backend.String())
	f.mu.Unlock()
	var d net.Dialer
	return d.DialContext(ctx, "tcp", f.to.String())
}

// TestTunnelProbes: a target with a tunnel is dialled through the
// TunnelDialer, to its VIP:port, for TCP and HTTP checks, and judged by
// what answers there; a target without one is dialled directly; a tunnel
// target without a TunnelDialer fails.
func TestTunnelProbes(t *testing.T) {
	var status atomic.Int32
	var host atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host.Store(r.Host)
		w.WriteHeader(int(status.Load()))
	}))
	defer srv.Close()
	local := netip.MustParseAddrPort(srv.Listener.Addr().String())
	vip := netip.MustParseAddrPort("198.18.0.101:80") // never dialled: the fake connects to local
	path := tunprobe.Path{Backend: netip.MustParseAddr("198.18.1.11"), Source: netip.MustParseAddr("198.18.1.1")}
	httpCheck := config.HealthCheck{Type: config.CheckHTTP, Path: "/", Timeout: config.Duration(time.Second)}
	tcpCheck := config.HealthCheck{Type: config.CheckTCP, Timeout: config.Duration(time.Second)}
	tests := []struct {
		name    string
		target  Target
		tunnel  bool // give NewProber a TunnelDialer
		status  int32
		ok      bool
		tunnels int // dials through the tunnel
	}{
		{"TCP through the tunnel", Target{Addr: vip, Check: tcpCheck, Tunnel: path}, true, 200, true, 1},
		{"HTTP 200 through the tunnel", Target{Addr: vip, Check: httpCheck, Tunnel: path}, true, 200, true, 1},
		{"HTTP 500 through the tunnel", Target{Addr: vip, Check: httpCheck, Tunnel: path}, true, 500, false, 1},
		{"direct HTTP is not tunnelled", Target{Addr: local, Check: httpCheck}, true, 200, true, 0},
		{"direct TCP is not tunnelled", Target{Addr: local, Check: tcpCheck}, true, 200, true, 0},
		{"tunnel target without a tunnel", Target{Addr: vip, Check: tcpCheck, Tunnel: path}, false, 200, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status.Store(tt.status)
			host.Store("")
			f := &fakeTunnel{to: local}
			probe := Probe
			if tt.tunnel {
				probe = NewProber(f)
			}
			res := probe(context.Background(), &tt.target)
			if res.OK != tt.ok {
				t.Errorf("result %+v, want ok=%v", res, tt.ok)
			}
			if len(f.calls) != tt.tunnels {
				t.Fatalf("tunnel dials %v, want %d", f.calls, tt.tunnels)
			}
			if tt.tunnels > 0 && f.calls[0] != "198.18.0.101:80 via 198.18.1.11" {
				t.Errorf("dialled %q", f.calls[0])
			}
			if tt.tunnels > 0 && tt.target.Check.Type == config.CheckHTTP && host.Load() != "198.18.0.101:80" {
				t.Errorf("HTTP Host %q, want the VIP's", host.Load())
			}
			if !tt.tunnel && !errors.Is(res.Err, ErrNoTunnel) {
				t.Errorf("error %v, want ErrNoTunnel", res.Err)
			}
		})
	}
}

// TestManagerSetCarriesVerdict: a Set that changes a backend's check
// settings (here its timeout) replaces the checker, and the new one takes
// over the verdict: a dead backend is not reported up by the first failed
// probe of a fresh checker (fall = 3 would have let it through), and a
// backend whose slow start is over does not ramp again.
func TestManagerSetCarriesVerdict(t *testing.T) {
	var probes [2]atomic.Int64
	probe := func(_ context.Context, tg *Target) Result {
		probes[tg.Ref].Add(1)
		return Result{OK: tg.Ref == 1} // backend 0 is dead, backend 1 healthy
	}
	r := &reports{last: map[uint32]control.Status{}, n: map[uint32]int{}}
	var watch, deadUp atomic.Bool // after the second Set: backend 0 reported up
	report := func(ref uint32, st control.Status, up, known bool) {
		if watch.Load() && ref == 0 && !st.Down {
			deadUp.Store(true)
		}
		r.report(ref, st, up, known)
	}
	m := NewManager(slog.New(slog.NewTextHandler(io.Discard, nil)), probe, report)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	check := fastCheck()
	check.Fall, check.SlowStart = 3, config.Duration(100*time.Millisecond)
	m.Start(ctx)
	m.Set([]Target{{Ref: 0, Check: check}, {Ref: 1, Check: check}}) // both added: 1 ramps up
	testkit.Eventually(t, testkit.Patience, "backend 0 down", func() bool { st, _ := r.get(0); return st.Down })
	testkit.Eventually(t, testkit.Patience, "backend 1 ramped", func() bool { return r.sawRamp(1) })
	testkit.Eventually(t, testkit.Patience, "backend 1 at full weight", func() bool { st, _ := r.get(1); return !st.Down && st.Ramp == 0 })
	// Every report of backend 1 before the full weight's is in once two
	// more of its probes have started (its checker reports, on a ramp
	// tick or after a probe, before it probes again).
	p1 := probes[1].Load()
	testkit.Eventually(t, testkit.Patience, "two more probes of backend 1", func() bool { return probes[1].Load() >= p1+2 })
	r.mu.Lock()
	r.ramped[1] = false
	r.mu.Unlock()

	changed := check
	changed.Timeout = config.Duration(15 * time.Millisecond)
	watch.Store(true)
	m.Set([]Target{{Ref: 0, Check: changed}, {Ref: 1, Check: changed}})
	p0 := probes[0].Load()
	testkit.Eventually(t, testkit.Patience, "three probes of the new checkers", func() bool { return probes[0].Load() >= p0+3 })
	if st, n := r.get(0); !st.Down || deadUp.Load() {
		t.Errorf("dead backend 0 reported up after its check changed (now %+v, %d reports)", st, n)
	}
	if r.sawRamp(1) {
		t.Errorf("backend 1 ramped again after its check changed")
	}
	if st, _ := r.get(1); st.Down || st.Ramp != 0 {
		t.Errorf("backend 1 after its check changed: %+v", st)
	}
	m.Stop()
}
