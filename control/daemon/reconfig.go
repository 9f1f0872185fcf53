package daemon

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/vipd/vipd/control"
	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/control/fleet"
)

// ErrRestartNeeded is wrapped by Reload when the new file changes settings
// that only take effect at start.
var ErrRestartNeeded = errors.New("needs a restart")

// Reload reads the configuration file again. A file that does not load,
// or that changes [dataplane], [conntrack], [admin] (other than
// egress_mtu) or [bgp], is refused: the running configuration stays and the error
// says why (each key that needs a restart, with its old and new value;
// ReloadWithReport has every reason apart). Otherwise VIPs and backends that stay keep their flows,
// removed ones stop, and new VIPs are announced.
//
// A reload that arrives before Run has published its first snapshot and
// set up the health checks (even before Run is called) waits for that,
// then reads the file and applies it whole; one that arrives after Run
// failed to start or began to stop returns ErrNotRunning.
func (d *Daemon) Reload() error {
	_, err := d.reload()
	return err
}

// reload is Reload, returning what it did (nil with ErrNotRunning). It
// returns once the state file holds what the reload changed in it
// (overrides of removed backends dropped), as SetOverride does.
func (d *Daemon) reload() (*ReloadReport, error) {
	rep, err := d.applyReload()
	d.syncState(stateWaitRequest)
	return rep, err
}

// applyReload reads, checks and applies the configuration file.
func (d *Daemon) applyReload() (*ReloadReport, error) {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	select {
	case <-d.startDone:
	default:
		if d.testHookReloadWaits != nil {
			d.testHookReloadWaits()
		}
		<-d.startDone
	}
	if !d.serving() {
		d.log.Warn("reload ignored: vipd is not running")
		return nil, ErrNotRunning
	}
	rep := &ReloadReport{File: d.opts.ConfigPath}
	// The bytes are kept: their hash tells /v1/state whether the file
	// on disk is still the one that runs.
	data, err := os.ReadFile(d.opts.ConfigPath)
	if err != nil {
		return d.refuse(rep, []string{err.Error()}, err)
	}
	cfg, warns, err := config.Parse(d.opts.ConfigPath, data)
	rep.Warnings = warns
	for _, w := range warns {
		d.log.Warn("config warning", "problem", w.String())
	}
	if err != nil {
		return d.refuse(rep, errorEntries(err), err)
	}
	var fc *fleet.Composed
	local := cfg
	if cfg.Fleet != nil && d.fleet != nil {
		// The file is the box's half: joined with the fleet's keys this
		// box applied last, as every box joins its own file.
		if fc, err = d.fleet.composer.Compose(cfg, d.fleet.keys); err != nil {
			return d.refuse(rep, errorEntries(err), err)
		}
		cfg = fc.Config
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	diff, entries, err := d.applyLocked(cfg, "reload")
	if err != nil {
		if errors.Is(err, ErrNotRunning) {
			d.log.Warn("reload ignored: vipd is stopping")
			return nil, err
		}
		return d.refuse(rep, entries, err)
	}
	if fc != nil {
		d.fleet.local = local
		d.setFleetLocked(fc)
	}
	d.reloadOK.Add(1)
	d.cfgFile.succeeded(data)
	rep.Diff = diff
	d.logChanges(diff)
	d.log.Info("configuration reloaded", "vips", len(cfg.VIPs), "generation", d.gen)
	return rep, nil
}

// applyLocked makes cfg the running configuration, from a reload (why
// "reload") or a revision of the fleet ("fleet"): refused, with one entry
// per reason, when it changes what needs a restart, when the platform
// cannot take it, or when it does not compile; the running configuration
// then stays. VIPs and backends that stay keep their flows; removed ones
// stop.
//
// +checklocks:d.mu
func (d *Daemon) applyLocked(cfg *config.Config, why string) (*config.Diff, []string, error) {
	if !d.servingLocked() {
		return nil, nil, ErrNotRunning
	}
	diff := config.Compare(d.cfg, cfg)
	if keys := restartEntries(d.cfg, cfg, diff); len(keys) > 0 {
		entries := make([]string, len(keys))
		for i, k := range keys {
			entries[i] = k + ": " + ErrRestartNeeded.Error()
		}
		return nil, entries, fmt.Errorf("%s: %w", strings.Join(keys, ", "), ErrRestartNeeded)
	}
	if rc, ok := d.opts.Platform.(reloadChecker); ok {
		if err := rc.CheckReload(cfg); err != nil {
			return nil, []string{err.Error()}, err
		}
	}
	if err := d.tunnels.ensure(cfg, d.opts.Platform.Host()); err != nil {
		return nil, []string{err.Error()}, err
	}
	old, oldAwaiting := d.cfg, d.awaiting
	d.cfg = cfg
	// Before the snapshot: a backend added here takes no new flow
	// before its first check (init_state "down").
	d.setAwaitingLocked(d.healthTargets(cfg))
	if err := d.publishLocked(why); err != nil {
		d.cfg, d.awaiting = old, oldAwaiting
		return nil, []string{err.Error()}, err
	}
	keepVIP, keepBackend := map[string]bool{}, map[string]bool{}
	for i := range cfg.VIPs {
		v := &cfg.VIPs[i]
		keepVIP[control.VIPKey(v)] = true
		for j := range v.Backends {
			keepBackend[control.BackendKey(v, &v.Backends[j])] = true
		}
	}
	// The overrides are reconciled while old's backends are still bound
	// (reconcileOverridesLocked looks them up by key): after Forget,
	// looking a removed backend up would bind its reference again, which
	// then is never held nor reused, and its hold would start over at the
	// next reload.
	d.reconcileOverridesLocked(old, cfg)
	d.reg.Forget(keepVIP, keepBackend)
	for key := range d.transitions { // events.go: a backend that comes back starts at 0, as its series
		if !keepBackend[key] {
			delete(d.transitions, key)
			delete(d.lastChange, key)
		}
	}
	targets := d.healthTargets(cfg)
	if d.checking {
		d.setTargetsLocked(targets)
	} // else startChecks takes the targets of d.cfg, this configuration
	live := map[uint32]bool{}
	for _, t := range targets {
		live[t.Ref] = true
	}
	stale := false
	for ref := range d.health {
		if !live[ref] {
			// No longer checked (its check turned off, or it is gone):
			// its last status, down or draining, goes, and no report
			// will come to publish that. The snapshot just published
			// still has it: publish again.
			delete(d.health, ref)
			delete(d.checked, ref)
			d.markRefLocked(ref)
			stale = true
		}
	}
	if stale {
		d.requestPublishLocked()
	}
	// A removed backend's drain goes with it: its ref may come to
	// another backend (control.Registry).
	for ref := range d.drains {
		if _, ok := d.plan.VIPOf(ref); !ok {
			delete(d.drains, ref)
			delete(d.drainWhy, ref)
		}
	}
	if old.Dataplane.NeighborRole != cfg.Dataplane.NeighborRole {
		d.log.Warn("neighbor_role changed in the file: it is the role the box starts in; the role now stays until vipd active or vipd standby",
			"file", cfg.Dataplane.NeighborRole, "role", d.role.name())
	}
	d.loadedAt = time.Now()
	return diff, nil, nil
}

// serving reports whether the daemon is live or running: it has published
// a snapshot and does not stop.
func (d *Daemon) serving() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.servingLocked()
}

// +checklocks:d.mu
func (d *Daemon) servingLocked() bool {
	return d.phase == phaseLive || d.phase == phaseRunning
}

// restartOnly names the tables (of those a reload cannot apply) that
// differ between old and new: the net under restartEntries, which names
// the keys.
func restartOnly(old, new *config.Config) []string {
	a, b := old.Dataplane, new.Dataplane
	a.EgressMTU, b.EgressMTU = 0, 0
	a.NeighborRole, b.NeighborRole = "", "" // the start role: applies at the next start
	var changed []string
	if !reflect.DeepEqual(a, b) {
		changed = append(changed, "dataplane")
	}
	if old.Conntrack != new.Conntrack {
		changed = append(changed, "conntrack")
	}
	if !old.Admin.Equal(&new.Admin) {
		changed = append(changed, "admin")
	}
	if !reflect.DeepEqual(old.BGP, new.BGP) {
		changed = append(changed, "bgp")
	}
	if !reflect.DeepEqual(old.Fleet, new.Fleet) {
		// Another store, prefix or identity: the watch and the box key
		// start over, which is a start.
		changed = append(changed, "fleet")
	}
	return changed
}
