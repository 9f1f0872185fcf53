package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"reflect"
	"runtime"
	"slices"
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
	// HealthProbe replaces the real health probes (tests); nil: health's
	// own, with tunnel probes through a TunnelProber.
	HealthProbe health.Prober
	// OpenTunnelProber replaces tunprobe.New (tests); it is not used when
	// HealthProbe is set.
	OpenTunnelProber OpenTunnelProber
}

// Daemon is a running vipd.
type Daemon struct {
	opts Options
	log  *slog.Logger
	reg  *control.Registry // safe for concurrent use
	// tunnels dials the probes of DSR backends through their tunnels.
	tunnels *tunnels

	// reloadMu serialises reloads: each one reads the file and applies it
	// before the next one reads it, so the newest file is the one that
	// stays.
	reloadMu sync.Mutex
	// startDone is closed when Run leaves phaseStarting: it went live, or
	// it failed before. Reloads that arrive earlier wait for it.
	startDone chan struct{}
	// running is closed when the workers run.
	running chan struct{}
	// testHookReloadWaits, when set (tests only), is called by a Reload
	// that is about to wait for the start to finish.
	testHookReloadWaits func()

	// mu guards the fields below and orders publication: every snapshot
	// (start, host change, reload, health change, drain) is compiled from
	// them and stored under mu, one at a time.
	mu sync.Mutex
	// +checklocks:mu
	phase phase
	// +checklocks:mu
	cfg *config.Config
	// +checklocks:mu
	loadedAt time.Time
	// +checklocks:mu
	health map[uint32]control.Status // from health checks, by ref
	// +checklocks:mu
	checked map[uint32]bool // refs with at least one finished check
	// reports are health reports not published yet: publishLocked moves
	// them into health and checked, so that State never shows a health
	// the dataplane does not forward by yet.
	// +checklocks:mu
	reports map[uint32]report
	// +checklocks:mu
	drains map[uint32]bool // from the admin API, by ref
	// +checklocks:mu
	outliers outlierState // passive outlier detection (outlier.go)
	// +checklocks:mu
	checks *health.Manager // set when Run goes live
	// +checklocks:mu
	checking bool // checks started: from then on a reload sets their targets
	// +checklocks:mu
	flows *flowCache // set when Run goes live
	// +checklocks:mu
	spec *dataplane.Spec
	// plan is the identities of the configuration spec was compiled from.
	// +checklocks:mu
	plan *control.Plan
	// vipAllDown[i]: on_all_down applied to spec.VIPs[i].
	// +checklocks:mu
	vipAllDown []bool
	// What changed since spec: every VIP (dirtyAll: the configuration or
	// the host), or the VIPs of plan listed in dirtyVIPs (health, drains).
	// +checklocks:mu
	dirtyAll bool
	// +checklocks:mu
	dirtyVIPs map[int]bool
	// pending: a change waits for the publisher (requestPublishLocked).
	// +checklocks:mu
	pending bool
	// steerStale: the platform may not hold spec's steering (an Apply
	// failed); the next publish applies it whether or not it changed.
	// +checklocks:mu
	steerStale bool
	// targets are the refs the health checks probe: reports of others
	// (a check removed by a reload, reporting late) are ignored.
	// +checklocks:mu
	targets map[uint32]bool
	// +checklocks:mu
	allDown map[string]bool // VIPs currently all down
	// neighborVIPs is what the platform answers ARP/NDP for.
	// +checklocks:mu
	neighborVIPs []netip.Addr
	// +checklocks:mu
	gen uint64
	// fastOn: the workers have an XDP fast path (set once, at start).
	fastOn atomic.Bool
	// prev holds the previous backend sets (previous.go); prevNext is
	// when the earliest published one expires, prevTimer fires then.
	// +checklocks:mu
	prev *control.Previous
	// +checklocks:mu
	prevNext time.Time
	// +checklocks:mu
	prevTimer *time.Timer

	// workers and ct are set once, when Run goes live; readers copy them
	// under mu (dataplaneOf).
	// +checklocks:mu
	workers []*dataplane.Worker
	// +checklocks:mu
	ct *conntrack.Table
	// beats[i] is when worker i last began a loop iteration (Stalled);
	// set when the workers run.
	// +checklocks:mu
	beats []atomic.Int64

	// snaps is stored under mu and loaded by the workers without it.
	snaps dataplane.Snapshots
	// loads is where loadRound publishes the active flows per backend for
	// the load-aware schedulers (sched.go); the workers read it.
	loads dataplane.LoadBoard
	// loadFrom is what the last Load in loads was summed from: the walk
	// (of which flow cache) and the snapshot.
	loadMu sync.Mutex
	// +checklocks:loadMu
	loadFrom struct {
		fc   *flowCache
		seq  int
		snap *dataplane.Snapshot
	}
	// kick wakes the publisher (capacity 1: one wake-up covers every
	// change made before it runs).
	kick chan struct{}
	// gap is publishGap, but in tests.
	gap time.Duration
	// hostWait is firstHostWait, and stallAfter stallTimeout, but in
	// tests.
	hostWait, stallAfter time.Duration

	// box is the BGP speaker and the box-wide lame duck (see boxState).
	box boxState

	// stallEvents counts the times a worker was found stalled
	// (watchStalls).
	stallEvents         atomic.Uint64
	reloadOK, reloadErr atomic.Uint64
	stateErrors         atomic.Uint64 // state file reads and writes that failed
	allDownEvents       sync.Map      // VIP name → *atomic.Uint64
	adminAddr           atomic.Pointer[string]
}

// phase is where a Daemon is in its life. It only moves forward.
type phase int

const (
	phaseNew      phase = iota // Run not called yet
	phaseStarting              // Run opens the dataplane
	phaseLive                  // first snapshot published, health checks set up; workers not running yet
	phaseRunning               // the workers run
	phaseStopping              // Run is stopping: nothing is published any more
	phaseStopped               // Run returned
)

// ErrNotRunning is returned by Reload (and the admin API's changes) when
// the daemon failed to start or is stopping.
var ErrNotRunning = errors.New("vipd is not running")

// ErrStopping is DrainBox's answer to an undo while vipd stops: the stop
// waits for the lame duck's linger, which an undo would cancel.
var ErrStopping = errors.New("vipd is stopping: the lame duck of the stop cannot be undone")

// New prepares a daemon for cfg; Run starts it.
func New(cfg *config.Config, opts Options) *Daemon {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.PollTimeout <= 0 {
		opts.PollTimeout = 100 * time.Millisecond
	}
	reg := control.NewRegistry()
	// [conntrack] is restart-only: the hold fits every configuration this
	// daemon will run.
	reg.SetHold(control.RefHold(&cfg.Conntrack))
	tun := &tunnels{log: opts.Log}
	if opts.HealthProbe == nil {
		tun.open = opts.OpenTunnelProber
		if tun.open == nil {
			tun.open = openTunprobe
		}
	}
	return &Daemon{
		opts: opts, log: opts.Log, reg: reg, tunnels: tun,
		startDone: make(chan struct{}), running: make(chan struct{}), kick: make(chan struct{}, 1), gap: publishGap,
		hostWait: firstHostWait, stallAfter: stallTimeout,
		cfg: cfg, loadedAt: time.Now(),
		health: map[uint32]control.Status{}, checked: map[uint32]bool{}, drains: map[uint32]bool{}, allDown: map[string]bool{},
		dirtyVIPs: map[int]bool{}, targets: map[uint32]bool{}, reports: map[uint32]report{},
		prev: control.NewPrevious(),
	}
}

// setPhase moves the daemon to phase p, if that is forward.
func (d *Daemon) setPhase(p phase) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.setPhaseLocked(p)
}

func (d *Daemon) setPhaseLocked(p phase) {
	old := d.phase
	if p <= old {
		return
	}
	d.phase = p
	if old <= phaseStarting && p > phaseStarting {
		close(d.startDone)
	}
	if old < phaseRunning && p >= phaseRunning {
		close(d.running)
	}
}

// Running returns a channel closed once the workers run (and also when
// Run gives up or stops before they do).
func (d *Daemon) Running() <-chan struct{} { return d.running }

// Run binds the admin listeners, opens the dataplane, publishes the first
// snapshot, starts the platform's background work, the health checks and
// the workers, and serves until ctx is done. Then it stops the workers,
// undoes what the platform installed and removes the admin socket. Run may
// be called once.
func (d *Daemon) Run(ctx context.Context) (err error) {
	d.mu.Lock()
	if d.phase != phaseNew {
		d.mu.Unlock()
		return errors.New("daemon: Run called more than once")
	}
	d.setPhaseLocked(phaseStarting)
	// Run reads only [dataplane], [conntrack] and [admin] from this
	// configuration, which no reload can change (restartOnly). What a
	// reload can change is read from d.cfg under mu where it is used.
	cfg := d.cfg
	d.prev = d.loadPrevious(cfg.Dataplane.StateFile)
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		if d.prevTimer != nil {
			d.prevTimer.Stop()
		}
		d.mu.Unlock()
	}()
	// Last: also releases reloads that wait for a start that failed.
	defer d.setPhase(phaseStopped)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	var queues []dataplane.Queue
	defer func() {
		for _, q := range queues {
			q.Close()
		}
		if cerr := d.opts.Platform.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	srv, err := d.listenAdmin(&cfg.Admin, func(err error) { cancel(err) })
	if err != nil {
		return err
	}
	defer srv.shutdown()
	queues, err = d.opts.Platform.OpenQueues(&cfg.Dataplane)
	if err != nil {
		return err
	}
	ctc := cfg.Conntrack
	ct, err := conntrack.New(conntrack.Config{
		Capacity: ctc.Capacity, Shards: len(queues),
		Timeouts: conntrack.Timeouts{
			TCPUnestablished: ctc.TCPUnestablished.D(), TCPUnconfirmed: ctc.TCPUnconfirmed.D(),
			TCPEstablished: ctc.TCPEstablished.D(), TCPClosing: ctc.TCPClosing.D(), UDP: ctc.UDP.D(),
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
	wopts := d.opts.Worker
	if wopts.Relay == nil {
		// ICMP errors reach any queue; the flow they quote lives in one
		// worker's shard. A relay is made for one set of workers.
		wopts.Relay = dataplane.NewRelay(len(queues))
	}
	if wopts.Load == nil {
		wopts.Load = &d.loads
	}
	workers := make([]*dataplane.Worker, len(queues))
	fp, _ := d.opts.Platform.(fastPlatform)
	for i := range queues {
		workers[i] = dataplane.NewWorker(ct.Shard(i), wopts)
		if fp != nil {
			if f := fp.FastPath(i); f != nil {
				workers[i].SetFastPath(f, i == 0) // one worker counts the fast path's packets
				d.fastOn.Store(true)
			}
		}
	}
	// Closed after the checks stop (defers run last first).
	defer d.tunnels.close()
	if err := d.tunnels.ensure(cfg, d.opts.Platform.Host()); err != nil {
		return err
	}
	checks, err := d.goLive(ctx, ct, workers)
	if err != nil {
		return err
	}
	defer checks.Stop()
	// Runs before checks.Stop (and before stopBGP): from here on nothing
	// is published, so a late health report or reload cannot reach a
	// closing platform, also when the speaker fails to start.
	defer d.setPhase(phaseStopping)
	if err := d.startBGP(ctx, cfg); err != nil {
		return err
	}
	// A start that fails from here on has no session up (peers come
	// with the first routes, once the workers run): nothing to hand
	// over to graceful restart.
	defer d.stopBGP(false)

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		d.runPublisher(ctx)
	}()
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
			// A host change the snapshot cannot take (a VIP address
			// added to one of the box's interfaces, say) keeps the
			// running snapshot; it is logged each time the host changes.
			if err := d.publish("host"); err != nil && !errors.Is(err, ErrNotRunning) {
				d.log.Error("a change on the host cannot be applied: the running snapshot stays", "err", err)
			}
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
	case <-time.After(d.hostWait):
	case <-ctx.Done():
	}
	d.startChecks(ctx)
	beats := newBeats(len(queues))
	for i, q := range queues {
		w, q := workers[i], &beatQueue{Queue: q, at: &beats[i], idle: true}
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
	wg.Go(func() { every(ctx, outlierTick, d.outlierRound) })
	wg.Go(func() { every(ctx, loadEvery, func(time.Time) { d.loadRound(ctx) }) })
	wg.Go(func() { every(ctx, stallCheckEvery(d.stallAfter), func(time.Time) { d.watchStalls() }) })
	d.mu.Lock()
	d.beats = beats
	d.setPhaseLocked(phaseRunning)
	d.updateRoutesLocked() // announce: the box forwards now
	vips := len(d.cfg.VIPs)
	d.mu.Unlock()
	d.log.Info("vipd running", "vips", vips, "workers", len(queues), "io", cfg.Dataplane.IO)

	<-ctx.Done()
	// A cause other than the caller's cancel is a failure: a worker, the
	// platform or the admin listener gave up.
	cause := context.Cause(ctx)
	failed := cause != nil && !errors.Is(cause, context.Canceled)
	d.setPhase(phaseStopping) // the admin API answers 503 from now on
	if failed {
		d.log.Error("vipd fails: ending the BGP sessions with a CEASE, the routers withdraw its routes now", "err", cause)
	}
	// Withdraw (or, on a clean stop, hand over to graceful restart)
	// while the workers still run.
	d.stopBGP(!failed)
	srv.shutdown()
	wg.Wait()
	if failed {
		return cause
	}
	d.log.Info("vipd stopped")
	return nil
}

// goLive publishes the first snapshot and creates the health checks, in
// one critical section: from then on (phaseLive) reloads apply at once;
// before, they wait for it.
func (d *Daemon) goLive(ctx context.Context, ct *conntrack.Table, workers []*dataplane.Worker) (*health.Manager, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ct, d.workers = ct, workers
	if err := d.publishLocked("start"); err != nil {
		return nil, err
	}
	d.flows = newFlowCache(ctx, func(ctx context.Context) (map[uint32]int, error) {
		return countFlows(ctx, workers)
	}, flowsTTL)
	probe := d.opts.HealthProbe
	if probe == nil {
		probe = health.NewProber(d.tunnels)
	}
	d.checks = health.NewManager(d.log, probe, d.setHealth)
	d.setPhaseLocked(phaseLive)
	return d.checks, nil
}

// startChecks starts the health checks on the backends of the current
// configuration. It holds mu, like Reload: a reload before it has changed
// d.cfg, whose targets are taken here; one after it sets the targets
// itself. Either way the checks probe the newest configuration.
func (d *Daemon) startChecks(ctx context.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.setTargetsLocked(d.healthTargets(d.cfg))
	d.checks.Start(ctx)
	d.checking = true
}

// setTargetsLocked hands the health checks their targets.
//
// +checklocks:d.mu
func (d *Daemon) setTargetsLocked(ts []health.Target) {
	d.checks.Set(ts)
	d.targets = make(map[uint32]bool, len(ts))
	for _, t := range ts {
		d.targets[t.Ref] = true
	}
}

// AdminAddr returns the admin server's address once it listens.
func (d *Daemon) AdminAddr() string {
	if p := d.adminAddr.Load(); p != nil {
		return *p
	}
	return ""
}

// publish recompiles the whole state (configuration, host, health and
// drains) into a snapshot and publishes it, before it returns.
func (d *Daemon) publish(why string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dirtyAll = true
	return d.publishLocked(why)
}

// publishGap is the least time between two publications by the publisher:
// a burst of health events (a rack going down, slow starts stepping
// together) is published in one snapshot per gap, while a lone event is
// published as soon as it comes. It bounds the control plane's share of a
// CPU when every publish is expensive (a full rebuild takes far longer
// than this gap; a health event's, at 1,000 VIPs of 100 backends, about
// as long; see BenchmarkPublishFlap).
const publishGap = 2 * time.Millisecond

// requestPublishLocked has the publisher publish the state soon: at once
// if it is idle, else after its current publication and publishGap. A
// synchronous publish made meanwhile takes the change with it.
//
// +checklocks:d.mu
func (d *Daemon) requestPublishLocked() {
	d.pending = true
	select {
	case d.kick <- struct{}{}:
	default: // a wake-up is already pending: it will see this change
	}
}

// runPublisher publishes the changes requestPublishLocked announces until
// ctx is done.
func (d *Daemon) runPublisher(ctx context.Context) {
	gap := time.NewTimer(0)
	defer gap.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.kick:
		}
		d.flushPending()
		gap.Reset(d.gap)
		select {
		case <-ctx.Done():
			return
		case <-gap.C:
		}
	}
}

// flushPending publishes what is pending, if anything; it takes mu.
func (d *Daemon) flushPending() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.pending {
		return // a synchronous publish took it
	}
	if err := d.publishLocked("health"); err != nil && !errors.Is(err, ErrNotRunning) {
		d.log.Error("publishing a health change failed", "err", err)
	}
}

// statusLocked is a backend's run-time status: health, drain and
// outlier ejection.
//
// +checklocks:d.mu
func (d *Daemon) statusLocked(ref uint32) control.Status {
	st := d.health[ref]
	st.Draining = st.Draining || d.drains[ref]
	st.Down = st.Down || d.outliers.ejected[ref]
	return st
}

// markRefLocked notes that backend ref's status changed.
//
// +checklocks:d.mu
func (d *Daemon) markRefLocked(ref uint32) {
	if d.plan == nil {
		d.dirtyAll = true
		return
	}
	if i, ok := d.plan.VIPOf(ref); ok {
		d.dirtyVIPs[i] = true
	}
}

// publishLocked compiles what changed since the last snapshot and
// publishes a new one built from it. The configuration's identities are
// resolved once per configuration (Plan); with neither the configuration
// nor the host changed (dirtyAll), only the VIPs of backends whose status
// changed are compiled again and the rest of the spec is shared with the
// last one; the snapshot is built from the last one (NewSnapshotFrom),
// and the steering is applied only when it changed. On error nothing is
// published and what changed stays marked.
//
// +checklocks:d.mu
func (d *Daemon) publishLocked(why string) error {
	if d.phase < phaseStarting || d.phase >= phaseStopping {
		return ErrNotRunning
	}
	for ref, r := range d.reports {
		d.health[ref], d.checked[ref] = r.st, r.known
	}
	clear(d.reports)
	host := d.opts.Platform.Host()
	plan := d.plan
	if plan == nil || plan.Config() != d.cfg {
		var err error
		if plan, err = control.NewPlan(d.cfg, d.reg); err != nil {
			return err
		}
	}
	full := plan != d.plan || d.dirtyAll || d.spec == nil
	spec := plan.Header(&host)
	var allDown []bool
	status := d.statusLocked
	// A new configuration is observed on a copy, kept only if it is
	// published (previous.go).
	now, prev := time.Now(), d.prev
	var prevChanges []control.Change
	prevDirty := false
	if plan != d.plan {
		prev = d.prev.Clone()
		prevChanges, prevDirty = prev.Observe(d.cfg, now)
	}
	next := d.prevNext
	if full {
		next = time.Time{}
		spec.VIPs = make([]dataplane.VIPSpec, len(d.cfg.VIPs))
		allDown = make([]bool, len(d.cfg.VIPs))
		for i := range spec.VIPs {
			var err error
			if spec.VIPs[i], allDown[i], err = plan.VIP(i, &host, status); err != nil {
				return err
			}
			if until := previousFor(prev, &d.cfg.VIPs[i], &spec.VIPs[i], now); !until.IsZero() && (next.IsZero() || until.Before(next)) {
				next = until
			}
		}
	} else {
		spec.VIPs = slices.Clone(d.spec.VIPs)
		allDown = slices.Clone(d.vipAllDown)
		for i := range d.dirtyVIPs {
			var err error
			if spec.VIPs[i], allDown[i], err = plan.VIP(i, &host, status); err != nil {
				return err
			}
			previousFor(prev, &d.cfg.VIPs[i], &spec.VIPs[i], now)
		}
	}
	snap, err := dataplane.NewSnapshotFrom(d.snaps.Load(), spec)
	if err != nil {
		return err
	}
	if !snap.SteeringUnchanged() || d.steerStale {
		if err := d.opts.Platform.Apply(steeringOf(spec)); err != nil {
			d.steerStale = true
			return fmt.Errorf("steering: %w", err)
		}
		d.steerStale = false
	}
	if nv := neighborVIPs(d.cfg); !slices.Equal(nv, d.neighborVIPs) {
		d.opts.Platform.SetNeighborVIPs(nv)
		d.neighborVIPs = nv
	}
	d.snaps.Store(snap)
	if fp, ok := d.opts.Platform.(fastPlatform); ok {
		// Entries computed under the previous snapshot stop serving now.
		// If the kernel refuses, they serve until they expire (at most
		// fast_path_refresh): logged, not a reason to keep the old
		// snapshot.
		if err := fp.SetFastGeneration(snap.Generation()); err != nil {
			d.log.Error("the XDP fast path keeps the previous snapshot's flows until they expire", "err", err)
		}
	}
	d.spec, d.plan, d.vipAllDown = spec, plan, allDown
	d.prev = prev
	if prevDirty {
		d.savePrevious(d.cfg.Dataplane.StateFile, prev)
	}
	for _, c := range prevChanges {
		d.log.Info("backend set changed: the previous one gives mid-flow packets their previous-owner hints", "vip", c.VIP, "until", c.Until.Format(time.RFC3339))
	}
	d.schedulePreviousLocked(next)
	d.dirtyAll, d.pending = false, false
	clear(d.dirtyVIPs)
	d.gen++
	for i, down := range allDown {
		v := &d.cfg.VIPs[i]
		switch {
		case down && !d.allDown[v.Name]:
			d.allDown[v.Name] = true
			c, _ := d.allDownEvents.LoadOrStore(v.Name, new(atomic.Uint64))
			c.(*atomic.Uint64).Add(1)
			mode := string(v.HealthCheck.OnAllDown)
			if mode == "" {
				mode = string(config.AllDownDrop)
			}
			d.log.Warn("every backend of the VIP is down", "vip", v.Name, "on_all_down", mode)
		case !down && d.allDown[v.Name]:
			delete(d.allDown, v.Name)
			d.log.Info("the VIP has a backend up again", "vip", v.Name)
		}
	}
	if len(d.allDown) > 0 {
		// VIPs that a reload removed are no longer all down.
		names := make(map[string]bool, len(d.cfg.VIPs))
		for i := range d.cfg.VIPs {
			names[d.cfg.VIPs[i].Name] = true
		}
		for name := range d.allDown {
			if !names[name] {
				delete(d.allDown, name)
			}
		}
	}
	d.box.nextHop4, d.box.nextHop6 = host.Addr4[dataplane.PortIngress], host.Addr6[dataplane.PortIngress]
	d.updateRoutesLocked()
	d.log.Debug("snapshot published", "generation", d.gen, "why", why, "full", full,
		"client_gateway4", net.HardwareAddr(host.ClientGateway4[:]).String(), "client_onlink", host.ClientOnLink)
	return nil
}

// neighborVIPs lists, each once and in the file's order, the VIP addresses
// vipd answers ARP/NDP for: those of a VIP with neighbor_announce on (by
// default, every VIP not announced over BGP).
func neighborVIPs(cfg *config.Config) []netip.Addr {
	var out []netip.Addr
	for i := range cfg.VIPs {
		v := &cfg.VIPs[i]
		if v.AnswersNeighbors() && !slices.Contains(out, v.Address) {
			out = append(out, v.Address)
		}
	}
	return out
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
// or that changes [dataplane], [conntrack], [admin] (other than
// egress_mtu) or [bgp], is refused: the running configuration stays and the error
// says why. Otherwise VIPs and backends that stay keep their flows,
// removed ones stop, and new VIPs are announced.
//
// A reload that arrives before Run has published its first snapshot and
// set up the health checks (even before Run is called) waits for that,
// then reads the file and applies it whole; one that arrives after Run
// failed to start or began to stop returns ErrNotRunning.
func (d *Daemon) Reload() error {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	select {
	case <-d.startDone:
	default:
		if d.testHookReloadWaits != nil {
			d.testHookReloadWaits()
		}
		<-d.startDone
	}
	if !d.serving() {
		d.log.Warn("reload ignored: vipd is not running")
		return ErrNotRunning
	}
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
	if !d.servingLocked() {
		d.log.Warn("reload ignored: vipd is stopping")
		return ErrNotRunning
	}
	if err := restartOnly(d.cfg, cfg); err != nil {
		d.reloadErr.Add(1)
		d.log.Error("reload refused: the running configuration stays", "err", err)
		return err
	}
	if rc, ok := d.opts.Platform.(reloadChecker); ok {
		if err := rc.CheckReload(cfg); err != nil {
			d.reloadErr.Add(1)
			d.log.Error("reload refused: the running configuration stays", "err", err)
			return err
		}
	}
	if err := d.tunnels.ensure(cfg, d.opts.Platform.Host()); err != nil {
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
	targets := d.healthTargets(cfg)
	if d.checking {
		d.setTargetsLocked(targets)
	} // else startChecks takes the targets of d.cfg, this configuration
	live := map[uint32]bool{}
	for _, t := range targets {
		live[t.Ref] = true
	}
	stale := false
	for ref := range d.health {
		if !live[ref] {
			// No longer checked (its check turned off, or it is gone):
			// its last status, down or draining, goes, and no report
			// will come to publish that. The snapshot just published
			// still has it: publish again.
			delete(d.health, ref)
			delete(d.checked, ref)
			d.markRefLocked(ref)
			stale = true
		}
	}
	if stale {
		d.requestPublishLocked()
	}
	// A removed backend's drain goes with it: its ref may come to
	// another backend (control.Registry).
	for ref := range d.drains {
		if _, ok := d.plan.VIPOf(ref); !ok {
			delete(d.drains, ref)
		}
	}
	d.loadedAt = time.Now()
	d.reloadOK.Add(1)
	d.log.Info("configuration reloaded", "vips", len(cfg.VIPs), "generation", d.gen)
	return nil
}

// serving reports whether the daemon is live or running: it has published
// a snapshot and does not stop.
func (d *Daemon) serving() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.servingLocked()
}

// +checklocks:d.mu
func (d *Daemon) servingLocked() bool {
	return d.phase == phaseLive || d.phase == phaseRunning
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
	if !old.Admin.Equal(&new.Admin) {
		changed = append(changed, "[admin]")
	}
	if !reflect.DeepEqual(old.BGP, new.BGP) {
		changed = append(changed, "[bgp]")
	}
	if len(changed) > 0 {
		return fmt.Errorf("%v changed: %w", changed, ErrRestartNeeded)
	}
	return nil
}

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

// setHealth records a backend's health status (from the checks) and, when
// it changed, has the publisher publish it: a burst of reports becomes one
// snapshot (requestPublishLocked).
func (d *Daemon) setHealth(ref uint32, st control.Status, up, known bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.phase >= phaseStopping {
		return // the checks are being stopped: nothing is published any more
	}
	if !d.targets[ref] {
		// A check that a reload removed, reporting late: its ref may go
		// to another backend later, which must not inherit this.
		return
	}
	// The last report: not published yet, else published.
	cur, ok := d.reports[ref]
	if !ok {
		cur.st, ok = d.health[ref]
		cur.known = d.checked[ref]
	}
	if ok && cur == (report{st, known}) {
		return
	}
	d.reports[ref] = report{st, known}
	d.markRefLocked(ref)
	d.requestPublishLocked()
}

// report is a health check's report on a backend.
type report struct {
	st    control.Status
	known bool
}

// healthTargets lists the backends to check: every backend not disabled
// of every VIP whose check is not "none", probed on its own address, or,
// with probe = "tunnel" (DSR), at the VIP through its tunnel.
// Callers pass d.cfg and hold d.mu, so that the targets and the snapshot
// come from the same configuration.
//
// +checklocks:d.mu
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
			t := health.Target{
				Ref: d.reg.Ref(control.BackendKey(v, b)), VIP: v.Name, Label: label,
				Addr: netip.AddrPortFrom(b.Address, port), Check: hc,
			}
			if v.Mode == config.ModeDSR && hc.Probe == config.ProbeTunnel {
				tunnelTarget(&t, v, b)
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// every calls f with the tick's time every period until ctx ends: the
// daemon's outlier and load rounds.
func every(ctx context.Context, period time.Duration, f func(time.Time)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			f(now)
		}
	}
}
