package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vipd/vipd/admin"
	"github.com/vipd/vipd/config"
	"github.com/vipd/vipd/conntrack"
	"github.com/vipd/vipd/control"
	"github.com/vipd/vipd/dataplane"
	"github.com/vipd/vipd/health"
)

// Options configure a Daemon.
type Options struct {
	// ConfigPath is the file Reload reads again.
	ConfigPath string
	Platform   Platform
	Log        *slog.Logger
	Version    string
	// PollTimeout bounds how long an idle worker waits for frames; it is
	// also how quickly workers notice shutdown. Default 100 ms.
	PollTimeout time.Duration
	// Worker tunes the workers (ICMP rate limit, counter publication).
	Worker dataplane.WorkerOptions
	// HealthProbe replaces the real health probes (tests); nil: health.Probe.
	HealthProbe health.Prober
}

// Daemon is a running vipd.
type Daemon struct {
	opts Options
	log  *slog.Logger
	reg  *control.Registry

	mu       sync.Mutex // guards everything below, and publication
	cfg      *config.Config
	loadedAt time.Time
	health   map[uint32]control.Status // from health checks, by ref
	checked  map[uint32]bool           // refs with at least one finished check
	drains   map[uint32]bool           // from the admin API, by ref
	checks   *health.Manager
	spec     *dataplane.Spec
	allDown  map[string]bool // VIPs currently all down
	gen      uint64

	snaps   dataplane.Snapshots
	workers []*dataplane.Worker
	ct      *conntrack.Table

	reloadOK, reloadErr atomic.Uint64
	allDownEvents       sync.Map // VIP name → *atomic.Uint64
	adminAddr           atomic.Pointer[string]
}

// New prepares a daemon for cfg; Run starts it.
func New(cfg *config.Config, opts Options) *Daemon {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.PollTimeout <= 0 {
		opts.PollTimeout = 100 * time.Millisecond
	}
	return &Daemon{
		opts: opts, log: opts.Log, reg: control.NewRegistry(),
		cfg: cfg, loadedAt: time.Now(),
		health: map[uint32]control.Status{}, checked: map[uint32]bool{}, drains: map[uint32]bool{}, allDown: map[string]bool{},
	}
}

// Run opens the dataplane, publishes the first snapshot, starts the
// workers, the platform's background work and the admin server, and serves
// until ctx is done. Then it stops the workers and undoes what the
// platform installed.
func (d *Daemon) Run(ctx context.Context) (err error) {
	cfg := d.config()
	queues, err := d.opts.Platform.OpenQueues(&cfg.Dataplane)
	if err != nil {
		d.opts.Platform.Close()
		return err
	}
	defer func() {
		for _, q := range queues {
			q.Close()
		}
		if cerr := d.opts.Platform.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	ct := cfg.Conntrack
	d.ct, err = conntrack.New(conntrack.Config{
		Capacity: ct.Capacity, Shards: len(queues),
		Timeouts: conntrack.Timeouts{
			TCPUnestablished: ct.TCPUnestablished.D(), TCPEstablished: ct.TCPEstablished.D(),
			TCPClosing: ct.TCPClosing.D(), UDP: ct.UDP.D(),
		},
	})
	if err != nil {
		return fmt.Errorf("conntrack: %w", err)
	}
	if d.opts.Worker.Neighbors == nil {
		// One cache for all workers: a NAT reply may arrive on another
		// queue than the request its client's MAC was learned from.
		d.opts.Worker.Neighbors = dataplane.NewNeighborCache(1 << 16)
	}
	if d.opts.Worker.Relay == nil {
		// ICMP errors reach any queue; the flow they quote lives in one
		// worker's shard.
		d.opts.Worker.Relay = dataplane.NewRelay(len(queues))
	}
	for i := range queues {
		d.workers = append(d.workers, dataplane.NewWorker(d.ct.Shard(i), d.opts.Worker))
	}
	if err := d.publish("start"); err != nil {
		return err
	}
	d.checks = health.NewManager(d.log, d.opts.HealthProbe, d.setHealth)
	d.checks.Set(d.healthTargets(cfg))
	defer d.checks.Stop()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var srv *http.Server
	if cfg.Admin.Listen != "" {
		ln, err := net.Listen("tcp", cfg.Admin.Listen)
		if err != nil {
			return fmt.Errorf("admin server: %w", err)
		}
		addr := ln.Addr().String()
		d.adminAddr.Store(&addr)
		srv = &http.Server{Handler: admin.Handler(d), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				cancel(fmt.Errorf("admin server: %w", err))
			}
		}()
		d.log.Info("admin server listening", "addr", addr)
	}

	var wg sync.WaitGroup
	// The platform starts first: its first round of next-hop resolution
	// fills in the backends' MACs. Workers start when it has (or after
	// firstHostWait): frames that arrive meanwhile wait in the receive
	// rings instead of being dropped for want of a neighbor.
	hostReady := make(chan struct{})
	var readyOnce sync.Once
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := d.opts.Platform.Run(ctx, func() {
			d.publish("host")
			if d.resolved() {
				readyOnce.Do(func() { close(hostReady) })
			}
		})
		if err != nil && ctx.Err() == nil {
			cancel(fmt.Errorf("platform: %w", err))
		}
	}()
	select {
	case <-hostReady:
	case <-time.After(firstHostWait):
	case <-ctx.Done():
	}
	d.checks.Start(ctx)
	for i, q := range queues {
		w := d.workers[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A worker owns its queue and shard; keeping it on one thread
			// keeps its cache and its socket's CPU affinity warm.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if err := w.Run(ctx, q, &d.snaps, cfg.Dataplane.BatchSize, d.opts.PollTimeout); err != nil {
				cancel(fmt.Errorf("worker %d: %w", i, err))
			}
		}()
	}
	d.log.Info("vipd running", "vips", len(cfg.VIPs), "workers", len(queues), "io", cfg.Dataplane.IO)

	<-ctx.Done()
	if srv != nil {
		sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
		srv.Shutdown(sctx)
		scancel()
	}
	wg.Wait()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	d.log.Info("vipd stopped")
	return nil
}

// AdminAddr returns the admin server's address once it listens.
func (d *Daemon) AdminAddr() string {
	if p := d.adminAddr.Load(); p != nil {
		return *p
	}
	return ""
}

func (d *Daemon) config() *config.Config {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cfg
}

// publish compiles the current state into a snapshot and publishes it.
func (d *Daemon) publish(why string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.publishLocked(why)
}

func (d *Daemon) publishLocked(why string) error {
	host := d.opts.Platform.Host()
	status := make(map[uint32]control.Status, len(d.health)+len(d.drains))
	for ref, st := range d.health {
		status[ref] = st
	}
	for ref, on := range d.drains {
		st := status[ref]
		st.Draining = st.Draining || on
		status[ref] = st
	}
	spec, allDown, err := control.Compile(d.cfg, d.reg, &host, status)
	if err != nil {
		return err
	}
	snap, err := dataplane.NewSnapshot(spec)
	if err != nil {
		return err
	}
	if err := d.opts.Platform.Apply(steeringOf(spec)); err != nil {
		return fmt.Errorf("steering: %w", err)
	}
	d.snaps.Store(snap)
	d.spec = spec
	d.gen++
	now := map[string]bool{}
	for _, name := range allDown {
		now[name] = true
		if !d.allDown[name] {
			c, _ := d.allDownEvents.LoadOrStore(name, new(atomic.Uint64))
			c.(*atomic.Uint64).Add(1)
			mode := "drop"
			for _, v := range d.cfg.VIPs {
				if v.Name == name {
					mode = string(v.HealthCheck.OnAllDown)
				}
			}
			d.log.Warn("every backend of the VIP is down", "vip", name, "on_all_down", mode)
		}
	}
	for name := range d.allDown {
		if !now[name] {
			d.log.Info("the VIP has a backend up again", "vip", name)
		}
	}
	d.allDown = now
	d.log.Debug("snapshot published", "generation", d.gen, "why", why,
		"client_gateway4", net.HardwareAddr(host.ClientGateway4[:]).String(), "client_onlink", host.ClientOnLink)
	return nil
}

// resolved reports whether the current snapshot knows the next hop of
// every backend.
func (d *Daemon) resolved() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.spec == nil {
		return false
	}
	for _, v := range d.spec.VIPs {
		for _, b := range v.Backends {
			if b.MAC == ([6]byte{}) {
				return false
			}
		}
	}
	return true
}

// firstHostWait bounds how long workers wait for the platform's first view
// of the host (next hops) before they start anyway.
const firstHostWait = 2 * time.Second

// ErrRestartNeeded is wrapped by Reload when the new file changes settings
// that only take effect at start.
var ErrRestartNeeded = errors.New("needs a restart")

// Reload reads the configuration file again. A file that does not load,
// or that changes [dataplane], [conntrack] or [admin] (other than
// egress_mtu), is refused: the running configuration stays and the error
// says why. Otherwise VIPs and backends that stay keep their flows,
// removed ones stop, and new VIPs are announced.
func (d *Daemon) Reload() error {
	cfg, warns, err := config.Load(d.opts.ConfigPath)
	for _, w := range warns {
		d.log.Warn("config warning", "problem", w.String())
	}
	if err != nil {
		d.reloadErr.Add(1)
		d.log.Error("reload refused: the running configuration stays", "err", err)
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := restartOnly(d.cfg, cfg); err != nil {
		d.reloadErr.Add(1)
		d.log.Error("reload refused: the running configuration stays", "err", err)
		return err
	}
	old := d.cfg
	d.cfg = cfg
	if err := d.publishLocked("reload"); err != nil {
		d.cfg = old
		d.reloadErr.Add(1)
		d.log.Error("reload refused: the running configuration stays", "err", err)
		return err
	}
	keepVIP, keepBackend := map[string]bool{}, map[string]bool{}
	for i := range cfg.VIPs {
		v := &cfg.VIPs[i]
		keepVIP[control.VIPKey(v)] = true
		for j := range v.Backends {
			keepBackend[control.BackendKey(v, &v.Backends[j])] = true
		}
	}
	d.reg.Forget(keepVIP, keepBackend)
	if d.checks != nil {
		targets := d.healthTargets(cfg)
		d.checks.Set(targets)
		live := map[uint32]bool{}
		for _, t := range targets {
			live[t.Ref] = true
		}
		for ref := range d.health {
			if !live[ref] {
				delete(d.health, ref)
				delete(d.checked, ref)
			}
		}
	}
	d.loadedAt = time.Now()
	d.reloadOK.Add(1)
	d.log.Info("configuration reloaded", "vips", len(cfg.VIPs), "generation", d.gen)
	return nil
}

// restartOnly reports changes a reload cannot apply.
func restartOnly(old, new *config.Config) error {
	a, b := old.Dataplane, new.Dataplane
	a.EgressMTU, b.EgressMTU = 0, 0
	var changed []string
	if !reflect.DeepEqual(a, b) {
		changed = append(changed, "[dataplane]")
	}
	if old.Conntrack != new.Conntrack {
		changed = append(changed, "[conntrack]")
	}
	if old.Admin != new.Admin {
		changed = append(changed, "[admin]")
	}
	if len(changed) > 0 {
		return fmt.Errorf("%v changed: %w", changed, ErrRestartNeeded)
	}
	return nil
}

// findBackend resolves a VIP name and a backend ("addr:port", or "addr")
// to the backend's reference.
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
	ref, err := d.findBackend(vipName, backend)
	if err != nil {
		return err
	}
	if drain {
		d.drains[ref] = true
	} else {
		delete(d.drains, ref)
	}
	d.log.Info("backend drain changed", "vip", vipName, "backend", backend, "drain", drain)
	return d.publishLocked("drain")
}

// setHealth records a backend's health status (from the checks) and
// republishes when it changed.
func (d *Daemon) setHealth(ref uint32, st control.Status, up, known bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if cur, ok := d.health[ref]; ok && cur == st && d.checked[ref] == known {
		return
	}
	d.health[ref] = st
	d.checked[ref] = known
	if err := d.publishLocked("health"); err != nil {
		d.log.Error("publishing a health change failed", "err", err)
	}
}

// healthTargets lists the backends to check: every backend not disabled
// of every VIP whose check is not "none", probed on its own address.
func (d *Daemon) healthTargets(cfg *config.Config) []health.Target {
	var ts []health.Target
	for i := range cfg.VIPs {
		v := &cfg.VIPs[i]
		hc := v.HealthCheck
		if hc.Type == config.CheckNone {
			continue
		}
		for j := range v.Backends {
			b := &v.Backends[j]
			if b.State == config.StateDisabled {
				continue
			}
			port := hc.Port
			if port == 0 {
				port = b.Port
			}
			if port == 0 {
				port = v.Port
			}
			label := b.Address.String()
			if b.Port != 0 {
				label = netip.AddrPortFrom(b.Address, b.Port).String()
			}
			ts = append(ts, health.Target{
				Ref: d.reg.Ref(control.BackendKey(v, b)), VIP: v.Name, Label: label,
				Addr: netip.AddrPortFrom(b.Address, port), Check: hc,
			})
		}
	}
	return ts
}
