package health

import (
	"context"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vipd/vipd/control"
	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/testing/testkit"
)

func loadCheck() config.HealthCheck {
	return config.HealthCheck{Type: config.CheckHTTP, Path: "/", Interval: config.Duration(20 * time.Millisecond),
		Timeout: config.Duration(15 * time.Millisecond), Rise: 1, Fall: 3,
		LoadReport: true, LoadHeader: "X-Load", LoadHalfLife: config.Duration(2 * time.Second),
		ErrorPenalty: 1, MinWeightPercent: 10}
}

// feed observes n results from gen, one every 2 s, and returns the
// fraction in effect after each.
func feed(l *loadState, start time.Time, n int, gen func(i int) Result) []float64 {
	var out []float64
	for i := 0; i < n; i++ {
		l.observe(gen(i), start.Add(time.Duration(i+1)*2*time.Second))
		out = append(out, l.applied)
	}
	return out
}

func TestLoadStateUtilization(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newLoadState(loadCheck(), now)
	got := feed(l, now, 20, func(int) Result { return Result{OK: true, Load: 0.75, HasLoad: true} })
	if f := got[0]; f != 0.25 {
		t.Errorf("the first report stands alone: fraction %v, want 0.25", f)
	}
	// Back to idle: the weight returns, smoothed, to the whole.
	now = now.Add(40 * time.Second)
	got = feed(l, now, 20, func(int) Result { return Result{OK: true, Load: 0, HasLoad: true} })
	if got[0] >= 0.7 {
		t.Errorf("one idle report a half-life after the last busy one should halve the load, not undo it: %v", got[0])
	}
	if f := got[len(got)-1]; f != 1 {
		t.Errorf("after 20 half-lives idle: fraction %v, want 1", f)
	}
	// Every applied change moved by 10% or more (or reached 1).
	prev := 0.25
	for _, f := range got {
		if f != prev && f != 1 && math.Abs(f-prev) < minMove*prev {
			t.Errorf("applied a move from %v to %v", prev, f)
		}
		prev = f
	}
}

// TestLoadStateErrors: a backend failing every other check (never three
// in a row: its checker keeps it up) loses about half its weight.
func TestLoadStateErrors(t *testing.T) {
	now := time.Unix(1000, 0)
	hc := loadCheck()
	hc.LoadHalfLife = config.Duration(10 * time.Second) // five checks
	l := newLoadState(hc, now)
	c := NewChecker(hc, false, now)
	var f float64
	for i := 0; i < 30; i++ {
		r := Result{OK: i%2 == 0}
		at := now.Add(time.Duration(i+1) * 2 * time.Second)
		c.Observe(r, at)
		l.observe(r, at)
		f = l.applied
	}
	if !c.Up() {
		t.Fatal("the checker took it down")
	}
	if f < 0.35 || f > 0.65 {
		t.Errorf("fraction %v for an error rate of 1/2, want about 0.5", f)
	}
	// The floor holds whatever the errors.
	for i := 0; i < 30; i++ {
		l.observe(Result{}, now.Add(time.Duration(100+i)*time.Second))
	}
	if l.applied != 0.1 {
		t.Errorf("every check failing: fraction %v, want the floor 0.1", l.applied)
	}
}

// TestLoadStateSmallMovesIgnored: reports wobbling by a few percent never
// change the weight in effect.
func TestLoadStateSmallMovesIgnored(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newLoadState(loadCheck(), now)
	changes := 0
	for i := 0; i < 50; i++ {
		u := 0.50 + 0.04*float64(i%2)
		if l.observe(Result{OK: true, Load: u, HasLoad: true}, now.Add(time.Duration(i+1)*2*time.Second)) {
			changes++
		}
	}
	if changes != 1 {
		t.Errorf("%d changes applied, want 1 (the first report)", changes)
	}
}

func TestReadLoad(t *testing.T) {
	for _, tc := range []struct {
		v       string
		u       float64
		ok, bad bool
	}{
		{"", 0, false, false}, {"0.3", 0.3, true, false}, {" 1 ", 1, true, false}, {"0", 0, true, false},
		{"1.5", 0, false, true}, {"-0.1", 0, false, true}, {"NaN", 0, false, true}, {"busy", 0, false, true},
	} {
		h := http.Header{}
		if tc.v != "" {
			h.Set("X-Load", tc.v)
		}
		u, ok, bad := readLoad(h, "X-Load")
		if u != tc.u || ok != tc.ok || (bad != "") != tc.bad {
			t.Errorf("%q: %v %v %q", tc.v, u, ok, bad)
		}
	}
}

// TestManagerLoadReport: an HTTP check reads the header; the weight
// follows it; malformed reports are counted and logged once a minute.
func TestManagerLoadReport(t *testing.T) {
	var load atomic.Value
	load.Store("0.8")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Load", load.Load().(string))
	}))
	defer srv.Close()
	ap := netip.MustParseAddrPort(strings.TrimPrefix(srv.URL, "http://"))
	logs := &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	r := &reports{last: map[uint32]control.Status{}, n: map[uint32]int{}}
	m := NewManager(log, nil, r.report)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m.Start(ctx)
	hc := loadCheck()
	hc.LoadHalfLife = config.Duration(20 * time.Millisecond)
	m.Set([]Target{{Ref: 1, VIP: "v", Label: "b", Addr: ap, Check: hc}})
	defer m.Stop()
	testkit.Eventually(t, testkit.Patience, "the weight to follow the report", func() bool {
		st, _ := r.get(1)
		return st.Scale > 0.15 && st.Scale < 0.25
	})

	load.Store("lots")
	testkit.Eventually(t, testkit.Patience, "malformed reports counted", func() bool { return m.LoadReportsMalformed()[1] >= 5 })
	if n := strings.Count(logs.String(), "load report malformed"); n != 1 {
		t.Errorf("%d malformed-report log lines, want 1", n)
	}
	load.Store("0")
	testkit.Eventually(t, testkit.Patience, "the whole weight back", func() bool {
		st, _ := r.get(1)
		return st.Scale == 0 && st.Fraction() == 0
	})

	if !strings.Contains(logs.String(), "backend effective weight changed") {
		t.Error("no weight change logged")
	}
}

// lockedBuffer is a log for a logger on other goroutines.
type lockedBuffer = testkit.Buffer
