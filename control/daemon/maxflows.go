package daemon

import (
	"context"
	"fmt"

	"github.com/vipd/vipd/control"
	"github.com/vipd/vipd/control/admin/api"
)

// max_flows ([[vip.backend]] max_flows, ipvsadm's upper threshold): once
// a second the daemon counts each limited backend's flows (the flow walk
// /v1/state uses, at most a second old) and a backend at its limit takes
// no new flows — it counts as draining, keeping its own — until it holds
// fewer than 3/4 of it, as IPVS does without a lower threshold. A burst
// may pass the limit by up to a second of new flows: the check is the
// control plane's, not the packet path's.

// maxFlowsRound counts the flows of the backends with max_flows and
// updates which are full, publishing a change.
func (d *Daemon) maxFlowsRound(ctx context.Context) {
	d.mu.Lock()
	limits := map[uint32]int{}
	for i := range d.cfg.VIPs {
		v := &d.cfg.VIPs[i]
		for j := range v.Backends {
			if n := v.Backends[j].MaxFlows; n > 0 {
				limits[d.reg.Ref(control.BackendKey(v, &v.Backends[j]))] = n
			}
		}
	}
	cache, running := d.flows, d.phase == phaseRunning
	d.mu.Unlock()
	var flows map[uint32]int
	if len(limits) > 0 && running && cache != nil {
		var err error
		if flows, err = cache.get(ctx); err != nil {
			return // the next round tries again
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.full == nil {
		d.full = map[uint32]int{}
	}
	changed := false
	for ref := range d.full {
		if limits[ref] == 0 { // no longer limited (a reload)
			delete(d.full, ref)
			d.markRefLocked(ref)
			changed = true
		}
	}
	if flows == nil {
		if changed {
			d.requestPublishLocked()
		}
		return
	}
	for ref, limit := range limits {
		n := flows[ref]
		switch full := d.full[ref] > 0; {
		case !full && n >= limit:
			d.full[ref] = limit
			vip, be := d.refNamesLocked(ref)
			d.log.Warn("backend at max_flows: no new flows", "vip", vip, "backend", be, "flows", n, "max_flows", limit)
			d.event(api.Event{Kind: api.EventMaxFlows, VIP: vip, Backend: be, What: fmt.Sprintf("at max_flows (%d of %d): no new flows", n, limit)})
		case full && n < limit*3/4:
			delete(d.full, ref)
			vip, be := d.refNamesLocked(ref)
			d.log.Info("backend under 3/4 of max_flows: takes new flows again", "vip", vip, "backend", be, "flows", n, "max_flows", limit)
			d.event(api.Event{Kind: api.EventMaxFlows, VIP: vip, Backend: be, What: fmt.Sprintf("under 3/4 of max_flows (%d of %d): takes new flows again", n, limit)})
		default:
			continue
		}
		d.markRefLocked(ref)
		changed = true
	}
	if changed {
		d.requestPublishLocked()
	}
}
