package health

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vipd/vipd/control"
	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/testing/testkit"
)

// TestRecordsWhyDown: the record of a failing backend carries the check's
// error as an operator reads it, when it went down, the check's latency
// and the totals; the change to down is logged at WARN with the error.
func TestRecordsWhyDown(t *testing.T) {
	var healthy atomic.Bool
	healthy.Store(true)
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	probe := func(context.Context, *Target) Result {
		time.Sleep(2 * time.Millisecond)
		if healthy.Load() {
			return Result{OK: true}
		}
		return Result{Err: refused}
	}
	var logs lockedBuffer
	r := &reports{last: map[uint32]control.Status{}, n: map[uint32]int{}}
	m := NewManager(slog.New(slog.NewTextHandler(&logs, nil)), probe, r.report)
	m.Set([]Target{{Ref: 1, VIP: "web", Label: "198.18.1.11:80", Check: fastCheck()}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m.Start(ctx)
	defer m.Stop()
	testkit.Eventually(t, 5*time.Second, "3 good checks", func() bool { return m.Records()[1].OK >= 3 })
	before := time.Now()
	healthy.Store(false)
	testkit.Eventually(t, 5*time.Second, "the backend down", func() bool {
		st, _ := r.get(1)
		return st.Down
	})
	rec := m.Records()[1]
	if rec.LastError != "connect: connection refused" {
		t.Errorf("LastError = %q", rec.LastError)
	}
	if rec.Since.Before(before) {
		t.Errorf("Since = %v, before the backend failed (%v)", rec.Since, before)
	}
	if rec.LastCheck < 2*time.Millisecond || rec.LastCheck > time.Second {
		t.Errorf("LastCheck = %v, want the probe's ~2ms", rec.LastCheck)
	}
	if rec.Fail < 2 || rec.OK < 3 {
		t.Errorf("OK %d, Fail %d", rec.OK, rec.Fail)
	}
	var n uint64
	for _, b := range rec.Buckets {
		n += b
	}
	if n != rec.OK+rec.Fail {
		t.Errorf("histogram holds %d checks, want %d", n, rec.OK+rec.Fail)
	}
	out := logs.String()
	if !strings.Contains(out, `level=WARN msg="backend health changed"`) ||
		!strings.Contains(out, `last_error="connect: connection refused"`) {
		t.Errorf("no WARN with the error in the log:\n%s", out)
	}
	m.Set(nil)
	if _, ok := m.Records()[1]; ok {
		t.Error("a removed backend keeps its record")
	}
}

func TestDescribe(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fmt.Errorf("HTTP 503"), "HTTP 503"},
		{context.DeadlineExceeded, "timeout after 1s"},
		{&net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(netip.MustParseAddrPort("198.18.0.1:80")),
			Err: errors.New("connect: connection refused")}, "connect: connection refused"},
	} {
		if got := describe(c.err, time.Second); got != c.want {
			t.Errorf("describe(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// TestVerdictLog: a backend's first verdict is logged as such, and, with
// init_state "up", an up one without the error of a first probe that
// failed short of fall; with init_state "down" that first failure is the
// verdict, down. A change of verdict keeps its message, down with its
// error.
func TestVerdictLog(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	probe := func(_ context.Context, tg *Target) Result {
		if tg.Ref == 1 {
			return Result{OK: true}
		}
		return Result{Err: refused}
	}
	var logs lockedBuffer
	m := NewManager(slog.New(slog.NewTextHandler(&logs, nil)), probe, func(uint32, control.Status, bool, bool) {})
	initUp := fastCheck()
	initUp.InitState = config.InitUp
	fallOne := initUp
	fallOne.Fall = 1
	m.Set([]Target{
		{Ref: 1, VIP: "web", Label: "198.18.1.11:80", Check: initUp},      // passes
		{Ref: 2, VIP: "web", Label: "198.18.1.12:80", Check: initUp},      // fails, fall 2
		{Ref: 3, VIP: "web", Label: "198.18.1.13:80", Check: fallOne},     // fails, fall 1
		{Ref: 4, VIP: "web", Label: "198.18.1.14:80", Check: fastCheck()}, // fails, fall 2, init_state "down"
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m.Start(ctx)
	defer m.Stop()
	entries := func(backend string) []string {
		var out []string
		for l := range strings.Lines(logs.String()) {
			if strings.Contains(l, "backend="+backend+" ") {
				out = append(out, strings.TrimSpace(l))
			}
		}
		return out
	}
	testkit.Eventually(t, testkit.Patience, "198.18.1.12 down", func() bool { return len(entries("198.18.1.12:80")) >= 2 })
	testkit.Eventually(t, testkit.Patience, "the others' first verdicts", func() bool {
		return len(entries("198.18.1.11:80")) >= 1 && len(entries("198.18.1.13:80")) >= 1 && len(entries("198.18.1.14:80")) >= 1
	})
	m.Stop()
	const tail = ` last_error="connect: connection refused"`
	for backend, want := range map[string][]string{
		"198.18.1.11:80": {`level=INFO msg="backend health first verdict" vip=web backend=198.18.1.11:80 up=true draining=false`},
		"198.18.1.12:80": {
			`level=INFO msg="backend health first verdict" vip=web backend=198.18.1.12:80 up=true draining=false`,
			`level=WARN msg="backend health changed" vip=web backend=198.18.1.12:80 up=false draining=false` + tail,
		},
		"198.18.1.13:80": {`level=WARN msg="backend health first verdict" vip=web backend=198.18.1.13:80 up=false draining=false` + tail},
		"198.18.1.14:80": {`level=WARN msg="backend health first verdict" vip=web backend=198.18.1.14:80 up=false draining=false` + tail},
	} {
		got := entries(backend)
		if len(got) != len(want) {
			t.Errorf("%s: %d entries, want %d:\n%s", backend, len(got), len(want), strings.Join(got, "\n"))
			continue
		}
		for i, w := range want {
			if _, rest, _ := strings.Cut(got[i], " level="); "level="+rest != w {
				t.Errorf("%s: entry %d\n%s\nwant\n%s", backend, i, got[i], w)
			}
		}
	}
}
