package health

import (
	"errors"
	"testing"
	"time"

	"github.com/vipd/vipd/control"
	"github.com/vipd/vipd/control/config"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// hc is a check with init_state "up": rise and fall from the first
// result.
func hc(rise, fall int, slow time.Duration) config.HealthCheck {
	return config.HealthCheck{Type: config.CheckHTTP, Rise: rise, Fall: fall, SlowStart: config.Duration(slow),
		Interval: config.Duration(time.Second), Timeout: config.Duration(time.Second), InitState: config.InitUp}
}

// hcDown is hc with init_state "down": the first result decides.
func hcDown(rise, fall int) config.HealthCheck {
	c := hc(rise, fall, 0)
	c.InitState = config.InitDown
	return c
}

var (
	ok    = Result{OK: true}
	bad   = Result{Err: errors.New("refused")}
	drain = Result{OK: true, Draining: true}
)

// TestTransitions walks the checker through scripted results, one per
// second, checking the verdict after each.
func TestTransitions(t *testing.T) {
	tests := []struct {
		name    string
		check   config.HealthCheck
		results []Result
		up      []bool // after each result
	}{
		{"starts up and stays up", hc(2, 3, 0), []Result{ok, ok}, []bool{true, true}},
		{"goes down after fall failures", hc(2, 3, 0), []Result{bad, bad, bad}, []bool{true, true, false}},
		{"a success resets the failure count (flap suppression)", hc(2, 3, 0), []Result{bad, bad, ok, bad, bad, ok}, []bool{true, true, true, true, true, true}},
		{"comes back after rise successes", hc(2, 1, 0), []Result{bad, ok, ok}, []bool{false, false, true}},
		{"a failure resets the success count", hc(3, 1, 0), []Result{bad, ok, ok, bad, ok, ok, ok}, []bool{false, false, false, false, false, false, true}},
		{"rise 1 fall 1 follows every result", hc(1, 1, 0), []Result{bad, ok, bad, ok}, []bool{false, true, false, true}},
		{"draining is still up", hc(2, 2, 0), []Result{drain, drain}, []bool{true, true}},
		{"init down: a first failure is down at once", hcDown(2, 3), []Result{bad, ok, ok}, []bool{false, false, true}},
		{"init down: a first success is up", hcDown(2, 3), []Result{ok, bad, bad, bad}, []bool{true, true, true, false}},
		{"init down: fall counts from the second result", hcDown(2, 3), []Result{ok, bad, ok, bad, bad}, []bool{true, true, true, true, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewChecker(tt.check, false, t0)
			for i, r := range tt.results {
				c.Observe(r, t0.Add(time.Duration(i)*time.Second))
				if c.Up() != tt.up[i] {
					t.Fatalf("after result %d: up %v, want %v", i, c.Up(), tt.up[i])
				}
			}
		})
	}
}

func TestDraining(t *testing.T) {
	c := NewChecker(hc(2, 2, 0), false, t0)
	if changed := c.Observe(drain, t0); !changed {
		t.Errorf("starting to drain is a change")
	}
	if st := c.Status(t0); st.Down || !st.Draining {
		t.Errorf("status %+v, want draining and up", st)
	}
	c.Observe(ok, t0.Add(time.Second))
	if st := c.Status(t0); st.Draining {
		t.Errorf("a plain 2xx ends the drain: %+v", st)
	}
	// A draining backend that stops answering goes down, and is no longer
	// draining (its flows are re-picked).
	c.Observe(drain, t0)
	c.Observe(bad, t0)
	c.Observe(bad, t0)
	if st := c.Status(t0); !st.Down || st.Draining {
		t.Errorf("draining then dead: %+v", st)
	}
}

func TestSlowStart(t *testing.T) {
	c := NewChecker(hc(1, 1, 10*time.Second), false, t0)
	if st := c.Status(t0); st != (control.Status{}) {
		t.Errorf("a backend present at start does not ramp: %+v", st)
	}
	c.Observe(bad, t0)
	up := t0.Add(5 * time.Second)
	c.Observe(ok, up)
	for _, tc := range []struct {
		at   time.Duration
		ramp float64
	}{{0, 1e-9}, {2500 * time.Millisecond, 0.25}, {5 * time.Second, 0.5}, {9 * time.Second, 0.9}, {10 * time.Second, 0}, {time.Hour, 0}} {
		st := c.Status(up.Add(tc.at))
		if d := st.Ramp - tc.ramp; d > 1e-6 || d < -1e-6 || st.Down {
			t.Errorf("%v after coming up: %+v, want ramp %v", tc.at, st, tc.ramp)
		}
	}
	// Added while running: ramps from its creation.
	n := NewChecker(hc(1, 1, 10*time.Second), true, t0)
	if r := n.Status(t0.Add(3 * time.Second)).Ramp; r < 0.29 || r > 0.31 {
		t.Errorf("new backend ramp %v after 3 s of 10", r)
	}
	// Going down stops the ramp; coming back starts a new one.
	n.Observe(bad, t0.Add(4*time.Second))
	n.Observe(ok, t0.Add(20*time.Second))
	if r := n.Status(t0.Add(21 * time.Second)).Ramp; r < 0.09 || r > 0.11 {
		t.Errorf("ramp after coming back %v, want 0.1", r)
	}
}

func TestJitter(t *testing.T) {
	iv := 2 * time.Second
	if jitter(iv, true, 0) != 0 || jitter(iv, true, 0.999) >= iv {
		t.Errorf("first probe must fall within one interval")
	}
	if j := jitter(iv, false, 0); j != 1800*time.Millisecond {
		t.Errorf("low jitter %v", j)
	}
	if j := jitter(iv, false, 0.999); j < 2190*time.Millisecond || j > 2200*time.Millisecond {
		t.Errorf("high jitter %v", j)
	}
}
