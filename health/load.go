package health

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/vipd/vipd/control/config"
)

// A backend's reported load (seeds 000 and 001: Google's weighted round
// robin and Dropbox's Bandaid take utilization reports from the backends'
// answers, and count recent errors so that a backend failing fast does
// not look idle). With load_report, each HTTP check reads a utilization u
// in [0, 1] from the answer's load_header; every check is also an error
// sample e (1 for a failed check, a 5xx included, else 0). Both are
// smoothed by an exponentially weighted moving average whose weight halves
// every load_half_life, and the backend's weight is scaled by
//
//	f = (1 − ū) × (1 − error_penalty × ē), bounded to [min_weight_percent/100, 1],
//
// applied only when it moved by minMove or more from the fraction in
// effect (or reached a bound): each change rebuilds the VIP's Maglev
// table, and a table that churns moves flows between boxes.

// minMove is the least relative change of the weight fraction that is
// applied.
const minMove = 0.10

// loadState is one backend's smoothed load and error rate. It belongs to
// the backend's checking goroutine.
type loadState struct {
	halfLife time.Duration
	penalty  float64
	floor    float64
	util     float64 // ū
	errs     float64 // ē
	hasUtil  bool    // a report was read: util means something
	last     time.Time
	applied  float64 // the fraction in effect, 1 at first
}

// newLoadState returns the load state of a backend checked by hc from
// now, nil when hc does not read load reports.
func newLoadState(hc config.HealthCheck, now time.Time) *loadState {
	if !hc.LoadReport || hc.Type != config.CheckHTTP {
		return nil
	}
	return &loadState{
		halfLife: max(hc.LoadHalfLife.D(), time.Millisecond), penalty: hc.ErrorPenalty,
		floor: float64(hc.MinWeightPercent) / 100, last: now, applied: 1,
	}
}

// observe folds result r at now in and reports whether the applied
// fraction changed.
func (l *loadState) observe(r Result, now time.Time) bool {
	dt := now.Sub(l.last)
	l.last = now
	// The weight of the new sample: the old average's halves every
	// half-life.
	a := 1 - math.Exp2(-float64(max(dt, 0))/float64(l.halfLife))
	e := 0.0
	if !r.OK {
		e = 1
	}
	l.errs += a * (e - l.errs)
	if r.HasLoad {
		if !l.hasUtil {
			l.util, l.hasUtil = r.Load, true // the first report stands alone
		} else {
			l.util += a * (r.Load - l.util)
		}
	}
	f := l.target()
	if f == l.applied {
		return false
	}
	if math.Abs(f-l.applied) >= minMove*l.applied || f == l.floor || f == 1 {
		l.applied = f
		return true
	}
	return false
}

// target is the fraction the smoothed load and errors call for.
func (l *loadState) target() float64 {
	f := 1.0
	if l.hasUtil {
		f = 1 - l.util
	}
	f *= 1 - l.penalty*l.errs
	// In whole percent: a load that fades reaches 1 exactly.
	return min(max(math.Round(100*f)/100, l.floor), 1)
}

// scale is the fraction in effect as control.Status.Scale gives it (0:
// the whole weight).
func (l *loadState) scale() float64 {
	if l == nil || l.applied >= 1 {
		return 0
	}
	return l.applied
}

// readLoad reads a load report from header name of h: ok when the header
// is there, bad when its value is not a number from 0 to 1 (the raw
// value, for the log).
func readLoad(h http.Header, name string) (u float64, ok bool, bad string) {
	v := h.Get(name)
	if v == "" {
		return 0, false, ""
	}
	u, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(u) || u < 0 || u > 1 {
		if len(v) > 64 {
			v = v[:64] + "…"
		}
		return 0, false, v
	}
	return u, true, ""
}
