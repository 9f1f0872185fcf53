package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/vipd/vipd/control"
	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/dataplane"
)

// publish recompiles the whole state (configuration, host, health and
// drains) into a snapshot and publishes it, before it returns.
func (d *Daemon) publish(why string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dirtyAll = true
	return d.publishLocked(why)
}

// publishGap is the least time between two publications by the publisher:
// a burst of health events (a rack going down, slow starts stepping
// together) is published in one snapshot per gap, while a lone event is
// published as soon as it comes. It bounds the control plane's share of a
// CPU when every publish is expensive (a full rebuild takes far longer
// than this gap; a health event's, at 1,000 VIPs of 100 backends, about
// as long; see BenchmarkPublishFlap).
const publishGap = 2 * time.Millisecond

// requestPublishLocked has the publisher publish the state soon: at once
// if it is idle, else after its current publication and publishGap. A
// synchronous publish made meanwhile takes the change with it.
//
// +checklocks:d.mu
func (d *Daemon) requestPublishLocked() {
	d.pending = true
	select {
	case d.kick <- struct{}{}:
	default: // a wake-up is already pending: it will see this change
	}
}

// runPublisher publishes the changes requestPublishLocked announces until
// ctx is done.
func (d *Daemon) runPublisher(ctx context.Context) {
	gap := time.NewTimer(0)
	defer gap.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.kick:
		}
		d.flushPending()
		gap.Reset(d.gap)
		select {
		case <-ctx.Done():
			return
		case <-gap.C:
		}
	}
}

// flushPending publishes what is pending, if anything; it takes mu.
func (d *Daemon) flushPending() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.pending {
		return // a synchronous publish took it
	}
	if err := d.publishLocked("health"); err != nil && !errors.Is(err, ErrNotRunning) {
		d.log.Error("publishing a health change failed", "err", err)
	}
}

// statusLocked is a backend's run-time status: health, drain, outlier
// ejection and the operator's overrides.
//
// +checklocks:d.mu
func (d *Daemon) statusLocked(ref uint32) control.Status {
	st := d.health[ref]
	// Before its first verdict, a backend keeps whatever flows it has (a
	// reload that turned its check on) and takes no new ones.
	st.Draining = st.Draining || d.drains[ref] || d.awaitingLocked(ref) || d.full[ref] > 0
	st.Down = st.Down || d.outliers.ejected[ref]
	d.overrides[ref].apply(&st)
	return st
}

// markRefLocked notes that backend ref's status changed.
//
// +checklocks:d.mu
func (d *Daemon) markRefLocked(ref uint32) {
	if d.plan == nil {
		d.dirtyAll = true
		return
	}
	if i, ok := d.plan.VIPOf(ref); ok {
		d.dirtyVIPs[i] = true
	}
}

// publishLocked compiles what changed since the last snapshot and
// publishes a new one built from it. The configuration's identities are
// resolved once per configuration (Plan); with neither the configuration
// nor the host changed (dirtyAll), only the VIPs of backends whose status
// changed are compiled again and the rest of the spec is shared with the
// last one; the snapshot is built from the last one (NewSnapshotFrom),
// and the steering is applied only when it changed. On error nothing is
// published and what changed stays marked.
//
// +checklocks:d.mu
func (d *Daemon) publishLocked(why string) error {
	if d.phase < phaseStarting || d.phase >= phaseStopping {
		return ErrNotRunning
	}
	now := time.Now()
	for ref, r := range d.reports {
		d.healthEventLocked(ref, d.health[ref], d.checked[ref], r, now) // events.go
		d.health[ref], d.checked[ref] = r.st, r.known
	}
	clear(d.reports)
	host := d.opts.Platform.Host()
	plan := d.plan
	if plan == nil || plan.Config() != d.cfg {
		var err error
		if plan, err = control.NewPlan(d.cfg, d.reg); err != nil {
			return err
		}
	}
	full := plan != d.plan || d.dirtyAll || d.spec == nil
	spec := plan.Header(&host)
	var allDown []bool
	status := d.statusLocked
	// A new configuration is observed on a copy, kept only if it is
	// published (previous.go).
	now, prev := time.Now(), d.prev
	var prevChanges []control.Change
	prevDirty := false
	if plan != d.plan {
		prev = d.prev.Clone()
		prevChanges, prevDirty = prev.Observe(d.cfg, now)
	}
	next := d.prevNext
	if full {
		next = time.Time{}
		spec.VIPs = make([]dataplane.VIPSpec, len(d.cfg.VIPs))
		allDown = make([]bool, len(d.cfg.VIPs))
		for i := range spec.VIPs {
			var err error
			if spec.VIPs[i], allDown[i], err = plan.VIP(i, &host, status); err != nil {
				return err
			}
			if until := previousFor(prev, &d.cfg.VIPs[i], &spec.VIPs[i], now); !until.IsZero() && (next.IsZero() || until.Before(next)) {
				next = until
			}
		}
	} else {
		spec.VIPs = slices.Clone(d.spec.VIPs)
		allDown = slices.Clone(d.vipAllDown)
		for i := range d.dirtyVIPs {
			var err error
			if spec.VIPs[i], allDown[i], err = plan.VIP(i, &host, status); err != nil {
				return err
			}
			previousFor(prev, &d.cfg.VIPs[i], &spec.VIPs[i], now)
		}
	}
	snap, err := dataplane.NewSnapshotFrom(d.snaps.Load(), spec)
	if err != nil {
		return err
	}
	if !snap.SteeringUnchanged() || d.steerStale {
		if err := d.opts.Platform.Apply(steeringOf(spec)); err != nil {
			d.steerStale = true
			return fmt.Errorf("steering: %w", err)
		}
		d.steerStale = false
	}
	d.applyNeighborsLocked()
	d.snaps.Store(snap)
	if fp, ok := d.opts.Platform.(fastPlatform); ok {
		// Entries computed under the previous snapshot stop serving now.
		// If the kernel refuses, they serve until they expire (at most
		// fast_path_refresh): logged, not a reason to keep the old
		// snapshot.
		if err := fp.SetFastGeneration(snap.Generation()); err != nil {
			d.log.Error("the XDP fast path keeps the previous snapshot's flows until they expire", "err", err)
		}
	}
	d.spec, d.plan, d.vipAllDown = spec, plan, allDown
	d.prev = prev
	if prevDirty {
		d.saveStateLocked()
	}
	for _, c := range prevChanges {
		d.log.Info("backend set changed: the previous one gives mid-flow packets their previous-owner hints", "vip", c.VIP, "until", c.Until.Format(time.RFC3339))
	}
	d.schedulePreviousLocked(next)
	d.dirtyAll, d.pending = false, false
	clear(d.dirtyVIPs)
	d.gen++
	for i, down := range allDown {
		v := &d.cfg.VIPs[i]
		switch {
		case down && !d.allDown[v.Name]:
			d.allDown[v.Name] = true
			c, _ := d.allDownEvents.LoadOrStore(v.Name, new(atomic.Uint64))
			c.(*atomic.Uint64).Add(1)
			mode := string(v.HealthCheck.OnAllDown)
			if mode == "" {
				mode = string(config.AllDownDrop)
			}
			d.log.Warn("every backend of the VIP is down", "vip", v.Name, "on_all_down", mode)
		case !down && d.allDown[v.Name]:
			delete(d.allDown, v.Name)
			d.log.Info("the VIP has a backend up again", "vip", v.Name)
		}
	}
	if len(d.allDown) > 0 {
		// VIPs that a reload removed are no longer all down.
		names := make(map[string]bool, len(d.cfg.VIPs))
		for i := range d.cfg.VIPs {
			names[d.cfg.VIPs[i].Name] = true
		}
		for name := range d.allDown {
			if !names[name] {
				delete(d.allDown, name)
			}
		}
	}
	d.box.nextHop4, d.box.nextHop6 = host.Addr4[dataplane.PortIngress], host.Addr6[dataplane.PortIngress]
	d.updateRoutesLocked()
	d.log.Debug("snapshot published", "generation", d.gen, "why", why, "full", full,
		"client_gateway4", net.HardwareAddr(host.ClientGateway4[:]).String(), "client_onlink", host.ClientOnLink)
	return nil
}

// neighborVIPs lists, each once and in the file's order, the VIP addresses
// vipd answers ARP/NDP for: those of a VIP with neighbor_announce on (by
// default, every VIP not announced over BGP).
func neighborVIPs(cfg *config.Config) []netip.Addr {
	var out []netip.Addr
	for i := range cfg.VIPs {
		v := &cfg.VIPs[i]
		if v.AnswersNeighbors() && !slices.Contains(out, v.Address) {
			out = append(out, v.Address)
		}
	}
	return out
}
