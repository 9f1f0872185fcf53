package daemon

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/vipd/vipd/conntrack"
	"github.com/vipd/vipd/control"
	"github.com/vipd/vipd/control/admin"
	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/bgp"
	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/dataplane"
	"github.com/vipd/vipd/health"
)

var forwardingNames = map[dataplane.BackendState]string{
	dataplane.BackendUp: "up", dataplane.BackendDraining: "draining", dataplane.BackendDown: "down",
}

// State implements admin.Provider. It answers ErrNotRunning until the
// workers run: they count the flows, at most once per flowsTTL however
// often State is asked (flowCache).
func (d *Daemon) State(ctx context.Context) (*api.State, error) {
	d.mu.Lock()
	running := d.phase == phaseRunning
	workers, ct, cache := d.workers, d.ct, d.flows
	d.mu.Unlock()
	if !running {
		return nil, ErrNotRunning
	}
	// The flow counts are up to flowsTTL old; the rest is current.
	flows, err := cache.get(ctx)
	if err != nil {
		return nil, err
	}
	sum := sumCounters(workers)
	d.mu.Lock()
	sp := d.box.speaker
	d.mu.Unlock()
	var peers []bgp.PeerStatus
	if sp != nil {
		peers = sp.Peers() // asks GoBGP: not under mu
	}
	differs, cfgErr := d.cfgFile.status() // reads the file: not under mu
	d.mu.Lock()
	defer d.mu.Unlock()
	var records map[uint32]health.Record
	if d.checks != nil {
		records = d.checks.Records() // mu before the manager's lock, as Set
	}
	st := &api.State{
		Version: d.opts.Version, ConfigFile: d.opts.ConfigPath, LoadedAt: d.loadedAt,
		Generation: d.gen, IO: string(d.cfg.Dataplane.IO), Workers: len(workers), FastPath: d.fastOn.Load(),
		Conntrack: admin.WireConntrack(ct.Stats()), BGP: d.bgpStateLocked(peers),
	}
	st.ConfigDiffers, st.ConfigError = differs, cfgErr
	st.Role, st.RoleSince = d.role.name(), d.role.since
	st.Fleet = d.fleetStateLocked(time.Now())
	for i := range d.cfg.VIPs {
		v := &d.cfg.VIPs[i]
		vs := api.VIPState{
			Name: v.Name, Address: v.Address.String(), Port: v.Port, Protocol: string(v.Protocol),
			Mode: string(v.Mode), FlowHash: string(v.FlowHash), TableSize: v.TableSize, Scheduler: v.Scheduler,
			AllDown: d.allDown[v.Name], OnAllDown: string(v.HealthCheck.OnAllDown),
			Announce: d.announceNameLocked(v), BackendsUp: d.backendsUpLocked(i), MinHealthy: v.MinHealthy,
		}
		nat := v.Mode == config.ModeNAT // vipd sees its replies
		vs.PreviousUntil = d.prev.Until(v, time.Now())
		vs.QUICLB = quicState(v.QUICLB)
		var spec *dataplane.VIPSpec
		if d.spec != nil && i < len(d.spec.VIPs) {
			spec = &d.spec.VIPs[i]
		}
		if id, err := d.reg.VIPID(control.VIPKey(v)); err == nil && int(id) < len(sum.VIPs) {
			f := sum.VIPs[id]
			vs.Packets, vs.Bytes, vs.NewFlows = f.Packets, f.Bytes, f.NewFlows
			vs.Rates = d.rates.vip(id)
			if nat {
				vs.OutPackets, vs.OutBytes = &f.OutPackets, &f.OutBytes
			} else {
				vs.Rates = withoutOut(vs.Rates)
			}
		}
		for j := range v.Backends {
			b := &v.Backends[j]
			ref := d.reg.Ref(control.BackendKey(v, b))
			bs := api.BackendState{
				Address: b.Address.String(), Port: b.Port, Ref: ref, Weight: b.Weight,
				Config: string(b.State), Health: d.healthName(v, ref), Drained: d.drains[ref] || d.health[ref].Draining,
				SlowStart: 1, ActiveFlows: flows[ref], InactiveFlows: flows[ref|conntrack.InactiveBit],
			}
			if r := d.health[ref].Ramp; r > 0 && r < 1 {
				bs.SlowStart = r
			}
			bs.EffectiveWeight, bs.Load = effectiveWeight(b.Weight, d.statusLocked(ref))
			bs.AwaitingCheck = d.awaitingLocked(ref)
			bs.DrainReason = d.drainWhy[ref]
			bs.MaxFlows, bs.AtMaxFlows = b.MaxFlows, d.full[ref] > 0
			bs.Override = d.overrides[ref].admin()
			bs.FleetOverride = d.fleetOverrideLocked(v, b)
			addRecord(&bs, records, ref)
			bs.Rates = d.rates.backend(ref)
			if !nat {
				bs.Rates = withoutOut(bs.Rates)
			}
			if v.Protocol == config.TCP {
				bs.Handshakes = d.rates.hs.state(ref, v.Outlier.Timeout.D())
			}
			bs.QUICServerIDs = quicServerIDs(b.QUICLBServerIDs)
			vs.ActiveFlows += bs.ActiveFlows
			vs.InactiveFlows += bs.InactiveFlows
			if spec != nil && j < len(spec.Backends) {
				sb := spec.Backends[j]
				bs.Forwarding = forwardingNames[sb.State]
				if sb.State == dataplane.BackendUp {
					bs.MaglevWeight = sb.Weight
				}
			}
			if int(ref) < len(sum.Backends) {
				f := sum.Backends[ref]
				bs.Packets, bs.Bytes, bs.NewFlows = f.Packets, f.Bytes, f.NewFlows
				if nat {
					bs.OutPackets, bs.OutBytes = &f.OutPackets, &f.OutBytes
				}
			}
			vs.Backends = append(vs.Backends, bs)
		}
		st.VIPs = append(st.VIPs, vs)
	}
	st.WorkersDetail = d.rates.workerStates()
	return st, nil
}

// +checklocks:d.mu
func (d *Daemon) healthName(v *config.VIP, ref uint32) string {
	if d.outliers.ejected[ref] {
		return "ejected" // by passive outlier detection
	}
	if v.HealthCheck.Type == config.CheckNone {
		return "none"
	}
	st := d.health[ref]
	switch {
	case !d.checked[ref]:
		return "unknown"
	case st.Down:
		return "down"
	}
	return "up"
}

// dataplaneOf returns the workers and the connection table; nil before
// Run goes live.
func (d *Daemon) dataplaneOf() ([]*dataplane.Worker, *conntrack.Table) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.workers, d.ct
}

// countFlows asks every worker for its live flows per backend, in parallel.
func countFlows(ctx context.Context, workers []*dataplane.Worker) (map[uint32]int, error) {
	total := map[uint32]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := w.CountFlows(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			for ref, n := range m {
				total[ref] += n
			}
		}()
	}
	wg.Wait()
	return total, firstErr
}

func sumCounters(workers []*dataplane.Worker) *dataplane.Counters {
	cs := make([]*dataplane.Counters, len(workers))
	for i, w := range workers {
		cs[i] = w.Published()
	}
	return dataplane.Sum(cs...)
}

// Counters returns the workers' published counters, summed.
func (d *Daemon) Counters() *dataplane.Counters {
	workers, _ := d.dataplaneOf()
	return sumCounters(workers)
}

// Metrics implements admin.Provider.
func (d *Daemon) Metrics() *admin.Metrics {
	m := &admin.Metrics{
		VIPNames: map[uint16]string{}, Backends: map[uint32]admin.BackendLabel{}, NATVIPs: map[uint16]bool{},
		BackendUp: map[uint32]float64{}, AllDown: map[string]uint64{},
		Reloads: map[string]uint64{"ok": d.reloadOK.Load(), "error": d.reloadErr.Load()},
		Driver:  d.opts.Platform.DriverStats(),
	}
	workers, ct := d.dataplaneOf()
	for _, w := range workers {
		m.Workers = append(m.Workers, w.Published())
	}
	if ct != nil {
		m.Conntrack = ct.Stats()
	}
	d.allDownEvents.Range(func(k, v any) bool {
		m.AllDown[k.(string)] = v.(interface{ Load() uint64 }).Load()
		return true
	})
	m.BGP = d.bgpMetrics()
	d.activeFlows(m)
	if st, ok := d.tunnels.stats(); ok {
		m.TunnelProber = map[string]uint64{"sent": st.Sent, "not_probe": st.NotProbe, "unknown": st.Unknown,
			"send_error": st.SendErrors, "read_error": st.ReadErrors}
	}
	ok, at := d.cfgFile.lastLoad()
	differs, _ := d.cfgFile.status() // reads the file when it changed: not under mu
	m.Config = admin.ConfigMetrics{LastReloadOK: ok, LoadedAt: at, FileDiffers: differs}
	d.mu.Lock()
	defer d.mu.Unlock()
	m.Generation = d.gen
	m.Role, m.RoleChanges = d.role.name(), d.role.changes
	m.Fleet = d.fleetStateLocked(time.Now())
	m.FastPath = d.fastOn.Load()
	m.StateErrors = d.stateErrors.Load()
	m.WorkersStalled, m.WorkerStalls = len(d.box.stalled), d.stallEvents.Load()
	m.PreviousUntil = map[string]time.Time{}
	now := time.Now()
	for i := range d.cfg.VIPs {
		v := &d.cfg.VIPs[i]
		if until := d.prev.Until(v, now); !until.IsZero() {
			m.PreviousUntil[v.Name] = until
		}
	}
	m.Ejected, m.Ejections = map[uint32]bool{}, map[uint32]uint64{}
	for ref := range d.outliers.ejected {
		m.Ejected[ref] = true
	}
	m.HealthTransitions, m.LastChange = map[uint32]uint64{}, map[uint32]time.Time{}
	for i := range d.cfg.VIPs {
		v := &d.cfg.VIPs[i]
		for j := range v.Backends {
			key := control.BackendKey(v, &v.Backends[j])
			if n := d.outliers.total[key]; n > 0 {
				m.Ejections[d.reg.Ref(key)] = n
			}
			if n := d.transitions[key]; n > 0 {
				ref := d.reg.Ref(key)
				m.HealthTransitions[ref], m.LastChange[ref] = n, d.lastChange[key]
			}
		}
	}
	if d.spec == nil {
		return m
	}
	m.EffectiveWeight = map[uint32]float64{}
	for i := range d.cfg.VIPs {
		v := &d.cfg.VIPs[i]
		for j := range v.Backends {
			ref := d.reg.Ref(control.BackendKey(v, &v.Backends[j]))
			m.EffectiveWeight[ref], _ = effectiveWeight(v.Backends[j].Weight, d.statusLocked(ref))
		}
	}
	if d.checks != nil {
		m.LoadReportsMalformed = d.checks.LoadReportsMalformed()
		m.HealthChecks = d.checks.Records()
	}
	for _, v := range d.spec.VIPs {
		m.VIPNames[v.ID] = v.Name
		nat := v.Mode == dataplane.ModeNAT
		if nat {
			m.NATVIPs[v.ID] = true
		}
		for _, b := range v.Backends {
			label := b.Addr.String()
			if b.Port != 0 {
				label = netip.AddrPortFrom(b.Addr, b.Port).String()
			}
			m.Backends[b.Ref] = admin.BackendLabel{VIP: v.Name, Backend: label, NAT: nat}
			switch b.State {
			case dataplane.BackendUp:
				m.BackendUp[b.Ref] = 1
			case dataplane.BackendDraining:
				m.BackendUp[b.Ref] = 0.5
			}
		}
	}
	return m
}

// Where implements admin.Provider.
func (d *Daemon) Where(vipName, client string, port uint16) (*api.WhereAnswer, error) {
	c, err := netip.ParseAddrPort(client)
	if err != nil {
		return nil, fmt.Errorf("client %q: want ADDR:PORT", client)
	}
	d.mu.Lock()
	if !d.servingLocked() {
		d.mu.Unlock()
		return nil, ErrNotRunning
	}
	v, err := ResolveVIP(d.cfg, vipName)
	d.mu.Unlock()
	if err != nil {
		return nil, err
	}
	vipName = v.Name
	vport := v.Port
	if vport == 0 {
		if port == 0 {
			return nil, fmt.Errorf("VIP %q serves every port: give port", vipName)
		}
		vport = port
	}
	snap := d.snaps.Load()
	cl := netip.AddrPortFrom(c.Addr().Unmap(), c.Port())
	ref, ok := snap.Where(v.Address, v.Protocol.Number(), vport, cl)
	prev, hasPrev := snap.WherePrevious(v.Address, v.Protocol.Number(), vport, cl)
	ans := &api.WhereAnswer{VIP: vipName, Client: client,
		Note: "for a new flow; a flow pinned in the connection table keeps its backend while that backend is up or draining"}
	if v.Scheduler != config.SchedMaglev {
		// Where answers by the Maglev table; the others also read load.
		ans.Note = fmt.Sprintf("Maglev's choice; scheduler %q may choose otherwise by the backends' load (%s)", v.Scheduler, ans.Note)
	}
	if !ok {
		ans.Note = "no backend takes new flows"
		return ans, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, vs := range d.spec.VIPs {
		for _, b := range vs.Backends {
			if b.Ref == ref {
				ans.Backend = b.Addr.String()
				if b.Port != 0 {
					ans.Backend = netip.AddrPortFrom(b.Addr, b.Port).String()
				}
				if hasPrev && prev != b.Addr {
					ans.Previous = prev.String()
				}
			}
		}
	}
	return ans, nil
}

// quicState is q for /v1/state, nil when the VIP has no QUIC-LB.
func quicState(q *config.QUICLB) *api.QUICLBState {
	if q == nil {
		return nil
	}
	st := &api.QUICLBState{Enabled: q.Enabled}
	for i := range q.Configs {
		c := &q.Configs[i]
		st.Configs = append(st.Configs, api.QUICLBConfigState{Rotation: c.Rotation, ServerIDLen: c.ServerIDLen, NonceLen: c.NonceLen, Form: c.Quiclb().Form().String()})
	}
	return st
}

// quicServerIDs is ids for /v1/state: hex by codepoint.
func quicServerIDs(ids config.ServerIDs) map[string]string {
	if len(ids) == 0 {
		return nil
	}
	m := make(map[string]string, len(ids))
	for rot, id := range ids {
		m[strconv.Itoa(int(rot))] = hex.EncodeToString(id)
	}
	return m
}
