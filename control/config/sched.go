package config

import (
	"math"
	"strings"
	"time"
)

// Schedulers of new flows (vip.scheduler). They are those of package
// dataplane (daemon's TestSchedulerNamesAgree keeps the two in step).
const (
	SchedMaglev        = "maglev"         // the weighted Maglev table: consistent
	SchedMaglevBounded = "maglev_bounded" // Maglev with bounded loads: consistent while no backend is at its bound
	SchedWRR           = "wrr"            // smooth weighted round robin, per worker
	SchedLC            = "lc"             // weighted least connections on active flows
	SchedP2C           = "p2c"            // power of two choices on active flows ÷ weight
)

// Schedulers lists every scheduler's name.
var Schedulers = []string{SchedMaglev, SchedMaglevBounded, SchedWRR, SchedLC, SchedP2C}

// ConsistentScheduler reports whether every box with the same
// configuration gives a flow the same backend under scheduler s: only
// then can routers move flows between boxes (BGP, ECMP) without breaking
// them.
func ConsistentScheduler(s string) bool { return s == SchedMaglev || s == SchedMaglevBounded }

// Scheduling and load-report defaults and limits.
const (
	DefaultLoadBound        = 1.25
	MaxLoadBound            = 10.0
	DefaultLoadHeader       = "X-Load"
	DefaultLoadHalfLife     = 10 * time.Second
	DefaultErrorPenalty     = 1.0
	DefaultMinWeightPercent = 10
)

// validateSched checks scheduler and load_bound, and warns when a
// scheduler whose choice depends on the box is announced over BGP.
func (c *collector) validateSched(p string, v *VIP) {
	known := false
	for _, s := range Schedulers {
		known = known || v.Scheduler == s
	}
	if !known {
		c.errorf(p+".scheduler", "must be one of %s, not %q", strings.Join(quoteAll(Schedulers), ", "), v.Scheduler)
	}
	if math.IsNaN(v.LoadBound) || v.LoadBound <= 1 || v.LoadBound > MaxLoadBound {
		c.errorf(p+".load_bound", "must be more than 1 and at most %g, not %g", MaxLoadBound, v.LoadBound)
	} else if v.LoadBound != DefaultLoadBound && v.Scheduler != SchedMaglevBounded {
		c.warnf(p+".load_bound", "only applies to scheduler = %q: ignored with %q", SchedMaglevBounded, v.Scheduler)
	}
}

// warnSchedAnnounced warns about a VIP announced over BGP whose
// scheduler gives a flow a backend that depends on the box: when the
// routers move the flow to another box, it lands on another backend.
func (c *collector) warnSchedAnnounced(p string, v *VIP) {
	if v.Announced() && known(v.Scheduler) && !ConsistentScheduler(v.Scheduler) {
		c.warnf(p+".scheduler", "%q is announced over BGP, but its choice depends on the box (its own counters and round): a flow that ECMP moves to another box lands on another backend and breaks; use %q or %q", v.Scheduler, SchedMaglev, SchedMaglevBounded)
	}
}

func known(s string) bool {
	for _, k := range Schedulers {
		if k == s {
			return true
		}
	}
	return false
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = `"` + s + `"`
	}
	return out
}

// validateLoadReport checks the load-report keys of an HTTP check.
func (c *collector) validateLoadReport(p string, h *HealthCheck) {
	if h.LoadReport && h.Type != CheckHTTP {
		c.errorf(p+".load_report", "only applies to type = %q: the load is read from the check's answer", CheckHTTP)
	}
	if !validHeaderName(h.LoadHeader) {
		c.errorf(p+".load_header", "must be an HTTP header name (letters, digits and !#$%%&'*+-.^_`|~), not %q", h.LoadHeader)
	}
	if h.LoadHalfLife.D() <= 0 || h.LoadHalfLife.D() > time.Hour {
		c.errorf(p+".load_half_life", "must be from 1ns to 1h, not %s", h.LoadHalfLife)
	}
	if math.IsNaN(h.ErrorPenalty) || h.ErrorPenalty < 0 || h.ErrorPenalty > 1 {
		c.errorf(p+".error_penalty", "must be from 0 to 1, not %g", h.ErrorPenalty)
	}
	if h.MinWeightPercent < 1 || h.MinWeightPercent > 100 {
		c.errorf(p+".min_weight_percent", "must be from 1 to 100, not %d", h.MinWeightPercent)
	}
}

// validHeaderName reports whether s is an HTTP field name (RFC 9110 token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("!#$%&'*+-.^_`|~", r):
		default:
			return false
		}
	}
	return true
}
