package health

import (
	"context"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/vipd/vipd/control"
)

// Report receives a backend's new status. It is called from the checking
// goroutines, one call at a time per backend.
type Report func(ref uint32, st control.Status, up, known bool)

// rampSteps is how many weight updates a slow start publishes: each one
// rebuilds the VIP's Maglev table, so a ramp is a few steps, not a curve.
const rampSteps = 10

// Manager runs the checks of a changing set of backends.
type Manager struct {
	log    *slog.Logger
	probe  Prober
	report Report

	mu      sync.Mutex
	ctx     context.Context
	running map[uint32]*runner
	// stopping are runners Set cancelled that may not have returned yet:
	// Stop waits for them too.
	stopping []*runner
	started  bool
	// loadBad counts malformed load reports per backend (load.go).
	loadBad map[uint32]uint64
	// records are the checked backends' records (record.go), by ref.
	records map[uint32]*Record
}

// badLoadLogEvery is how often a backend's malformed load reports are
// logged at most.
const badLoadLogEvery = time.Minute

// LoadReportsMalformed returns the malformed load reports per backend
// reference since the manager was made.
func (m *Manager) LoadReportsMalformed() map[uint32]uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[uint32]uint64, len(m.loadBad))
	for ref, n := range m.loadBad {
		out[ref] = n
	}
	return out
}

// badLoad counts a malformed load report of t and logs it, at most once
// per badLoadLogEvery per backend (*last: when it was last logged).
func (m *Manager) badLoad(t *Target, value string, now time.Time, last *time.Time) {
	m.mu.Lock()
	if m.loadBad == nil {
		m.loadBad = map[uint32]uint64{}
	}
	m.loadBad[t.Ref]++
	n := m.loadBad[t.Ref]
	m.mu.Unlock()
	if last.IsZero() || now.Sub(*last) >= badLoadLogEvery {
		*last = now
		m.log.Warn("backend load report malformed: ignored", "vip", t.VIP, "backend", t.Label,
			"header", t.Check.LoadHeader, "value", value, "malformed_total", n)
	}
}

type runner struct {
	t      Target
	cancel context.CancelFunc
	done   chan struct{}
	// from is the verdict of the checker this one replaces (a change of
	// the backend's check settings), nil for a new backend.
	from *Verdict
	// mu guards verdict, the checker's verdict after its latest result
	// (valid once observed), for a runner that replaces this one. A value,
	// not a pointer: it is set after every probe.
	mu       sync.Mutex
	verdict  Verdict
	observed bool
}

// setVerdict records c's verdict for a successor.
func (r *runner) setVerdict(c *Checker) {
	r.mu.Lock()
	r.verdict, r.observed = c.Verdict, true
	r.mu.Unlock()
}

// lastVerdict is the checker's verdict after its latest result, or the
// one it took over; nil before either.
func (r *runner) lastVerdict() *Verdict {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.observed {
		v := r.verdict
		return &v
	}
	return r.from
}

// NewManager returns a manager that reports through report; probe nil
// means Probe.
func NewManager(log *slog.Logger, probe Prober, report Report) *Manager {
	if probe == nil {
		probe = Probe
	}
	return &Manager{log: log, probe: probe, report: report, running: map[uint32]*runner{}}
}

// Start begins checking under ctx; Set may be called before or after.
func (m *Manager) Start(ctx context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ctx = ctx
	m.started = true
	for _, r := range m.running {
		m.launch(r, false)
	}
}

// Set replaces the checked backends. A backend whose target is unchanged
// keeps its checker and state (a reload must not reset health); one whose
// check settings changed gets a checker with the new settings that takes
// over the old one's verdict (up or down, draining, its ramp), so that a
// new timeout brings no dead backend up and restarts no slow start; a new
// one starts up, ramping if the service is already running and it has a
// slow start; a removed one stops. Backends with type "none" are not
// checked.
func (m *Manager) Set(targets []Target) {
	m.mu.Lock()
	defer m.mu.Unlock()
	want := map[uint32]Target{}
	for _, t := range targets {
		if t.Check.Type != "none" {
			want[t.Ref] = t
		}
	}
	replaced := map[uint32]*Verdict{} // nil: replaced before any result
	for ref, r := range m.running {
		if t, ok := want[ref]; !ok || t != r.t {
			if r.cancel != nil { // nil before Start: never launched
				r.cancel()
				m.stopping = append(m.stopping, r)
			}
			delete(m.running, ref)
			if !ok {
				delete(m.records, ref)
			}
			if ok {
				replaced[ref] = r.lastVerdict()
			}
		}
	}
	m.stopping = slices.DeleteFunc(m.stopping, func(r *runner) bool {
		select {
		case <-r.done:
			return true
		default:
			return false
		}
	})
	for ref, t := range want {
		if _, ok := m.running[ref]; ok {
			continue
		}
		v, again := replaced[ref]
		r := &runner{t: t, done: make(chan struct{}), from: v}
		m.running[ref] = r
		if m.started {
			m.launch(r, !again) // only a new backend ramps from the start
		}
	}
}

func (m *Manager) launch(r *runner, added bool) {
	ctx, cancel := context.WithCancel(m.ctx)
	r.cancel = cancel
	go m.run(ctx, r, added)
}

// run checks one backend until ctx ends.
func (m *Manager) run(ctx context.Context, r *runner, added bool) {
	defer close(r.done)
	t := &r.t
	now := time.Now()
	c := NewChecker(t.Check, added, now)
	if r.from != nil {
		c.Verdict = *r.from
	}
	ls := newLoadState(t.Check, now) // nil without load reports
	var badLogged time.Time
	status := func(now time.Time) control.Status {
		st := c.Status(now)
		st.Scale = ls.scale()
		return st
	}
	if c.Ramping(now) {
		m.report(t.Ref, status(now), c.Up(), c.Known())
	}
	interval := t.Check.Interval.D()
	timer := time.NewTimer(jitter(interval, true, rand.Float64()))
	defer timer.Stop()
	var ramp <-chan time.Time
	var rampTick *time.Ticker
	// setRamp starts the ramp ticker while the weight climbs and stops it
	// when it is done, reporting the full weight then: whichever event
	// (tick or probe) notices the end must publish it, or the backend
	// would stay at its last partial weight.
	setRamp := func(now time.Time) {
		if c.Ramping(now) && rampTick == nil {
			rampTick = time.NewTicker(max(t.Check.SlowStart.D()/rampSteps, 10*time.Millisecond))
			ramp = rampTick.C
		} else if !c.Ramping(now) && rampTick != nil {
			rampTick.Stop()
			rampTick, ramp = nil, nil
			m.report(t.Ref, status(now), c.Up(), c.Known())
		}
	}
	setRamp(now)
	defer func() {
		if rampTick != nil {
			rampTick.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-ramp:
			if c.Ramping(now) {
				m.report(t.Ref, status(now), c.Up(), c.Known())
			}
			setRamp(now)
		case <-timer.C:
			began := time.Now()
			res := m.probe(ctx, t)
			if ctx.Err() != nil {
				return
			}
			now := time.Now()
			errText := describe(res.Err, t.Check.Timeout.D())
			if !res.OK && errText == "" {
				errText = "failed"
			}
			wasKnown := c.Known()
			if res.BadLoad != "" {
				m.badLoad(t, res.BadLoad, now, &badLogged)
			}
			weighed := ls != nil && ls.observe(res, now)
			changed := c.Observe(res, now) || !wasKnown
			r.setVerdict(c)
			m.record(t.Ref, now.Sub(began), errText, changed, now)
			if changed {
				m.logVerdict(t, c, res, errText, !wasKnown)
			}
			if weighed {
				m.log.Info("backend effective weight changed", "vip", t.VIP, "backend", t.Label,
					"percent", math.Round(100*ls.applied), "utilization", math.Round(100*ls.util)/100,
					"error_rate", math.Round(100*ls.errs)/100)
			}
			if changed || weighed {
				m.report(t.Ref, status(now), c.Up(), true)
			}
			setRamp(now)
			timer.Reset(jitter(interval, false, rand.Float64()))
		}
	}
}

// logVerdict logs the first verdict on a backend (first), or a change of
// it: at WARN when the backend is down, with why (errText, the check's
// error as describe says it). An up verdict carries no error: a first
// probe that failed short of fall leaves the backend up, and its error is
// not why it is up (the next ones say it, if it goes down).
func (m *Manager) logVerdict(t *Target, c *Checker, res Result, errText string, first bool) {
	msg := "backend health changed"
	if first {
		msg = "backend health first verdict"
	}
	args := []any{"vip", t.VIP, "backend", t.Label, "up", c.Up(), "draining", res.Draining && c.Up()}
	if c.Up() {
		m.log.Info(msg, args...)
		return
	}
	if errText != "" {
		args = append(args, "last_error", errText)
	}
	m.log.Warn(msg, args...)
}

// Stop stops every check and waits for the goroutines.
func (m *Manager) Stop() {
	m.mu.Lock()
	rs := make([]*runner, 0, len(m.running)+len(m.stopping))
	for _, r := range m.running {
		rs = append(rs, r)
		if r.cancel != nil {
			r.cancel()
		}
	}
	rs = append(rs, m.stopping...) // cancelled by Set already
	m.stopping = nil
	started := m.started
	m.mu.Unlock()
	if !started {
		return
	}
	for _, r := range rs {
		<-r.done
	}
}
