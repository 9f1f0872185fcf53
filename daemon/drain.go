package daemon

import (
	"fmt"
	"net/netip"

	"github.com/vipd/vipd/admin"
	"github.com/vipd/vipd/control"
)

// findBackend resolves a VIP name and a backend ("addr:port", or "addr")
// to the backend's reference.
//
// +checklocks:d.mu
func (d *Daemon) findBackend(vipName, backend string) (uint32, error) {
	for i := range d.cfg.VIPs {
		v := &d.cfg.VIPs[i]
		if v.Name != vipName {
			continue
		}
		for j := range v.Backends {
			b := &v.Backends[j]
			ap := netip.AddrPortFrom(b.Address, b.Port)
			if backend == ap.String() || (b.Port == 0 && backend == b.Address.String()) ||
				backend == netip.AddrPortFrom(b.Address, max(b.Port, v.Port)).String() {
				return d.reg.Ref(control.BackendKey(v, b)), nil
			}
		}
		return 0, fmt.Errorf("VIP %q has no backend %q: %w", vipName, backend, admin.ErrNotFound)
	}
	return 0, fmt.Errorf("no VIP %q: %w", vipName, admin.ErrNotFound)
}

// SetDrain implements admin.Provider: a drained backend keeps its flows
// and takes no new ones, until undrained. Drains set here last until the
// process stops; a lasting one belongs in the configuration (state =
// "draining").
func (d *Daemon) SetDrain(vipName, backend string, drain bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.servingLocked() {
		return ErrNotRunning
	}
	ref, err := d.findBackend(vipName, backend)
	if err != nil {
		return err
	}
	was := d.drains[ref]
	if drain {
		d.drains[ref] = true
	} else {
		delete(d.drains, ref)
	}
	d.markRefLocked(ref)
	if err := d.publishLocked("drain"); err != nil {
		// Not done: the caller is told so, and a later publish must not
		// apply it behind the operator's back.
		if was {
			d.drains[ref] = true
		} else {
			delete(d.drains, ref)
		}
		d.markRefLocked(ref)
		return err
	}
	d.log.Info("backend drain changed", "vip", vipName, "backend", backend, "drain", drain)
	return nil
}
