package control

import (
	"fmt"
	"math"
	"net/netip"
	"sort"

	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/dataplane"
	"github.com/vipd/vipd/dataplane/quiclb"
)

// Host is what the box's kernel knows that a snapshot needs: the
// dataplane's Host (each port's MAC, MTU and addresses, the way to
// clients, the box's addresses) and the next hops of backends. The arp
// package keeps it current.
type Host struct {
	dataplane.Host
	// NextHop returns the MAC to send a backend's packets to (the backend
	// itself or its gateway), false while unresolved.
	NextHop func(backend netip.Addr) ([6]byte, bool)
}

// Status is a backend's run-time state from health checks, drains and slow
// start. The zero Status is a healthy backend at full weight.
type Status struct {
	// Down: the health check says the backend cannot take traffic.
	Down bool
	// Draining: lame duck, from the admin API or the health check.
	Draining bool
	// Ramp is the slow-start fraction of the weight, in (0, 1]; 0 means
	// full weight.
	Ramp float64
	// Scale is the fraction of the weight the backend's reported load and
	// error rate leave it (health's load report), in (0, 1]; 0 means full
	// weight. It multiplies Ramp.
	Scale float64
	// Disabled and Weight are the operator's run-time overrides (vipd
	// disable, vipd weight), applied as though the file said them:
	// Disabled takes the backend out like state = "disabled"; Weight, when
	// not 0, replaces the configured weight. (A weight override of 0 is a
	// drain: the daemon sets Draining.)
	Disabled bool
	Weight   uint32
}

// Fraction is the share of its configured weight st gives a backend:
// Ramp × Scale, 0 meaning all of it.
func (st Status) Fraction() float64 {
	f := 1.0
	if st.Ramp > 0 && st.Ramp < 1 {
		f = st.Ramp
	}
	if st.Scale > 0 && st.Scale < 1 {
		f *= st.Scale
	}
	if f >= 1 {
		return 0
	}
	return f
}

// weightScale turns configured weights (1..1000) into Maglev weights with
// room for slow-start fractions: 1000 × 1000 = 10^6 fits easily.
const weightScale = 1000

// Compile builds the dataplane spec for cfg. status gives each backend's
// run-time state by reference (missing: healthy, full weight). It also
// reports, per VIP, whether on_all_down applied (every enabled backend is
// down), for the caller to log and count.
func Compile(cfg *config.Config, reg *Registry, host *Host, status map[uint32]Status) (*dataplane.Spec, []string, error) {
	p, err := NewPlan(cfg, reg)
	if err != nil {
		return nil, nil, err
	}
	spec := p.Header(host)
	var allDown []string
	st := func(ref uint32) Status { return status[ref] }
	for i := range cfg.VIPs {
		vs, down, err := p.VIP(i, host, st)
		if err != nil {
			return nil, nil, err
		}
		if down {
			allDown = append(allDown, cfg.VIPs[i].Name)
		}
		spec.VIPs = append(spec.VIPs, vs)
	}
	return spec, allDown, nil
}

// Plan is a configuration with its identities resolved: every VIP's ID and
// every backend's reference and epoch, taken from the Registry once per
// configuration instead of once per snapshot (the identity keys are
// strings built per backend). A caller that publishes often compiles the
// header and only the VIPs that changed (VIP), and shares the rest with
// the previous spec. A Plan is read-only once made.
type Plan struct {
	cfg    *config.Config
	ids    []uint16   // by VIP index
	refs   [][]uint32 // by VIP index, backend index
	epochs [][]uint32
	vipOf  map[uint32]int // ref → VIP index
	// quic is each VIP's QUIC-LB routing (nil: off), built once per
	// configuration: every snapshot of the configuration shares it, AES
	// key schedules and all.
	quic []*dataplane.QUICSpec
}

// NewPlan resolves cfg's identities in reg, assigning new ones on first
// sight.
func NewPlan(cfg *config.Config, reg *Registry) (*Plan, error) {
	p := &Plan{cfg: cfg, ids: make([]uint16, len(cfg.VIPs)), refs: make([][]uint32, len(cfg.VIPs)),
		epochs: make([][]uint32, len(cfg.VIPs)), vipOf: map[uint32]int{}, quic: make([]*dataplane.QUICSpec, len(cfg.VIPs))}
	for i := range cfg.VIPs {
		v := &cfg.VIPs[i]
		id, err := reg.VIPID(VIPKey(v))
		if err != nil {
			return nil, err
		}
		p.ids[i] = id
		p.refs[i] = make([]uint32, len(v.Backends))
		p.epochs[i] = make([]uint32, len(v.Backends))
		for j := range v.Backends {
			ref, epoch := reg.Bind(BackendKey(v, &v.Backends[j]))
			p.refs[i][j], p.epochs[i][j] = ref, epoch
			p.vipOf[ref] = i
		}
		q, err := quicSpec(v, p.refs[i])
		if err != nil {
			return nil, fmt.Errorf("VIP %q: %w", v.Name, err)
		}
		p.quic[i] = q
	}
	return p, nil
}

// quicSpec builds VIP v's QUIC-LB routing, nil when it has none or it is
// off; refs are its backends' references.
func quicSpec(v *config.VIP, refs []uint32) (*dataplane.QUICSpec, error) {
	q := v.QUICLB
	if q == nil || !q.Enabled {
		return nil, nil
	}
	codecs := make([]*quiclb.Codec, 0, len(q.Configs))
	for i := range q.Configs {
		c, err := quiclb.NewCodec(q.Configs[i].Quiclb())
		if err != nil {
			return nil, fmt.Errorf("QUIC-LB configuration %d: %w", q.Configs[i].Rotation, err)
		}
		codecs = append(codecs, c)
	}
	dec, err := quiclb.NewDecoder(codecs...)
	if err != nil {
		return nil, fmt.Errorf("QUIC-LB: %w", err)
	}
	qs := &dataplane.QUICSpec{Decoder: dec}
	for j := range v.Backends {
		ids := v.Backends[j].QUICLBServerIDs
		rots := make([]int, 0, len(ids))
		for rot := range ids {
			rots = append(rots, int(rot))
		}
		sort.Ints(rots) // a stable order, for tests and diffs
		for _, rot := range rots {
			qs.Servers = append(qs.Servers, dataplane.QUICServer{Ref: refs[j], Rotation: uint8(rot), ID: string(ids[uint8(rot)])})
		}
	}
	return qs, nil
}

// Config returns the configuration the plan was made for.
func (p *Plan) Config() *config.Config { return p.cfg }

// VIPOf returns the index of the VIP backend ref belongs to.
func (p *Plan) VIPOf(ref uint32) (int, bool) {
	i, ok := p.vipOf[ref]
	return i, ok
}

// BackendOf returns the VIP and the backend ref belongs to.
func (p *Plan) BackendOf(ref uint32) (*config.VIP, *config.Backend, bool) {
	i, ok := p.vipOf[ref]
	if !ok {
		return nil, nil, false
	}
	for j, r := range p.refs[i] {
		if r == ref {
			return &p.cfg.VIPs[i], &p.cfg.VIPs[i].Backends[j], true
		}
	}
	return nil, nil, false
}

// Header returns the spec of the plan's configuration on host, without its
// VIPs.
func (p *Plan) Header(host *Host) *dataplane.Spec {
	cfg := p.cfg
	spec := &dataplane.Spec{
		Seed:     cfg.Dataplane.FlowHashSeed,
		TwoArmed: cfg.Dataplane.TwoArmed(),
		Host:     host.Host,
	}
	if m := cfg.Dataplane.EgressMTU; m != 0 {
		spec.MTU[dataplane.PortEgress] = m
		if !spec.TwoArmed {
			spec.MTU[dataplane.PortIngress] = m
		}
	}
	return spec
}

// VIP compiles VIP i of the plan's configuration on host, with each
// backend's run-time state from status. allDown reports whether
// on_all_down applied: no backend takes new flows and none is drained.
func (p *Plan) VIP(i int, host *Host, status func(ref uint32) Status) (vs dataplane.VIPSpec, allDown bool, err error) {
	v := &p.cfg.VIPs[i]
	twoArmed := p.cfg.Dataplane.TwoArmed()
	vs = dataplane.VIPSpec{
		ID: p.ids[i], Name: v.Name, Addr: v.Address, Port: v.Port, Proto: v.Protocol.Number(),
		SrcHash: v.FlowHash == config.HashSrcIP, TableSize: v.TableSize,
		QUIC: p.quic[i],
	}
	// Scheduling: config validated the name, so the error cannot happen.
	vs.Scheduler, _ = dataplane.ParseScheduler(v.Scheduler)
	vs.LoadBound = v.LoadBound
	if v.Mode == config.ModeDSR {
		vs.Mode = dataplane.ModeDSR
		vs.EncapSrc = v.EncapSource
		if v.Encap == config.EncapGUE {
			vs.Encap, vs.GUEPort = dataplane.EncapGUE, v.GUEPort
		}
		if pf := v.EncapSourcePrefix; pf.IsValid() {
			vs.EncapSrcPrefix = pf
			if !vs.EncapSrc.IsValid() {
				vs.EncapSrc = pf.Addr() // its host bits come from each flow
			}
		}
		if !vs.EncapSrc.IsValid() {
			vs.EncapSrc = egressAddr(host, twoArmed, v.Address.Is6())
			if !vs.EncapSrc.IsValid() {
				return vs, false, fmt.Errorf("VIP %q: no encap_source set and the egress interface has no %s address", v.Name, family(v.Address))
			}
		}
	}
	// up counts the backends that take new flows; drained those that keep
	// their flows without taking new ones (drained by the operator, the
	// admin API or the check's drain_status). A VIP whose backends are all
	// drained is out of service on purpose: not "all down", so neither
	// on_all_down's panic nor its event.
	up, drained := 0, 0
	vs.Backends = make([]dataplane.BackendSpec, 0, len(v.Backends))
	for j := range v.Backends {
		b := &v.Backends[j]
		ref := p.refs[i][j]
		st := status(ref)
		bs := dataplane.BackendSpec{Ref: ref, Epoch: p.epochs[i][j], Addr: b.Address, Port: b.Port, Weight: weight(st.weightOf(b), st.Fraction())}
		if v.Mode == config.ModeDSR {
			bs.Port = 0
		}
		if host.NextHop != nil {
			bs.MAC, _ = host.NextHop(b.Address)
		}
		bs.State = state(b.State, st)
		switch {
		case bs.State == dataplane.BackendUp && bs.Weight > 0:
			up++
		case bs.State == dataplane.BackendDraining:
			drained++
		}
		vs.Backends = append(vs.Backends, bs)
	}
	if up == 0 && drained == 0 && v.HealthCheck.Type != config.CheckNone {
		allDown = true
		if v.HealthCheck.OnAllDown == config.AllDownIgnoreHealth {
			// Panic mode: a health-check outage must not become a
			// total one. Every backend the operator enabled takes
			// traffic at full weight, healthy or not.
			for j := range vs.Backends {
				st := status(p.refs[i][j])
				if v.Backends[j].State == config.StateActive && !st.Disabled {
					vs.Backends[j].State = dataplane.BackendUp
					vs.Backends[j].Weight = weight(st.weightOf(&v.Backends[j]), 0)
				}
			}
		}
	}
	return vs, allDown, nil
}

// state combines the operator's intent with the run-time status.
func state(s config.BackendState, st Status) dataplane.BackendState {
	switch {
	case s == config.StateDisabled || st.Down || st.Disabled:
		return dataplane.BackendDown
	case s == config.StateDraining || st.Draining:
		return dataplane.BackendDraining
	}
	return dataplane.BackendUp
}

// weightOf is b's weight under st: the override's, else the file's.
func (st Status) weightOf(b *config.Backend) uint32 {
	if st.Weight > 0 {
		return st.Weight
	}
	return b.Weight
}

// weight scales a configured weight by a slow-start ramp. A ramping backend
// gets at least weight 1, so that it takes a trickle from the first moment.
func weight(w uint32, ramp float64) uint32 {
	if ramp <= 0 || ramp >= 1 {
		return w * weightScale
	}
	return uint32(max(1, math.Round(float64(w*weightScale)*ramp)))
}

func egressAddr(h *Host, twoArmed, v6 bool) netip.Addr {
	p := dataplane.PortIngress
	if twoArmed {
		p = dataplane.PortEgress
	}
	if v6 {
		return h.Addr6[p]
	}
	return h.Addr4[p]
}

func family(a netip.Addr) string {
	if a.Is6() {
		return "IPv6"
	}
	return "IPv4"
}
