package daemon

import (
	"github.com/vipd/vipd/control"
	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/config"
)

// resolveLocked resolves a VIP and one of its backends in the running
// configuration.
//
// +checklocks:d.mu
func (d *Daemon) resolveLocked(vipName, backend string) (*config.VIP, *config.Backend, error) {
	v, err := ResolveVIP(d.cfg, vipName)
	if err != nil {
		return nil, nil, err
	}
	b, err := ResolveBackend(v, backend)
	if err != nil {
		return nil, nil, err
	}
	return v, b, nil
}

// SetDrain implements admin.Provider: a drained backend keeps its flows
// and takes no new ones, until undrained. Drains are run-time overrides
// (overrides.go): kept in the state file across restarts, and across
// reloads while the file has the backend. It returns once the state file
// holds the change (or its write failed, or takes longer than
// stateWaitRequest), waiting for the disk without d.mu.
func (d *Daemon) SetDrain(vipName, backend string, drain bool, reason string) error {
	d.mu.Lock()
	saved, err := d.setDrainLocked(vipName, backend, drain, reason)
	d.mu.Unlock()
	if saved != 0 {
		d.stateW.wait(saved, stateWaitRequest) // a failure is the writer's to log
	}
	return err
}

// setDrainLocked is SetDrain under d.mu; saved is the state it queued for
// the state file (0: none).
//
// +checklocks:d.mu
func (d *Daemon) setDrainLocked(vipName, backend string, drain bool, reason string) (saved uint64, err error) {
	if !d.servingLocked() {
		return 0, ErrNotRunning
	}
	v, b, err := d.resolveLocked(vipName, backend)
	if err != nil {
		return 0, err
	}
	ref := d.reg.Ref(control.BackendKey(v, b))
	was, wasWhy := d.drains[ref], d.drainWhy[ref]
	if drain {
		d.drains[ref], d.drainWhy[ref] = true, reason
	} else {
		delete(d.drains, ref)
		delete(d.drainWhy, ref)
	}
	d.markRefLocked(ref)
	if err := d.publishLocked("drain"); err != nil {
		// Not done: the caller is told so, and a later publish must not
		// apply it behind the operator's back.
		if was {
			d.drains[ref], d.drainWhy[ref] = true, wasWhy
		} else {
			delete(d.drains, ref)
			delete(d.drainWhy, ref)
		}
		d.markRefLocked(ref)
		return 0, err
	}
	d.log.Info("backend drain changed", "vip", v.Name, "backend", backendLabel(b), "drain", drain)
	what := "drained"
	if !drain {
		what = "undrained"
	}
	d.event(api.Event{Kind: api.EventDrain, VIP: v.Name, Backend: backendLabel(b), What: what, Reason: reason})
	if was != drain || drain && reason != wasWhy {
		saved, _ = d.saveStateLocked() // a failure is logged and counted
	}
	return saved, nil
}
