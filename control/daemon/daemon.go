package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vipd/vipd/conntrack"
	"github.com/vipd/vipd/control"
	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/control/events"
	"github.com/vipd/vipd/control/fleet"
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
	// Fleet, for a box with [fleet]: the fleet it follows (fleet.go).
	// The configuration given to New is then Fleet.Composed's.
	Fleet *FleetSource
}

// Daemon is a running vipd. Its fields are grouped by what they belong
// to; each group's comment says what guards it. Most of the state is
// under mu, which also orders publication.
//
// One field a line: checklocks matches its annotations to fields by
// line, and a line that declares two fields shifts the rest by one.
type Daemon struct {
	// Set by New and not changed after (but Run fills in
	// opts.Worker.Neighbors before it starts the workers): no lock.
	opts Options
	log  *slog.Logger
	reg  *control.Registry // safe for concurrent use
	// tunnels dials the probes of DSR backends through their tunnels.
	tunnels *tunnels
	// kick wakes the publisher (capacity 1: one wake-up covers every
	// change made before it runs).
	kick chan struct{}
	// gap is publishGap, but in tests.
	gap time.Duration
	// hostWait is firstHostWait, and stallAfter stallTimeout, but in
	// tests.
	hostWait   time.Duration
	stallAfter time.Duration

	// Lifecycle: reloads wait for the start, and Running's callers for
	// the workers. The channels are closed under mu (setPhaseLocked).

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
	// cfgFile tells whether the file on disk is the one that runs
	// (reloadreport.go); its own lock.
	cfgFile *configFile
	// fleet follows the fleet's keys (fleet.go); nil without [fleet].
	// Set by New.
	fleet *fleetState

	// mu guards every field annotated +checklocks:mu below and orders
	// publication: every snapshot (start, host change, reload, health
	// change, drain) is compiled from them and stored under mu, one at
	// a time.
	mu sync.Mutex
	// +checklocks:mu
	phase phase

	// Configuration and backend status, under mu: what every snapshot
	// is compiled from.
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
	// drainWhy holds the reason given with each drain (-reason), by ref.
	// +checklocks:mu
	drainWhy map[uint32]string
	// overrides are the operator's weight and disable overrides from the
	// admin API, by ref (overrides.go).
	// +checklocks:mu
	overrides map[uint32]override
	// +checklocks:mu
	outliers outlierState // passive outlier detection (outlier.go)
	// blackHoles are the TCP VIPs none of whose backends answers, with
	// when that was last logged (handshakes.go).
	// +checklocks:mu
	blackHoles map[string]time.Time
	// full are the backends at their max_flows, with the limit
	// (maxflows.go): they take no new flows until under 3/4 of it.
	// +checklocks:mu
	full map[uint32]int
	// fleetOverrides are the fleet's overrides in force, by
	// fleetOverrideKey, and fleetIgnored the fleet's keys not applied
	// and why (fleet.go): for status.
	// +checklocks:mu
	fleetOverrides map[string]fleet.Override
	// +checklocks:mu
	fleetIgnored []string

	// Health checks, under mu (health.go).
	// +checklocks:mu
	checks *health.Manager // set when Run goes live

	rates rateSampler // per-second rates (rates.go)
	// events is the event log (events.go); safe for concurrent use.
	events *events.Log
	// transitions counts each backend's health transitions and lastChange
	// holds when its verdict last changed, by control.BackendKey (a ref
	// may go to another backend).
	// +checklocks:mu
	transitions map[string]uint64
	// +checklocks:mu
	lastChange map[string]time.Time
	// +checklocks:mu
	checking bool // checks started: from then on a reload sets their targets
	// targets are the refs the health checks probe: reports of others
	// (a check removed by a reload, reporting late) are ignored.
	// +checklocks:mu
	targets map[uint32]bool
	// awaiting are the targets whose check has init_state "down": until
	// their first check ends (checked) they take no new flows; and
	// firstRoundBy is when the box stops waiting for that first round to
	// say it is ready (firstround.go).
	// +checklocks:mu
	awaiting map[uint32]bool
	// +checklocks:mu
	firstRoundBy time.Time
	// firstRoundOver latches the first round's end: readiness is the
	// start's, a backend a reload adds later does not take it back.
	// +checklocks:mu
	firstRoundOver bool
	// firstRoundMax, when not 0, replaces firstRoundLimit (tests).
	firstRoundMax time.Duration

	// Publishing, under mu (publish.go): the last published spec and
	// what changed since.
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
	// +checklocks:mu
	allDown map[string]bool // VIPs currently all down
	// neighborVIPs is what the platform answers ARP/NDP for.
	// +checklocks:mu
	neighborVIPs []netip.Addr
	// +checklocks:mu
	gen uint64
	// prev holds the previous backend sets (previous.go); prevNext is
	// when the earliest published one expires, prevTimer fires then.
	// +checklocks:mu
	prev *control.Previous
	// +checklocks:mu
	prevNext time.Time
	// +checklocks:mu
	prevTimer *time.Timer

	// box is the BGP speaker and the box-wide lame duck (see boxState).
	// +checklocks:mu
	box boxState
	// role is the neighbor role, active or standby (role.go).
	// +checklocks:mu
	role roleState

	// The dataplane, under mu: set once, when Run goes live; readers copy
	// them under mu (dataplaneOf).
	// +checklocks:mu
	workers []*dataplane.Worker
	// +checklocks:mu
	ct *conntrack.Table
	// beats[i] is when worker i last began a loop iteration (Stalled);
	// set when the workers run.
	// +checklocks:mu
	beats []atomic.Int64
	// +checklocks:mu
	flows *flowCache // set when Run goes live

	// Shared with the workers, which read them without a lock; and what
	// loadRound summed last, under loadMu.

	// fastOn: the workers have an XDP fast path (set once, at start).
	fastOn atomic.Bool
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

	// Counters, and the admin address, for Metrics and State: atomic,
	// no lock.

	// stallEvents counts the times a worker was found stalled
	// (watchStalls).
	stallEvents   atomic.Uint64
	reloadOK      atomic.Uint64
	reloadErr     atomic.Uint64
	stateErrors   atomic.Uint64 // state file reads and writes that failed
	stateW        *stateWriter  // writes the state file off mu (statefile.go)
	allDownEvents sync.Map      // VIP name → *atomic.Uint64
	adminAddr     atomic.Pointer[string]
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
	d := &Daemon{
		opts: opts, log: opts.Log, reg: reg, tunnels: tun,
		startDone: make(chan struct{}), running: make(chan struct{}), kick: make(chan struct{}, 1), gap: publishGap,
		hostWait: firstHostWait, stallAfter: stallTimeout,
		cfg: cfg, loadedAt: time.Now(), cfgFile: newConfigFile(opts.ConfigPath),
		health: map[uint32]control.Status{}, checked: map[uint32]bool{}, drains: map[uint32]bool{}, drainWhy: map[uint32]string{}, allDown: map[string]bool{},
		events: events.New(events.DefaultSize), transitions: map[string]uint64{}, lastChange: map[string]time.Time{},
		dirtyVIPs: map[int]bool{}, targets: map[uint32]bool{}, reports: map[uint32]report{},
		prev: control.NewPrevious(), overrides: map[uint32]override{}, role: newRole(cfg),
	}
	if opts.Fleet != nil {
		d.fleet = newFleetState(d, opts.Fleet)
		if c := opts.Fleet.Composed; c != nil {
			d.mu.Lock()
			d.setFleetLocked(c)
			d.mu.Unlock()
		}
		// d.fleet has what it needs: the source's start keys and
		// configuration are not kept past the first revision applied.
		d.opts.Fleet = nil
	}
	d.stateW = newStateWriter(writeFileDurably, func(path string, err error) {
		d.stateErrors.Add(1)
		d.log.Error("the state file cannot be written: a restart would forget the previous backend sets and the run-time overrides", "state_file", path, "err", err)
	})
	return d
}

// setPhase moves the daemon to phase p, if that is forward.
func (d *Daemon) setPhase(p phase) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.setPhaseLocked(p)
}

// setPhaseLocked is setPhase, with d.mu held.
//
// +checklocks:d.mu
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
	var saved []savedOverride
	d.prev, saved = d.loadState(cfg.Dataplane.StateFile)
	d.restoreOverridesLocked(saved)
	d.mu.Unlock()
	d.syncState(stateWaitRequest)
	// Runs after everything else has stopped: the last state on disk for
	// the next start.
	defer d.syncState(stateWaitStop)
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
	if wopts.Stopwatch == nil {
		// A NAT backend's SYN-ACK may reach another queue than its SYN.
		wopts.Stopwatch = dataplane.NewStopwatch(dataplane.DefaultStopwatchSlots)
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
	wg.Add(1)
	go func() {
		defer wg.Done()
		d.runRates(ctx) // rates.go
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
	// The workers start once the first round of checks is over
	// (firstround.go): frames wait in the receive rings meanwhile, as
	// for the host above, so that a restarted box places its clients'
	// mid-stream packets with every backend's verdict in, not on the
	// few whose checks ended first.
	d.waitFirstRound(ctx)
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
	if d.fleet != nil {
		d.startFleet(ctx, &wg)
	}

	<-ctx.Done()
	// A cause other than the caller's cancel is a failure: a worker, the
	// platform or the admin listener gave up.
	cause := context.Cause(ctx)
	failed := cause != nil && !errors.Is(cause, context.Canceled)
	d.setPhase(phaseStopping) // the admin API answers 503 from now on
	if failed {
		d.logFailure(cause)
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

// logFailure logs why vipd fails; with BGP, that its sessions end with a
// CEASE (stopBGP), which only a box with a speaker has to say.
func (d *Daemon) logFailure(cause error) {
	d.mu.Lock()
	speaking := d.box.speaker != nil
	d.mu.Unlock()
	if speaking {
		d.log.Error("vipd fails: ending the BGP sessions with a CEASE, the routers withdraw its routes now", "err", cause)
		return
	}
	d.log.Error("vipd fails", "err", cause)
}

// goLive publishes the first snapshot and creates the health checks, in
// one critical section: from then on (phaseLive) reloads apply at once;
// before, they wait for it.
func (d *Daemon) goLive(ctx context.Context, ct *conntrack.Table, workers []*dataplane.Worker) (*health.Manager, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ct, d.workers = ct, workers
	d.setAwaitingLocked(d.healthTargets(d.cfg)) // before the first snapshot
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

// AdminAddr returns the admin server's address once it listens.
func (d *Daemon) AdminAddr() string {
	if p := d.adminAddr.Load(); p != nil {
		return *p
	}
	return ""
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
