package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"

	"github.com/vipd/vipd/control"
	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/dataplane"
	"github.com/vipd/vipd/health"
	"github.com/vipd/vipd/health/tunprobe"
)

// TunnelProber dials health probes through backends' tunnels and counts
// what it sends (*tunprobe.Prober).
type TunnelProber interface {
	health.TunnelDialer
	Stats() tunprobe.Stats
	Close() error
}

// OpenTunnelProber makes a TunnelProber; tunprobe.New is the real one.
type OpenTunnelProber func(tunprobe.Options) (TunnelProber, error)

func openTunprobe(o tunprobe.Options) (TunnelProber, error) {
	p, err := tunprobe.New(o)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// errNoTunnelProber fails the tunnel probes of a daemon that has none
// (none was needed when its configuration was applied).
var errNoTunnelProber = errors.New("no tunnel prober: no DSR VIP had probe = \"tunnel\" when the configuration was applied")

// tunnels owns the daemon's tunnel prober: opened when a configuration
// first has a DSR VIP with probe = "tunnel" (at start or on a reload),
// reopened when one needs a family it lacks, closed when Run returns. Its
// sources are the egress interface's addresses, to which the backends
// answer, and which are also the VIPs' default encapsulation source.
type tunnels struct {
	open OpenTunnelProber // nil: probes are injected (Options.HealthProbe), no prober
	log  *slog.Logger

	mu sync.Mutex
	// +checklocks:mu
	p TunnelProber
	// src4 and src6 are the running prober's sources. One field a line:
	// checklocks matches annotations to fields by line.
	// +checklocks:mu
	src4 netip.Addr
	// +checklocks:mu
	src6 netip.Addr
	// opts are the running prober's options, to reopen it with when a
	// reload's new prober cannot be opened.
	// +checklocks:mu
	opts tunprobe.Options
	// closed sums the counters of the probers closed so far (a reload
	// that adds a family reopens it), so that /metrics never goes back.
	// +checklocks:mu
	closed tunprobe.Stats
	// +checklocks:mu
	opened bool
}

// retire closes the prober and keeps its counters.
// +checklocks:t.mu
func (t *tunnels) retire() error {
	t.closed = t.closed.Add(t.p.Stats())
	err := t.p.Close()
	t.p = nil
	return err
}

// stats returns the prober's counters since the daemon started, summed
// over reopenings; false if no prober was ever opened.
func (t *tunnels) stats() (tunprobe.Stats, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.closed
	if t.p != nil {
		st = st.Add(t.p.Stats())
	}
	return st, t.opened
}

// tunnelFamilies reports which families cfg probes through tunnels.
func tunnelFamilies(cfg *config.Config) (v4, v6 bool) {
	for i := range cfg.VIPs {
		v := &cfg.VIPs[i]
		if v.Mode == config.ModeDSR && v.HealthCheck.Type != config.CheckNone && v.HealthCheck.Probe == config.ProbeTunnel {
			if v.Address.Is4() {
				v4 = true
			} else {
				v6 = true
			}
		}
	}
	return v4, v6
}

// sameSource reports whether a running prober's source src, invalid when
// it lacks the family, is still the egress address now. (A func, not a
// func literal in ensure: checklocks checks an anonymous func called
// under a lock as if it had to release the lock.)
func sameSource(src, now netip.Addr) bool { return !src.IsValid() || src == now }

// ensure opens the prober cfg needs, with host's egress addresses as its
// sources. An error means cfg's tunnel probes cannot run: a start fails, a
// reload is refused.
func (t *tunnels) ensure(cfg *config.Config, host control.Host) error {
	v4, v6 := tunnelFamilies(cfg)
	if t.open == nil || !v4 && !v6 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	port := dataplane.PortIngress
	if cfg.Dataplane.TwoArmed() {
		port = dataplane.PortEgress
	}
	// The running prober serves when it has every family needed, each
	// from the egress address the host has now (a renumbered egress
	// needs a new one: probes bound to the old address would all fail).
	if t.p != nil && (!v4 || t.src4.IsValid()) && (!v6 || t.src6.IsValid()) &&
		sameSource(t.src4, host.Addr4[port]) && sameSource(t.src6, host.Addr6[port]) {
		return nil
	}
	egress := cfg.Dataplane.EgressInterface()
	// Keep the families the running prober has: a reload that drops a
	// family's last tunnel VIP may be followed by one that adds it back.
	v4, v6 = v4 || t.src4.IsValid(), v6 || t.src6.IsValid()
	var o tunprobe.Options
	o.Egress, o.Logger = egress, t.log
	if v4 {
		if o.Source4 = host.Addr4[port]; !o.Source4.IsValid() {
			return fmt.Errorf("tunnel health probes of IPv4 DSR VIPs need an IPv4 address on %s, the backends' side (or probe = \"direct\")", egress)
		}
	}
	if v6 {
		if o.Source6 = host.Addr6[port]; !o.Source6.IsValid() {
			return fmt.Errorf("tunnel health probes of IPv6 DSR VIPs need a global IPv6 address on %s, the backends' side (or probe = \"direct\")", egress)
		}
	}
	running, old := t.p != nil, t.opts
	if running {
		// Reopened with every family: the TUN and rules are vipd's own,
		// and a probe in flight fails once.
		t.retire()
		t.src4, t.src6 = netip.Addr{}, netip.Addr{}
	}
	p, err := t.open(o)
	if err != nil {
		// The reload is refused and the running configuration stays:
		// so must its prober, or its tunnel probes all fail and every
		// backend they check goes down.
		if running {
			if p, rerr := t.open(old); rerr == nil {
				t.p, t.src4, t.src6 = p, old.Source4, old.Source6
			} else {
				t.log.Error("tunnel health probes: the running prober could not be reopened either: its probes fail", "err", rerr)
			}
		}
		return fmt.Errorf("tunnel health probes: %w", err)
	}
	t.p, t.src4, t.src6, t.opened, t.opts = p, o.Source4, o.Source6, true, o
	t.log.Info("tunnel health probes set up", "source4", o.Source4, "source6", o.Source6, "egress", egress)
	return nil
}

// Dial implements health.TunnelDialer.
func (t *tunnels) Dial(ctx context.Context, vip netip.AddrPort, path tunprobe.Path) (net.Conn, error) {
	t.mu.Lock()
	p := t.p
	t.mu.Unlock()
	if p == nil {
		return nil, errNoTunnelProber
	}
	return p.Dial(ctx, vip, path)
}

// close closes the prober, which removes its TUN device and rules.
func (t *tunnels) close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.p == nil {
		return nil
	}
	return t.retire()
}

// tunnelTarget fills in t's probe for a backend b of DSR VIP v whose check
// goes through the tunnel: to the VIP at the check port, encapsulated to b
// as v's packets are. The outer source is v's as the dataplane compiles
// it (control.Plan.VIP), but for the egress address, which is left to the
// prober (its source, the same address).
func tunnelTarget(t *health.Target, v *config.VIP, b *config.Backend) {
	t.Addr = netip.AddrPortFrom(v.Address, t.Addr.Port())
	t.Tunnel = tunprobe.Path{Backend: b.Address, Source: v.EncapSource, Encap: tunprobe.IPIP}
	if !t.Tunnel.Source.IsValid() && v.EncapSourcePrefix.IsValid() {
		t.Tunnel.Source = v.EncapSourcePrefix.Addr()
	}
	if v.Encap == config.EncapGUE {
		t.Tunnel.Encap, t.Tunnel.GUEPort = tunprobe.GUE, v.GUEPort
	}
}
