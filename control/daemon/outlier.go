package daemon

import (
	"fmt"
	"time"

	"github.com/vipd/vipd/control"
	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/health/outlier"
)

// outlierTick is how often the workers' handshake counters are read for
// passive outlier detection: the workers publish their counters every
// 100 ms, and a verdict spans seconds.
const outlierTick = time.Second

// outlierState is the daemon's part of passive outlier detection.
type outlierState struct {
	det     *outlier.Detector
	ejected map[uint32]bool // by ref: counted down in statusLocked
	// total counts ejections by backend (control.BackendKey), not by
	// ref: a ref freed by a backend goes, after the registry's hold, to
	// another, which must not inherit its predecessor's count.
	total map[string]uint64
}

// outlierRound hands the detector every watched backend's counters (the
// backends of the VIPs with [vip.outlier] enabled, not disabled by the
// configuration), applies the ejections and returns it decides, and
// forgets the ejection of a backend it no longer watches.
func (d *Daemon) outlierRound(now time.Time) {
	workers, _ := d.dataplaneOf()
	sum := sumCounters(workers)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.phase != phaseRunning {
		return
	}
	o := &d.outliers
	if o.det == nil {
		o.det, o.ejected, o.total = outlier.New(), map[uint32]bool{}, map[string]uint64{}
	}
	keys := map[uint32]string{} // of the watched backends, for the counts
	for i := range d.cfg.VIPs {
		v := &d.cfg.VIPs[i]
		if !v.Outlier.Enabled {
			continue
		}
		oc := v.Outlier
		o.det.SetConfig(v.Name, outlier.Config{
			Window: oc.Window.D(), Timeout: oc.Timeout.D(), MinHandshakes: uint64(oc.MinHandshakes),
			Ratio: oc.FailureRatio, BaseEjection: oc.BaseEjection.D(), MaxEjection: oc.MaxEjection.D(),
			MaxEjectedPercent: oc.MaxEjectedPercent,
		})
		for j := range v.Backends {
			b := &v.Backends[j]
			if b.State == config.StateDisabled {
				continue
			}
			key := control.BackendKey(v, b)
			ref := d.reg.Ref(key)
			keys[ref] = key
			var c outlier.Counts
			if int(ref) < len(sum.Backends) {
				f := sum.Backends[ref]
				c = outlier.Counts{Handshakes: f.Handshakes, Answered: f.Answered}
			}
			o.det.Observe(now, v.Name, ref, c)
		}
	}
	if len(o.total) > 0 {
		d.pruneEjectionsLocked()
	}
	// Evaluate calls the func before it returns, so under d.mu; checklocks
	// checks a func literal that is not called where it is made as if it
	// ran without locks.
	changes := o.det.Evaluate(now, func(ref uint32) bool {
		return !d.health[ref].Down // +checklocksignore: see above
	})
	for _, c := range changes {
		if c.Ejected {
			o.ejected[c.Ref] = true
			if key, ok := keys[c.Ref]; ok {
				o.total[key]++
			}
			d.log.Warn("backend ejected: its clients' handshakes fail", "vip", c.VIP, "ref", c.Ref,
				"failed", c.Failed, "tried", c.Tried, "for", c.For)
			d.event(api.Event{Kind: api.EventEjection, VIP: c.VIP, Backend: d.refLabelLocked(c.Ref),
				What: fmt.Sprintf("ejected for %v: %d of %d handshakes failed", c.For, c.Failed, c.Tried)})
		} else {
			delete(o.ejected, c.Ref)
			d.log.Info("ejected backend returns: its time is up and its check passes", "vip", c.VIP, "ref", c.Ref)
			d.event(api.Event{Kind: api.EventEjection, VIP: c.VIP, Backend: d.refLabelLocked(c.Ref), What: "returned: its time is up and its check passes"})
		}
		d.markRefLocked(c.Ref)
	}
	for ref := range o.ejected {
		if !o.det.Ejected(ref) { // no longer watched: a reload disabled it or its VIP's detection
			delete(o.ejected, ref)
			d.markRefLocked(ref)
			changes = append(changes, outlier.Change{Ref: ref})
		}
	}
	if len(changes) > 0 {
		d.requestPublishLocked()
	}
}

// pruneEjectionsLocked forgets the ejection counts of backends that are no
// longer configured, so that churn (backends coming and going by address)
// does not grow the map; one that comes back starts at zero, as its metric
// series does.
//
// +checklocks:d.mu
func (d *Daemon) pruneEjectionsLocked() {
	keep := make(map[string]bool, len(d.outliers.total))
	for i := range d.cfg.VIPs {
		v := &d.cfg.VIPs[i]
		for j := range v.Backends {
			if key := control.BackendKey(v, &v.Backends[j]); d.outliers.total[key] > 0 {
				keep[key] = true
			}
		}
	}
	for key := range d.outliers.total {
		if !keep[key] {
			delete(d.outliers.total, key)
		}
	}
}
