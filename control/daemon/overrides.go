package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/vipd/vipd/control"
	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/config"
)

// Run-time overrides: what the operator changes over the admin socket
// without editing the file (vipd weight, vipd disable and vipd enable;
// and vipd drain, whose state lives in d.drains). They apply on top of
// the configuration when the spec is compiled (statusLocked, then
// control.Status), as though the file said them. They last until undone,
// across reloads while the file has the backend, and across restarts in
// the state file. A reload that changes what an override replaces keeps
// the override and logs so at WARN; one that removes the backend drops
// its overrides, also at WARN.

// override is one backend's weight and disable overrides. The zero value
// is none.
type override struct {
	weight     uint32 // in place of the file's, when reweighted; 0: no new flows
	reweighted bool
	disabled   bool
	since      time.Time // when it last changed
	reason     string    // why, as the operator said (-reason)
}

func (o override) active() bool { return o.reweighted || o.disabled }

// apply puts o into a backend's status. A weight of 0 takes no new flows
// and keeps the flows there are: a drain.
func (o override) apply(st *control.Status) {
	st.Disabled = st.Disabled || o.disabled
	if o.reweighted {
		if o.weight == 0 {
			st.Draining = true
		} else {
			st.Weight = o.weight
		}
	}
}

// admin returns o as the admin API shows it; nil for none.
func (o override) admin() *api.Override {
	if !o.active() {
		return nil
	}
	ao := &api.Override{Disabled: o.disabled, Since: o.since, Reason: o.reason}
	if o.reweighted {
		w := o.weight
		ao.Weight = &w
	}
	return ao
}

// attrs describes o for the log.
func (o override) attrs() []any {
	var a []any
	if o.reweighted {
		a = append(a, "override_weight", o.weight)
	}
	if o.disabled {
		a = append(a, "override", "disabled")
	}
	return a
}

// SetOverride implements admin.Overrider. It answers once the change is
// in force and the state file holds it (or its write failed, or takes
// longer than stateWaitRequest), waiting for the disk without d.mu.
func (d *Daemon) SetOverride(req api.OverrideRequest) (*api.OverrideAnswer, error) {
	if req.Weight != nil && *req.Weight > config.MaxWeight {
		return nil, fmt.Errorf("weight %d: want 0 to %d (0 takes no new flows): %w", *req.Weight, config.MaxWeight, api.ErrInvalid)
	}
	d.mu.Lock()
	ans, saved, err := d.setOverrideLocked(req)
	d.mu.Unlock()
	if saved == 0 {
		return ans, err
	}
	switch err := d.stateW.wait(saved, stateWaitRequest); {
	case errors.Is(err, errStateSlow):
		ans.Note = fmt.Sprintf("in force; the state file is still being written after %v (a slow disk): a restart before it is would forget it", stateWaitRequest)
	case err != nil:
		ans.Note = fmt.Sprintf("in force, but the state file cannot be written (%v): a restart would forget it", err)
	}
	return ans, nil
}

// setOverrideLocked is SetOverride under d.mu; saved is the state it
// queued for the state file (0: none).
//
// +checklocks:d.mu
func (d *Daemon) setOverrideLocked(req api.OverrideRequest) (ans *api.OverrideAnswer, saved uint64, err error) {
	if !d.servingLocked() {
		return nil, 0, ErrNotRunning
	}
	v, b, err := d.resolveLocked(req.VIP, req.Backend)
	if err != nil {
		return nil, 0, err
	}
	ref := d.reg.Ref(control.BackendKey(v, b))
	was := d.overrides[ref]
	o := was
	ans = &api.OverrideAnswer{VIP: v.Name, Backend: backendLabel(b), FileWeight: b.Weight, FileState: string(b.State)}
	switch {
	case req.Weight != nil:
		o.weight, o.reweighted = *req.Weight, true
	case req.ResetWeight:
		if !o.reweighted {
			ans.Note = "it had no weight override: the file's weight was in force"
		}
		o.weight, o.reweighted = 0, false
	case *req.Disabled:
		o.disabled = true
	default:
		switch {
		case !o.disabled && b.State == config.StateDisabled:
			return nil, 0, fmt.Errorf("VIP %q: backend %s is disabled by the file (state = \"disabled\"), not by vipd disable: set its state in the file and reload: %w",
				v.Name, backendLabel(b), api.ErrConflict)
		case !o.disabled:
			ans.Note = "it was not disabled by vipd disable"
		case b.State == config.StateDisabled:
			ans.Note = "the file disables it too (state = \"disabled\"): it stays out until the file says otherwise"
		}
		o.disabled = false
	}
	if o.weight != was.weight || o.reweighted != was.reweighted || o.disabled != was.disabled {
		o.since, o.reason = time.Now(), req.Reason
		d.putOverrideLocked(ref, o)
		d.markRefLocked(ref)
		if err := d.publishLocked("override"); err != nil {
			// Not done: a later publish must not apply it behind the
			// operator's back.
			d.putOverrideLocked(ref, was)
			d.markRefLocked(ref)
			return nil, 0, err
		}
		d.log.Info("run-time override changed", append([]any{"vip", v.Name, "backend", backendLabel(b),
			"file_weight", b.Weight, "file_state", b.State, "in_force", o.active()}, o.attrs()...)...)
		d.event(api.Event{Kind: api.EventOverride, VIP: v.Name, Backend: backendLabel(b), What: overrideWhat(&req), Reason: req.Reason})
		var err error
		switch saved, err = d.saveStateLocked(); {
		case err != nil:
			ans.Note = fmt.Sprintf("in force, but the state file cannot be written (%v): a restart would forget it", err)
		case d.cfg.Dataplane.StateFile == "":
			ans.Note = "in force until vipd stops: without [dataplane] state_file a restart forgets it"
		}
	} else if ans.Note == "" {
		ans.Note = "no change: it was already so"
	}
	ans.Override = d.overrides[ref].admin()
	return ans, saved, nil
}

// putOverrideLocked sets ref's override, or removes it when o is none.
//
// +checklocks:d.mu
func (d *Daemon) putOverrideLocked(ref uint32, o override) {
	if o.active() {
		d.overrides[ref] = o
	} else {
		delete(d.overrides, ref)
	}
}

// reconcileOverridesLocked keeps the overrides and drains of backends
// that the new configuration cfg still has, and says at WARN where the
// file now says something else than it did under them (the override
// stays in force: never a silent fight with the file). Those of backends
// it removes are dropped, at WARN too: their references may come to
// other backends (control.Registry). Reload calls it once cfg is
// published, before the registry forgets old's backends.
//
// +checklocks:d.mu
func (d *Daemon) reconcileOverridesLocked(old, cfg *config.Config) {
	if len(d.overrides) == 0 && len(d.drains) == 0 {
		return
	}
	before, after := d.overriddenLocked(old), d.overriddenLocked(cfg)
	dirty := false
	for ref, ob := range before {
		o, drained := d.overrides[ref], d.drains[ref]
		nb, ok := after[ref]
		kv := []any{"vip", ob.v.Name, "backend", backendLabel(ob.b)}
		if !ok {
			if drained {
				kv = append(kv, "drained", true)
			}
			d.log.Warn("the file no longer has a backend with a run-time override: the override is dropped", append(kv, o.attrs()...)...)
			delete(d.overrides, ref)
			dirty = true
			continue
		}
		if o.reweighted && ob.b.Weight != nb.b.Weight {
			d.log.Warn("the file changes the weight of a backend with a run-time weight override: the override stays in force (vipd weight -reset undoes it)",
				append(kv, "file_weight_was", ob.b.Weight, "file_weight", nb.b.Weight, "override_weight", o.weight)...)
		}
		if (o.disabled || drained) && ob.b.State != nb.b.State {
			undo, what := "vipd enable", "disabled"
			if !o.disabled {
				undo, what = "vipd drain -undo", "drained"
			}
			d.log.Warn("the file changes the state of a backend with a run-time override: the override stays in force ("+undo+" undoes it)",
				append(kv, "file_state_was", ob.b.State, "file_state", nb.b.State, "override", what)...)
		}
	}
	if dirty {
		d.saveStateLocked()
	}
}

// backendAt is a backend of a configuration, with its VIP.
type backendAt struct {
	v *config.VIP
	b *config.Backend
}

// overriddenLocked finds, in cfg, the backends that have an override or a
// drain, by reference. Their keys must be bound (cfg is running, or ran
// until just now).
//
// +checklocks:d.mu
func (d *Daemon) overriddenLocked(cfg *config.Config) map[uint32]backendAt {
	out := map[uint32]backendAt{}
	for i := range cfg.VIPs {
		v := &cfg.VIPs[i]
		for j := range v.Backends {
			ref := d.reg.Ref(control.BackendKey(v, &v.Backends[j]))
			if d.overrides[ref].active() || d.drains[ref] {
				out[ref] = backendAt{v, &v.Backends[j]}
			}
		}
	}
	return out
}

// savedOverride is one backend's overrides in the state file. The VIP is
// named by its key (ADDR:PORT/PROTO), which survives a rename.
type savedOverride struct {
	VIP      string         `json:"vip"`
	Backend  netip.AddrPort `json:"backend"`
	Weight   *uint32        `json:"weight,omitempty"`
	Disabled bool           `json:"disabled,omitempty"`
	Drained  bool           `json:"drained,omitempty"`
	Since    time.Time      `json:"since,omitzero"`
	Reason   string         `json:"reason,omitempty"`
	// DrainReason is the drain's (Reason is the weight or disable
	// override's).
	DrainReason string `json:"drain_reason,omitempty"`
}

// savedOverridesLocked lists the overrides and drains of the running
// configuration's backends, in the file's order.
//
// +checklocks:d.mu
func (d *Daemon) savedOverridesLocked() []savedOverride {
	if len(d.overrides) == 0 && len(d.drains) == 0 {
		return nil
	}
	var out []savedOverride
	for i := range d.cfg.VIPs {
		v := &d.cfg.VIPs[i]
		for j := range v.Backends {
			b := &v.Backends[j]
			ref := d.reg.Ref(control.BackendKey(v, b))
			o, drained := d.overrides[ref], d.drains[ref]
			if !o.active() && !drained {
				continue
			}
			s := savedOverride{VIP: v.Key(), Backend: netip.AddrPortFrom(b.Address, b.Port),
				Disabled: o.disabled, Drained: drained, Since: o.since, Reason: o.reason, DrainReason: d.drainWhy[ref]}
			if o.reweighted {
				w := o.weight
				s.Weight = &w
			}
			out = append(out, s)
		}
	}
	return out
}

// The state file keeps its version 1 layout (control.Previous) with one
// more key, "overrides", left out when there are none: a vipd that does
// not know the key reads the file as before (and forgets the overrides
// when it writes it).

// marshalOverrides adds saved to the state file b as written by
// control.Previous.Marshal.
func marshalOverrides(b []byte, saved []savedOverride) ([]byte, error) {
	if len(saved) == 0 {
		return b, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(saved)
	if err != nil {
		return nil, err
	}
	m["overrides"] = raw
	return json.MarshalIndent(m, "", "  ")
}

// unmarshalOverrides reads the overrides of the state file b.
func unmarshalOverrides(b []byte) ([]savedOverride, error) {
	var f struct {
		Overrides []savedOverride `json:"overrides"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("overrides: %w", err)
	}
	return f.Overrides, nil
}

// restoreOverridesLocked puts the overrides of the state file back on
// the backends of the configuration vipd starts with, saying each at WARN
// (they are in force over the file); those whose backend the file no
// longer has are dropped, at WARN too.
//
// +checklocks:d.mu
func (d *Daemon) restoreOverridesLocked(saved []savedOverride) {
	dropped := false
	for _, s := range saved {
		v, b := findSaved(d.cfg, s)
		if b == nil {
			d.log.Warn("the file no longer has a backend with a run-time override from the state file: the override is dropped",
				"vip", s.VIP, "backend", s.Backend.String())
			dropped = true
			continue
		}
		ref := d.reg.Ref(control.BackendKey(v, b))
		o := override{disabled: s.Disabled, since: s.Since, reason: s.Reason}
		if s.Weight != nil {
			o.weight, o.reweighted = min(*s.Weight, config.MaxWeight), true
		}
		d.putOverrideLocked(ref, o)
		if s.Drained {
			d.drains[ref], d.drainWhy[ref] = true, s.DrainReason
		}
		if o.active() || s.Drained {
			d.log.Warn("a run-time override from the state file is in force over the file", append([]any{"vip", v.Name, "backend", backendLabel(b),
				"file_weight", b.Weight, "file_state", b.State, "drained", s.Drained}, o.attrs()...)...)
		}
	}
	if dropped {
		d.saveStateLocked()
	}
}

// findSaved finds the backend s names in cfg.
func findSaved(cfg *config.Config, s savedOverride) (*config.VIP, *config.Backend) {
	for i := range cfg.VIPs {
		v := &cfg.VIPs[i]
		if v.Key() != s.VIP {
			continue
		}
		for j := range v.Backends {
			b := &v.Backends[j]
			if b.Address == s.Backend.Addr() && b.Port == s.Backend.Port() {
				return v, b
			}
		}
	}
	return nil, nil
}
