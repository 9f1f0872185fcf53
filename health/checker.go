package health

import (
	"time"

	"github.com/vipd/vipd/control"
	"github.com/vipd/vipd/control/config"
)

// Result is the outcome of one probe.
type Result struct {
	OK bool
	// Draining: the backend answered that it is shutting down (the HTTP
	// drain status). It is still healthy: its flows continue.
	Draining bool
	// Err says why a probe failed, for logs.
	Err error
	// The backend's load report (load.go): Load, a utilization from 0 to
	// 1, when HasLoad; BadLoad, the header's value when it was not one.
	Load    float64
	HasLoad bool
	BadLoad string
}

// Checker is one backend's health state machine: its settings, and the
// Verdict they led to.
type Checker struct {
	rise, fall int
	slowStart  time.Duration
	// firstDecides: init_state "down", where the first result alone
	// decides (a failure takes the backend down at once).
	firstDecides bool
	Verdict
}

// Verdict is what a checker has concluded about its backend: what a
// checker replaced by a change of the check's settings hands on (assigned
// to its successor's Verdict), so that the backend is neither brought up
// nor ramped anew by it. The ramp goes on where it was, over the new
// checker's slow_start, and the successes or failures in a row count
// towards its rise and fall.
type Verdict struct {
	known     bool // at least one result seen
	up        bool
	succ      int // consecutive successes
	fail      int // consecutive failures
	draining  bool
	upSince   time.Time // start of the slow-start ramp
	rampStart bool      // upSince is meaningful
}

// NewChecker returns the checker of one backend. rampNow starts a slow-start
// ramp at now (a backend added while the service runs comes up slowly; the
// backends present at start do not).
func NewChecker(hc config.HealthCheck, rampNow bool, now time.Time) *Checker {
	c := &Checker{rise: max(hc.Rise, 1), fall: max(hc.Fall, 1), slowStart: hc.SlowStart.D(), Verdict: Verdict{up: true},
		firstDecides: hc.InitState != config.InitUp}
	if rampNow && c.slowStart > 0 {
		c.upSince, c.rampStart = now, true
	}
	return c
}

// Observe records a result at now and reports whether Up or Draining
// changed.
func (c *Checker) Observe(r Result, now time.Time) bool {
	wasUp, wasDraining := c.up, c.draining
	if !c.known && c.firstDecides && !r.OK {
		// The first verdict, with init_state "down": the backend took
		// no new flows before it (the daemon's doing), and this check
		// alone decides. (A pass leaves it up.)
		c.fail = c.fall - 1
	}
	c.known = true
	if r.OK {
		c.succ++
		c.fail = 0
		c.draining = r.Draining
		if !c.up && c.succ >= c.rise {
			c.up = true
			if c.slowStart > 0 {
				c.upSince, c.rampStart = now, true
			}
		}
	} else {
		c.fail++
		c.succ = 0
		if c.up && c.fail >= c.fall {
			c.up = false
			c.draining = false
			c.rampStart = false
		}
	}
	return c.up != wasUp || c.draining != wasDraining
}

// Up reports the current verdict.
func (c *Checker) Up() bool { return c.up }

// Known reports whether any probe has finished yet.
func (c *Checker) Known() bool { return c.known }

// Status is the backend's status at now, for control.Compile.
func (c *Checker) Status(now time.Time) control.Status {
	st := control.Status{Down: !c.up, Draining: c.draining}
	if r := c.Ramp(now); r < 1 {
		st.Ramp = r
	}
	return st
}

// Ramp is the slow-start fraction of the weight at now: from 0 when the
// backend came up to 1 after slow_start, and 1 when not ramping.
func (c *Checker) Ramp(now time.Time) float64 {
	if !c.up || !c.rampStart || c.slowStart <= 0 {
		return 1
	}
	el := now.Sub(c.upSince)
	if el >= c.slowStart {
		return 1
	}
	// A ramping backend starts with a sliver, never exactly 0, so that it
	// is in the table (control.Compile gives it at least weight 1).
	return max(float64(el)/float64(c.slowStart), 1e-9)
}

// Ramping reports whether the weight is still climbing at now.
func (c *Checker) Ramping(now time.Time) bool { return c.Ramp(now) < 1 }
