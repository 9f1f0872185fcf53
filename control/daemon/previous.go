package daemon

import (
	"errors"
	"io/fs"
	"os"
	"time"

	"github.com/vipd/vipd/control"
	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/dataplane"
	"github.com/vipd/vipd/internal/durable"
)

// Previous-owner hints (config previous_owner): d.prev keeps each such
// VIP's configured backend set and the one before its last change
// (control.Previous). publishLocked observes every new configuration on a
// copy, gives each VIP spec its previous set while it lasts, and, once the
// snapshot is out, keeps the copy, logs the changes and writes the state
// file ([dataplane] state_file) so that a restart keeps the previous sets
// (and the run-time overrides, which share the file: overrides.go).
// A timer publishes again when the earliest previous set expires.

// loadState reads the state file: the previous backend sets and the
// run-time overrides (overrides.go). A missing file is an empty state, an
// unreadable one is logged and ignored (the previous sets start empty:
// hints only for changes from now on; no overrides).
func (d *Daemon) loadState(path string) (*control.Previous, []savedOverride) {
	if path == "" {
		return control.NewPrevious(), nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return control.NewPrevious(), nil
	}
	if err == nil {
		var p *control.Previous
		var saved []savedOverride
		if p, err = control.UnmarshalPrevious(b); err == nil {
			saved, err = unmarshalOverrides(b)
		}
		if err == nil {
			d.log.Info("previous backend sets loaded", "state_file", path, "vips", len(p.Keys()), "overrides", len(saved))
			return p, saved
		}
		// Read but not understood (corrupt, or written by a newer vipd):
		// kept aside for the operator, since the next publish writes the
		// state file anew.
		aside := path + ".unreadable"
		if rerr := os.Rename(path, aside); rerr != nil {
			d.log.Error("the unreadable state file cannot be kept aside: the next write replaces it", "state_file", path, "err", rerr)
		} else {
			d.log.Warn("the unreadable state file is kept aside", "state_file", path, "kept_as", aside)
		}
	}
	d.stateErrors.Add(1)
	d.log.Error("the state file cannot be read: previous backend sets start empty, and no run-time override is restored", "state_file", path, "err", err)
	return control.NewPrevious(), nil
}

// saveStateLocked queues the previous sets and the run-time overrides
// for the state file, as they are now, and returns the number to wait for
// (d.stateW.wait), 0 without a state file. The file is written off d.mu
// (stateWriter), atomically and durably: a new file, synced, renamed over
// the old one, and the directory synced, so that a power loss leaves the
// old file or the new one, never an empty one. A failure to write is
// logged and counted by the writer; one to marshal here, and returned as
// the write's would be.
//
// +checklocks:d.mu
func (d *Daemon) saveStateLocked() (uint64, error) {
	path := d.cfg.Dataplane.StateFile
	if path == "" {
		return 0, nil
	}
	b, err := d.prev.Marshal()
	if err == nil {
		b, err = marshalOverrides(b, d.savedOverridesLocked())
	}
	if err != nil {
		d.stateErrors.Add(1)
		d.log.Error("the state file cannot be written: a restart would forget the previous backend sets and the run-time overrides", "state_file", path, "err", err)
		return 0, err
	}
	return d.stateW.submit(path, b), nil
}

// previousFor fills vs's previous set from prev at now and returns when
// it expires (zero if it has none).
func previousFor(prev *control.Previous, v *config.VIP, vs *dataplane.VIPSpec, now time.Time) time.Time {
	var until time.Time
	vs.Previous, until = prev.For(v, now)
	vs.PreviousUDP = v.PreviousOwnerUDP && vs.Previous != nil
	return until
}

// schedulePreviousLocked arms the timer for the earliest expiry of the
// published previous sets (none: stopped).
//
// +checklocks:d.mu
func (d *Daemon) schedulePreviousLocked(next time.Time) {
	if next.Equal(d.prevNext) {
		return
	}
	d.prevNext = next
	if d.prevTimer != nil {
		d.prevTimer.Stop()
		d.prevTimer = nil
	}
	if next.IsZero() {
		return
	}
	d.prevTimer = time.AfterFunc(time.Until(next)+time.Millisecond, func() {
		if err := d.publish("previous set expired"); err != nil && !errors.Is(err, ErrNotRunning) {
			d.log.Error("publishing after a previous set expired failed", "err", err)
		}
	})
}

// writeFileDurably replaces path with b, atomically and durably
// (durable.WriteFile), readable by all as the state file has always been.
func writeFileDurably(path string, b []byte) error {
	return durable.WriteFile(path, b, 0o644)
}
