package daemon

import (
	"net/netip"
	"slices"
	"time"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/config"
)

// roleState is the box's neighbor role ([dataplane] neighbor_role, then
// vipd active / vipd standby). A standby box forwards whatever reaches it
// but answers no ARP/NDP for its VIPs and announces none, gratuitously or
// over BGP: on one segment, keepalived (VRRP) decides which box is active
// and its notify script switches vipd. Becoming active announces every VIP
// address at once (the ARP/NDP responder's gratuitous ARPs and unsolicited
// NAs, a few, spaced), so that the segment's router and hosts move to this
// box without waiting for their neighbor entries to age.
type roleState struct {
	standby bool
	since   time.Time
	changes uint64
}

func (r roleState) name() string {
	if r.standby {
		return api.RoleStandby
	}
	return api.RoleActive
}

// newRole is the role a box starts in.
func newRole(cfg *config.Config) roleState {
	return roleState{standby: cfg.Dataplane.NeighborRole == config.RoleStandby, since: time.Now()}
}

// neighborVIPsLocked is what the platform must answer ARP/NDP for: the
// configuration's neighbor VIPs, none while standby.
//
// +checklocks:d.mu
func (d *Daemon) neighborVIPsLocked() []netip.Addr {
	if d.role.standby {
		return nil
	}
	return neighborVIPs(d.cfg)
}

// applyNeighborsLocked hands the platform the addresses to answer for,
// when they changed; the responder announces the new ones.
//
// +checklocks:d.mu
func (d *Daemon) applyNeighborsLocked() {
	if nv := d.neighborVIPsLocked(); !slices.Equal(nv, d.neighborVIPs) {
		d.opts.Platform.SetNeighborVIPs(nv)
		d.neighborVIPs = nv
	}
}

// SetRole implements admin.RoleSetter: vipd active, vipd standby. Asking
// for the role the box has changes nothing and says so.
func (d *Daemon) SetRole(role string) (*api.RoleAnswer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.servingLocked() {
		return nil, ErrNotRunning
	}
	prev := d.role.name()
	if standby := role == api.RoleStandby; standby != d.role.standby {
		d.role = roleState{standby: standby, since: time.Now(), changes: d.role.changes + 1}
		d.applyNeighborsLocked()
		d.updateRoutesLocked()
		d.log.Warn("neighbor role changed", "role", role, "previous", prev, "neighbor_vips", len(d.neighborVIPs))
		d.event(api.Event{Kind: api.EventRole, What: prev + " → " + role})
	}
	ans := &api.RoleAnswer{Role: d.role.name(), Previous: prev, Since: d.role.since, Neighbors: len(d.neighborVIPs)}
	if d.box.speaker != nil {
		ans.Routes = "every VIP announced as its health allows"
		if d.role.standby {
			ans.Routes = "every VIP withdrawn (standby)"
		}
	}
	return ans, nil
}
