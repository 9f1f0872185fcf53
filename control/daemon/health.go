package daemon

import (
	"context"
	"net/netip"
	"time"

	"github.com/vipd/vipd/control"
	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/health"
)

// startChecks starts the health checks on the backends of the current
// configuration. It holds mu, like Reload: a reload before it has changed
// d.cfg, whose targets are taken here; one after it sets the targets
// itself. Either way the checks probe the newest configuration.
func (d *Daemon) startChecks(ctx context.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.setTargetsLocked(d.healthTargets(d.cfg))
	d.checks.Start(ctx)
	d.checking = true
	limit := firstRoundLimit(d.cfg)
	if d.firstRoundMax > 0 {
		limit = d.firstRoundMax
	}
	d.firstRoundBy = time.Now().Add(limit)
}

// setTargetsLocked hands the health checks their targets.
//
// +checklocks:d.mu
func (d *Daemon) setTargetsLocked(ts []health.Target) {
	d.checks.Set(ts)
	d.targets = make(map[uint32]bool, len(ts))
	for _, t := range ts {
		d.targets[t.Ref] = true
	}
}

// setHealth records a backend's health status (from the checks) and, when
// it changed, has the publisher publish it: a burst of reports becomes one
// snapshot (requestPublishLocked).
func (d *Daemon) setHealth(ref uint32, st control.Status, up, known bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.phase >= phaseStopping {
		return // the checks are being stopped: nothing is published any more
	}
	if !d.targets[ref] {
		// A check that a reload removed, reporting late: its ref may go
		// to another backend later, which must not inherit this.
		return
	}
	// The last report: not published yet, else published.
	cur, ok := d.reports[ref]
	if !ok {
		cur.st, ok = d.health[ref]
		cur.known = d.checked[ref]
	}
	if ok && cur == (report{st, known}) {
		return
	}
	d.reports[ref] = report{st, known}
	d.markRefLocked(ref)
	d.requestPublishLocked()
}

// report is a health check's report on a backend.
type report struct {
	st    control.Status
	known bool
}

// healthTargets lists the backends to check: every backend not disabled
// of every VIP whose check is not "none", probed on its own address, or,
// with probe = "tunnel" (DSR), at the VIP through its tunnel.
// Callers pass d.cfg and hold d.mu, so that the targets and the snapshot
// come from the same configuration.
//
// +checklocks:d.mu
func (d *Daemon) healthTargets(cfg *config.Config) []health.Target {
	var ts []health.Target
	for i := range cfg.VIPs {
		v := &cfg.VIPs[i]
		hc := v.HealthCheck
		if hc.Type == config.CheckNone {
			continue
		}
		for j := range v.Backends {
			b := &v.Backends[j]
			if b.State == config.StateDisabled {
				continue
			}
			port := hc.Port
			if port == 0 {
				port = b.Port
			}
			if port == 0 {
				port = v.Port
			}
			label := b.Address.String()
			if b.Port != 0 {
				label = netip.AddrPortFrom(b.Address, b.Port).String()
			}
			t := health.Target{
				Ref: d.reg.Ref(control.BackendKey(v, b)), VIP: v.Name, Label: label,
				Addr: netip.AddrPortFrom(b.Address, port), Check: hc,
			}
			if v.Mode == config.ModeDSR && hc.Probe == config.ProbeTunnel {
				tunnelTarget(&t, v, b)
			}
			ts = append(ts, t)
		}
	}
	return ts
}
