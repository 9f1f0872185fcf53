package daemon

import (
	"context"
	"time"

	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/health"
)

// No flow before a verdict. A backend whose VIP's check has init_state
// "down" (the default) takes no new flows until its first check ends, at
// start and when a reload adds it: until then it counts as draining (its
// flows, if a reload turned its check on, stay). The first check alone
// decides (health.Checker). At start the workers wait for the first
// round (Run): the box forwards nothing before, so a restart does not
// send its clients' mid-stream packets to the backends whose checks
// happened to end first. The box says it is ready — READY=1 to
// systemd, "ready" in its fleet key, 200 from the admin API (Ready) — once
// every such backend has had its first verdict, or when firstRoundLimit
// is up; BGP and keepalived-check follow from the backends up
// (min_healthy), which awaiting ones are not.

// setAwaitingLocked notes the targets whose first verdict the box waits
// for: those of checks with init_state "down".
//
// +checklocks:d.mu
func (d *Daemon) setAwaitingLocked(ts []health.Target) {
	d.awaiting = make(map[uint32]bool, len(ts))
	for _, t := range ts {
		if t.Check.InitState != config.InitUp {
			d.awaiting[t.Ref] = true
		}
	}
}

// awaitingLocked reports whether ref waits for its first verdict.
//
// +checklocks:d.mu
func (d *Daemon) awaitingLocked(ref uint32) bool {
	return d.awaiting[ref] && !d.checked[ref]
}

// firstRoundLimit is how long the box waits for the first round of checks
// before it says it is ready anyway: the slowest check's interval plus
// its timeout (a first probe starts within an interval, jittered), and 5 s
// to spare for a busy start.
func firstRoundLimit(cfg *config.Config) time.Duration {
	var most time.Duration
	for i := range cfg.VIPs {
		hc := &cfg.VIPs[i].HealthCheck
		if hc.Type != config.CheckNone {
			most = max(most, hc.Interval.D()+hc.Timeout.D())
		}
	}
	return most + 5*time.Second
}

// FirstRoundDone reports whether the first round of checks is over: the
// checks run and every backend awaiting its first verdict has it, or the
// round's time is up.
func (d *Daemon) FirstRoundDone() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.firstRoundDoneLocked(time.Now())
}

// +checklocks:d.mu
func (d *Daemon) firstRoundDoneLocked(now time.Time) bool {
	switch {
	case d.firstRoundOver:
		return true
	case !d.checking:
		return len(d.awaiting) == 0
	case now.Before(d.firstRoundBy) && d.awaitingCountLocked() > 0:
		return false
	}
	d.firstRoundOver = true
	return true
}

// awaitingCountLocked counts the backends awaiting their first verdict.
//
// +checklocks:d.mu
func (d *Daemon) awaitingCountLocked() int {
	n := 0
	for ref := range d.awaiting {
		if !d.checked[ref] {
			n++
		}
	}
	return n
}

// waitFirstRound returns when the first round of checks is over (see
// FirstRoundDone), polling every 50 ms, or when ctx is done; it logs when
// the round's time ran out first.
func (d *Daemon) waitFirstRound(ctx context.Context) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for !d.FirstRoundDone() {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if n := d.awaitingCountLocked(); n > 0 {
		d.log.Warn("ready before the first round of health checks ended: its time is up", "backends_unchecked", n)
	} else if len(d.awaiting) > 0 {
		d.log.Info("first round of health checks done", "backends", len(d.awaiting))
	}
}

// waitFirstRoundFed is waitFirstRound feeding n's watchdog every every
// (0: no watchdog) meanwhile.
func (d *Daemon) waitFirstRoundFed(ctx context.Context, n Notifier, every time.Duration) {
	if every <= 0 {
		d.waitFirstRound(ctx)
		return
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.waitFirstRound(wctx)
	}()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-done:
			cancel()
			return
		case <-t.C:
			n.Send("WATCHDOG=1")
		}
	}
}
