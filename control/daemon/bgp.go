package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/vipd/vipd/control/admin"
	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/bgp"
	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/dataplane"
)

// boxState is the BGP side of the daemon: the speaker, and the box-wide
// lame duck. Every field is guarded by Daemon.mu.
type boxState struct {
	speaker *bgp.Speaker
	// draining: drain-box (or a stop) withdrew everything; the box
	// forwards until lingerUntil, then is drained.
	draining    bool
	lingerUntil time.Time
	// stopping: the lame duck is a stop's (SIGTERM with drain_on_stop),
	// which waits for drained: it cannot be undone.
	stopping bool
	// drained is closed when the linger is over (made by DrainBox).
	drained     chan struct{}
	lingerTimer *time.Timer
	// announce is each announced VIP's state by name, for State: true
	// when its route is wanted, with the reason when not.
	announce map[string]announceState
	// nextHop4 and nextHop6 are the ingress interface's addresses, the
	// routes' next hops: clients' packets arrive there.
	nextHop4, nextHop6 netip.Addr
	routerID           netip.Addr
	// stalled lists the workers (by queue) that make no progress
	// (watchStalls): while any does, every route is withdrawn and vipd is
	// not ready.
	stalled []int
}

type announceState struct {
	on  bool
	why string // why it is withdrawn
}

// startBGP starts the speaker when the configuration has [bgp]. The router
// ID defaults to an IPv4 address of the egress interface.
func (d *Daemon) startBGP(ctx context.Context, cfg *config.Config) error {
	if cfg.BGP == nil {
		return nil
	}
	host := d.opts.Platform.Host()
	port := dataplane.PortIngress
	if cfg.Dataplane.TwoArmed() {
		port = dataplane.PortEgress
	}
	bc := bgp.ConfigFrom(cfg.BGP, host.Addr4[port])
	bc.OnSession = d.bgpSessionEvent
	sp := bgp.New(bc, d.log)
	if err := sp.Start(ctx); err != nil {
		return err
	}
	d.mu.Lock()
	d.box.speaker, d.box.routerID = sp, bc.RouterID
	d.mu.Unlock()
	d.log.Info("BGP speaker started", "asn", bc.ASN, "router_id", bc.RouterID, "peers", len(bc.Peers),
		"hold_time", bc.HoldTime, "graceful_restart", bc.RestartTime)
	return nil
}

// stopBGP stops the speaker as vipd stops. After a lame duck everything is
// withdrawn already; otherwise, on a clean stop (graceful) with graceful
// restart configured, the sessions close without a NOTIFICATION so that
// the routers keep the routes for the restart time (vipd restarting).
// When vipd fails (a worker or the platform gave up: graceful false), and
// without graceful restart, every session ends with a CEASE and the
// routers withdraw the routes at once: a router that kept them would send
// clients to a box that forwards nothing for the whole restart time.
func (d *Daemon) stopBGP(graceful bool) {
	d.mu.Lock()
	sp := d.box.speaker
	graceful = graceful && !d.box.draining
	if d.box.lingerTimer != nil {
		d.box.lingerTimer.Stop()
	}
	d.mu.Unlock()
	if sp != nil {
		sp.Stop(graceful)
	}
}

// updateRoutesLocked hands the speaker the routes the box should announce
// now: an announced VIP's host route while the workers run and make
// progress, the box is not lame-ducked, and the VIP has at least
// min_healthy backends up. VIPs that share an address share its route: it
// is announced while any of them qualifies, with the attributes of the
// first such VIP in the file.
//
// Before the workers run it only records why each VIP is withdrawn: the
// speaker gets its first set, and adds its peers (bgp.Speaker.Start), only
// once the box forwards. A set handed over during the start — by a host
// change or a health report while the start waits for the next hops —
// would be empty, and a session that came up with it would send the
// routers an empty table and End-of-RIB: after a graceful restart they
// drop the routes they kept for vipd (TestBGPNoSessionBeforeRunning,
// e2e TestBGPRestartUnresolved).
//
// +checklocks:d.mu
func (d *Daemon) updateRoutesLocked() {
	sp := d.box.speaker
	if sp == nil {
		return
	}
	announce := make(map[string]announceState, len(d.cfg.VIPs))
	var routes []bgp.Route
	seen := map[netip.Addr]bool{}
	for i := range d.cfg.VIPs {
		v := &d.cfg.VIPs[i]
		if !v.Announced() {
			continue
		}
		st := announceState{on: true}
		up := d.backendsUpLocked(i)
		switch {
		case d.phase != phaseRunning:
			st = announceState{why: "the workers are not running"}
		case len(d.box.stalled) > 0:
			st = announceState{why: fmt.Sprintf("workers %v make no progress", d.box.stalled)}
		case d.box.draining:
			st = announceState{why: "the box is drained (drain-box)"}
		case d.role.standby:
			st = announceState{why: "the box is standby (vipd standby, or neighbor_role)"}
		case up < v.MinHealthy:
			st = announceState{why: fmt.Sprintf("%d of %d backends up, min_healthy %d", up, len(v.Backends), v.MinHealthy)}
		}
		if old, ok := d.box.announce[v.Name]; !ok || old != st {
			if st.on {
				d.log.Info("VIP announced over BGP", "vip", v.Name)
			} else if ok || d.phase == phaseRunning {
				d.log.Info("VIP withdrawn from BGP", "vip", v.Name, "why", st.why)
			}
		}
		announce[v.Name] = st
		if !st.on || seen[v.Address] {
			continue
		}
		seen[v.Address] = true
		r := bgp.Route{Prefix: netip.PrefixFrom(v.Address, v.Address.BitLen()), MED: v.MED}
		// An explicit next hop: GoBGP's own choice, the session's local
		// address, comes out IPv4-mapped on an IPv4 session and is then
		// sent as an IPv6 next hop that routers reject ("missing next
		// hop" in BIRD).
		r.NextHop = d.box.nextHop4
		if v.Address.Is6() {
			r.NextHop = d.box.nextHop6
		}
		for _, c := range v.Communities {
			n, _ := config.ParseCommunity(c) // validated by config.Load
			r.Communities = append(r.Communities, n)
		}
		routes = append(routes, r)
	}
	d.box.announce = announce
	if d.phase < phaseRunning {
		return
	}
	sp.Set(routes)
}

// backendsUpLocked counts the backends of VIP i that take new flows by
// their own right: enabled, not draining, and not down by their health
// check (a backend not checked yet counts as up, as in the dataplane).
// on_all_down = "ignore_health" does not make a down backend count.
//
// +checklocks:d.mu
func (d *Daemon) backendsUpLocked(i int) int {
	if d.spec == nil || i >= len(d.spec.VIPs) {
		return 0
	}
	v := &d.cfg.VIPs[i]
	up := 0
	for j, b := range d.spec.VIPs[i].Backends {
		if j >= len(v.Backends) || v.Backends[j].State != config.StateActive {
			continue
		}
		if st := d.statusLocked(b.Ref); !st.Down && !st.Draining {
			up++
		}
	}
	return up
}

// DrainBox implements admin.BoxDrainer: it withdraws every route (undo:
// announces again) and reports drained once the linger time is over; the
// box forwards all the while.
func (d *Daemon) DrainBox(undo bool) (*api.BoxDrainAnswer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.box.speaker == nil {
		return nil, api.ErrNoBGP
	}
	if !d.servingLocked() {
		return nil, ErrNotRunning
	}
	switch {
	case undo && d.box.stopping:
		return nil, ErrStopping
	case undo && d.box.draining:
		d.box.draining = false
		if d.box.lingerTimer != nil {
			d.box.lingerTimer.Stop()
		}
		d.log.Info("box drain undone: announcing again")
	case !undo && !d.box.draining:
		d.startLameDuckLocked("drain-box")
	}
	d.updateRoutesLocked()
	return d.boxAnswerLocked(), nil
}

// startLameDuckLocked withdraws everything and starts the linger.
//
// +checklocks:d.mu
func (d *Daemon) startLameDuckLocked(why string) {
	linger := d.cfg.BGP.Linger.D()
	d.box.draining = true
	d.box.lingerUntil = time.Now().Add(linger)
	drained := make(chan struct{})
	d.box.drained = drained
	d.box.lingerTimer = time.AfterFunc(linger, func() {
		d.mu.Lock()
		if d.box.drained == drained && d.box.draining {
			d.log.Info("box drained: routers had the linger time to converge", "linger", linger)
		}
		d.mu.Unlock()
		close(drained)
	})
	d.log.Info("box lame duck: every VIP withdrawn, forwarding for the linger time", "why", why, "linger", linger)
}

// +checklocks:d.mu
func (d *Daemon) boxAnswerLocked() *api.BoxDrainAnswer {
	a := &api.BoxDrainAnswer{Box: d.boxNameLocked()}
	if d.box.draining {
		a.LingerUntil = d.box.lingerUntil
	}
	return a
}

// +checklocks:d.mu
func (d *Daemon) boxNameLocked() string {
	switch {
	case !d.box.draining:
		return api.BoxAnnouncing
	case time.Now().Before(d.box.lingerUntil):
		return api.BoxDraining
	}
	return api.BoxDrained
}

// LameDuck withdraws everything (if [bgp] is configured and drain_on_stop
// is set) and returns a channel closed when the linger is over; nil when
// there is nothing to wait for. SIGTERM calls it before stopping.
func (d *Daemon) LameDuck() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.box.speaker == nil || !d.cfg.BGP.DrainOnStop || !d.servingLocked() {
		return nil
	}
	if !d.box.draining {
		d.startLameDuckLocked("stopping")
		d.updateRoutesLocked()
	}
	d.box.stopping = true
	return d.box.drained
}

// bgpStateLocked is the speaker's part of State.
//
// +checklocks:d.mu
func (d *Daemon) bgpStateLocked(peers []bgp.PeerStatus) *api.BGPState {
	if d.box.speaker == nil {
		return nil
	}
	st := &api.BGPState{ASN: d.cfg.BGP.ASN, RouterID: d.box.routerID.String(), Box: d.boxNameLocked()}
	if d.box.draining {
		st.LingerUntil = d.box.lingerUntil
	}
	for _, p := range peers {
		st.Peers = append(st.Peers, api.BGPPeerState{
			Address: p.Address.String(), ASN: p.ASN, State: p.State, Since: p.Since, LastError: p.LastError,
		})
	}
	return st
}

// announceNameLocked is a VIP's announcement in State.
//
// +checklocks:d.mu
func (d *Daemon) announceNameLocked(v *config.VIP) string {
	if d.box.speaker == nil {
		return ""
	}
	if !v.Announced() {
		return "off"
	}
	st, ok := d.box.announce[v.Name]
	switch {
	case !ok:
		return "withdrawn: not compiled yet"
	case st.on:
		return "announced"
	}
	return "withdrawn: " + st.why
}

// bgpMetrics is the speaker's part of Metrics.
func (d *Daemon) bgpMetrics() *admin.BGPMetrics {
	d.mu.Lock()
	sp := d.box.speaker
	if sp == nil {
		d.mu.Unlock()
		return nil
	}
	m := &admin.BGPMetrics{VIPAnnounced: map[string]bool{}, BoxDraining: d.box.draining}
	for name, st := range d.box.announce {
		m.VIPAnnounced[name] = st.on
	}
	d.mu.Unlock()
	s := sp.Stats()
	m.Announcements, m.Withdrawals, m.Errors, m.Prefixes = s.Announcements, s.Withdrawals, s.Errors, s.Announced
	for _, p := range sp.Peers() {
		m.Peers = append(m.Peers, admin.BGPPeerMetrics{Address: p.Address.String(), State: p.State, Transitions: p.Transitions, Notifications: p.Notifications})
	}
	return m
}
