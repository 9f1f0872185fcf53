package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/control/fleet"
	"github.com/vipd/vipd/dataplane"
)

// A box with [fleet] runs its local file joined with the fleet's keys in
// etcd (docs/fleet.md): the watcher applies each revision as a reload
// applies a file, one compile and one publish per revision; the cache
// file keeps the last applied revision for a start without etcd; the
// box key tells the fleet what this box runs. Nothing here touches the
// routes or the flows when etcd is away: the box keeps what it applied.

// FleetSource is how a box follows its fleet; cmd/vipd makes it from
// [fleet], tests from a fake store.
type FleetSource struct {
	// Store is the fleet's keys (fleet.EtcdStore).
	Store fleet.Store
	// Local is the local file's configuration, with [fleet].
	Local *config.Config
	// Start is the keys the configuration given to New was composed
	// from (fleet.Compose of Local and Start), FromCache when they came
	// from the cache file because etcd did not answer at start.
	Start     *fleet.Keys
	Composed  *fleet.Composed
	FromCache bool
	// Saved is when the cache was saved, for a start from it: the last
	// time the box knew its keys to be the fleet's latest.
	Saved time.Time
	// BoxKey keeps the box's status in etcd (fleet.BoxKey.Run); nil:
	// the box writes none.
	BoxKey func(ctx context.Context, updates <-chan fleet.BoxStatus)
	// Retry is how long the watcher waits after a failure (1 s when 0).
	Retry time.Duration
}

// staleAfter is how long without word from etcd (an event, a progress
// notification) makes a box stale: a few progress intervals.
const staleAfter = 3 * fleet.DefaultProgress

// boxStatusEvery is how often the box's status is compared with the one
// last written, for what changes without a revision (role, readiness,
// health reshaping the tables).
const boxStatusEvery = time.Second

// fleetState is the daemon's side of the fleet. local and keys are
// guarded by Daemon.reloadMu: a reload of the file and a revision of the
// fleet are applied one at a time, each joining the other's latest.
type fleetState struct {
	watcher *fleet.Watcher
	// boxKey is FleetSource.BoxKey; startedFromCache FleetSource's
	// FromCache. Nothing else of the source is kept: its start keys and
	// configuration would outlive the first revision applied.
	boxKey           func(ctx context.Context, updates <-chan fleet.BoxStatus)
	startedFromCache bool
	cacheW           *stateWriter // the cache file, written off every lock
	// cacheErrors counts failed cache writes.
	cacheErrors atomic.Uint64

	// id is the local file's [fleet]: a reload cannot change it (a
	// change needs a restart), so it is read without a lock.
	id config.Fleet

	local    *config.Config // guarded by Daemon.reloadMu
	keys     *fleet.Keys    // guarded by Daemon.reloadMu
	composer fleet.Composer // guarded by Daemon.reloadMu

	// applied is the revision and digest of the keys in force, for the
	// box key without reloadMu.
	applied atomic.Pointer[appliedKeys]
	// fromCache: the box runs keys from the cache file and has not read
	// etcd since it started.
	fromCache atomic.Bool
	// kick asks for the box's status to be written now (capacity 1).
	kick chan struct{}
	// tables caches the table digests of one snapshot: they change only
	// with it, and digesting 65,537 slots a VIP every second would be
	// most of what following a quiet fleet costs. Only feedBoxKey's
	// goroutine uses it (BoxStatus's other callers pass no cache).
	tables struct {
		snap    *dataplane.Snapshot
		digests map[string]string
	}
}

type appliedKeys struct {
	revision int64
	digest   string
}

func newFleetState(d *Daemon, src *FleetSource) *fleetState {
	f := &fleetState{id: *src.Local.Fleet, local: src.Local, keys: src.Start, kick: make(chan struct{}, 1), boxKey: src.BoxKey, startedFromCache: src.FromCache}
	f.watcher = &fleet.Watcher{Store: src.Store, Apply: d.applyFleet, Retry: src.Retry}
	now, current := time.Now(), time.Now()
	if src.FromCache {
		current = src.Saved
	}
	f.watcher.Started(src.Start.Revision, now, current, !src.FromCache)
	f.applied.Store(&appliedKeys{src.Start.Revision, src.Start.Digest()})
	f.fromCache.Store(src.FromCache)
	f.cacheW = newStateWriter(func(path string, b []byte) error {
		return fleet.SaveBytes(path, b)
	}, func(path string, err error) {
		f.cacheErrors.Add(1)
		d.log.Error("the fleet cache cannot be written: a start while etcd is away would run an older revision", "cache_file", path, "err", err)
	})
	return f
}

// kickBox asks for the box's status to be written now.
func (f *fleetState) kickBox() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// saveCache queues k for the cache file (latest wins, off every lock).
func (d *Daemon) saveCache(k *fleet.Keys) {
	f := d.fleet
	s := fleet.SnapshotOf(f.id.Prefix, k, time.Now())
	b, err := s.Encode()
	if err != nil {
		d.log.Error("the fleet cache cannot be encoded", "err", err)
		return
	}
	f.cacheW.submit(f.id.CacheFile, b)
}

// syncFleetCache waits, for at most timeout, until the cache holds every
// revision queued for it.
func (d *Daemon) syncFleetCache(timeout time.Duration) {
	w := d.fleet.cacheW
	if err := w.wait(w.latest(), timeout); errors.Is(err, errStateSlow) {
		d.log.Warn("the fleet cache is still being written: going on without waiting for it", "waited", timeout)
	}
}

// applyFleet is the watcher's Apply: it applies the keys as of one
// revision, or refuses them whole and keeps what runs.
func (d *Daemon) applyFleet(k *fleet.Keys) error {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	f := d.fleet
	f.fromCache.Store(false)
	defer f.kickBox()
	digest := k.Digest()
	if digest == f.applied.Load().digest {
		// Nothing the box runs changed (a re-read after a failed watch,
		// a revision of other keys): the revision moves, nothing is
		// compiled.
		f.keys = k
		f.applied.Store(&appliedKeys{k.Revision, digest})
		d.saveCache(k)
		return nil
	}
	fc, err := f.composer.Compose(f.local, k)
	if err != nil {
		return d.refuseFleet(k, errorEntries(err), err)
	}
	d.mu.Lock()
	diff, entries, err := d.applyLocked(fc.Config, "fleet")
	if err == nil {
		d.setFleetLocked(fc)
	}
	gen := d.gen
	d.mu.Unlock()
	if err != nil {
		return d.refuseFleet(k, entries, err)
	}
	f.keys = k
	f.applied.Store(&appliedKeys{k.Revision, digest})
	d.saveCache(k)
	for _, w := range fc.Warnings {
		d.log.Warn("fleet config warning", "revision", k.Revision, "problem", w.String())
	}
	for _, s := range fc.Ignored {
		d.log.Warn("fleet key ignored", "revision", k.Revision, "problem", s)
	}
	keys := make([]string, len(diff.Keys))
	for i, c := range diff.Keys {
		keys[i] = c.String()
	}
	d.event(api.Event{Kind: api.EventFleet, What: fmt.Sprintf("revision %d applied", k.Revision) + strings.TrimPrefix(reloadWhat(diff, keys), "applied")})
	d.log.Info("fleet revision applied", "revision", k.Revision, "vips", len(fc.Config.VIPs),
		"vips_added", diff.VIPsAdded, "vips_removed", diff.VIPsRemoved,
		"backends_added", len(diff.BackendsAdded), "backends_removed", len(diff.BackendsRemoved),
		"reweighted", len(diff.Reweighted), "keys", keys, "overrides", len(fc.Overrides), "generation", gen)
	// Overrides of the state file whose backends the revision removed
	// go, as after a reload.
	d.syncState(stateWaitRequest)
	return nil
}

// refuseFleet logs why revision k is refused and returns the error the
// watcher records (one line per reason).
func (d *Daemon) refuseFleet(k *fleet.Keys, entries []string, err error) error {
	d.event(api.Event{Kind: api.EventFleet, What: fmt.Sprintf("revision %d refused: %s", k.Revision, strings.Join(entries, "; "))})
	for i, e := range entries {
		d.log.Error("fleet revision refused: the box keeps the last revision it applied",
			"revision", k.Revision, "kept", d.fleet.applied.Load().revision, "err", e, "error", i+1, "of", len(entries))
	}
	if len(entries) > 1 {
		return fmt.Errorf("%s", strings.Join(entries, "; "))
	}
	return err
}

// setFleetLocked records what the fleet's keys put in force, for status.
//
// +checklocks:d.mu
func (d *Daemon) setFleetLocked(fc *fleet.Composed) {
	ov := make(map[string]fleet.Override, len(fc.Overrides))
	for _, o := range fc.Overrides {
		ov[fleetOverrideKey(o.VIP, o.Backend.Addr().String(), o.Backend.Port())] = o
	}
	d.fleetOverrides, d.fleetIgnored = ov, fc.Ignored
}

// fleetOverrideKey is how fleetOverrides are keyed: VIP name and backend.
func fleetOverrideKey(vip, addr string, port uint16) string {
	return fmt.Sprintf("%s/%s/%d", vip, addr, port)
}

// startFleet follows the fleet until ctx is done, in goroutines of wg:
// the watcher, and the box key with the box's status. The keys the box
// started with go to the cache when they came from etcd.
func (d *Daemon) startFleet(ctx context.Context, wg *sync.WaitGroup) {
	f := d.fleet
	if !f.startedFromCache {
		d.reloadMu.Lock()
		d.saveCache(f.keys)
		d.reloadMu.Unlock()
	} else {
		d.log.Warn("vipd runs the fleet's revision from its cache: etcd did not answer at start; it follows the fleet once etcd answers",
			"revision", f.keys.Revision, "cache_file", f.id.CacheFile)
	}
	wg.Go(func() { f.watcher.Run(ctx) })
	wg.Go(func() {
		// The last revision applied reaches the cache before vipd
		// exits: the next start may have no etcd.
		<-ctx.Done()
		d.syncFleetCache(stateWaitStop)
	})
	if f.boxKey != nil {
		updates := make(chan fleet.BoxStatus, 1)
		wg.Go(func() { f.boxKey(ctx, updates) })
		wg.Go(func() { d.feedBoxKey(ctx, updates) })
	}
}

// feedBoxKey sends the box's status when it changes: at once after a
// revision is applied or refused, and within boxStatusEvery otherwise.
// The channel holds the latest status only: a box key stuck on etcd
// writes the newest one when it can.
func (d *Daemon) feedBoxKey(ctx context.Context, updates chan fleet.BoxStatus) {
	t := time.NewTicker(boxStatusEvery)
	defer t.Stop()
	var last []byte
	for {
		st := d.boxStatus(true)
		// Applied and Stale move with time; the rest is the box's state.
		cmp := st
		cmp.Applied = time.Time{}
		if b, _ := json.Marshal(cmp); string(b) != string(last) {
			last = b
			select {
			case updates <- st:
			default:
				select {
				case <-updates:
				default:
				}
				updates <- st
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-d.fleet.kick:
		}
	}
}

// BoxStatus is what the box's status key says of it.
func (d *Daemon) BoxStatus() fleet.BoxStatus { return d.boxStatus(false) }

// boxStatus is BoxStatus; cached: the table digests from the cache when
// the snapshot is the one digested last (feedBoxKey's goroutine only).
func (d *Daemon) boxStatus(cached bool) fleet.BoxStatus {
	f := d.fleet
	ws := f.watcher.State()
	ap := f.applied.Load()
	ready := d.Ready() == nil
	st := fleet.BoxStatus{
		Box: f.id.Box, Revision: ap.revision, Applied: ws.Applied, Digest: ap.digest,
		Version: d.opts.Version, Ready: ready, Stale: fleetStale(ws, f.fromCache.Load(), time.Now()),
		Refused: ws.Refused, LastError: ws.Why,
	}
	if snap := d.snaps.Load(); snap != nil {
		c := &f.tables
		switch {
		case cached && c.snap == snap:
			st.Tables = c.digests
		case cached:
			c.snap, c.digests = snap, snap.TableDigests()
			st.Tables = c.digests
		default:
			st.Tables = snap.TableDigests()
		}
	}
	d.mu.Lock()
	st.Seed = d.cfg.Dataplane.FlowHashSeed
	st.Role = d.role.name()
	st.Divergent = d.localOverridesLocked()
	d.mu.Unlock()
	return st
}

// fleetStale: the box cannot know it runs the fleet's latest revision.
func fleetStale(ws fleet.WatchState, fromCache bool, now time.Time) bool {
	return fromCache || !ws.Connected || now.Sub(ws.Current) > staleAfter
}

// localOverridesLocked: a per-box drain or override is in force, which
// the box's table digests show and the fleet's keys do not.
//
// +checklocks:d.mu
func (d *Daemon) localOverridesLocked() bool {
	for _, drained := range d.drains {
		if drained {
			return true
		}
	}
	for _, o := range d.overrides {
		if o.active() {
			return true
		}
	}
	return false
}

// fleetStateLocked is the fleet's part of State; nil without [fleet].
//
// +checklocks:d.mu
func (d *Daemon) fleetStateLocked(now time.Time) *api.FleetState {
	f := d.fleet
	if f == nil {
		return nil
	}
	ws := f.watcher.State()
	ap := f.applied.Load()
	fs := &api.FleetState{
		Endpoints: f.id.Endpoints, Prefix: f.id.Prefix, Box: f.id.Box,
		Connected: ws.Connected, Stale: fleetStale(ws, f.fromCache.Load(), now), FromCache: f.fromCache.Load(),
		Revision: ap.revision, Digest: ap.digest, Applied: ws.Applied, Current: ws.Current,
		Refused: ws.Refused, RefusedWhy: ws.Why, EtcdError: ws.EtcdError, ApplyErrors: ws.Errors,
		CacheFile: f.id.CacheFile, CacheErrors: f.cacheErrors.Load(), Ignored: d.fleetIgnored,
	}
	if !ws.Current.IsZero() {
		fs.AgeSeconds = now.Sub(ws.Current).Seconds()
	}
	return fs
}

// fleetOverrideLocked is the fleet's override of a backend, as the admin
// API shows it; nil for none.
//
// +checklocks:d.mu
func (d *Daemon) fleetOverrideLocked(v *config.VIP, b *config.Backend) *api.FleetOverride {
	o, ok := d.fleetOverrides[fleetOverrideKey(v.Name, b.Address.String(), b.Port)]
	if !ok {
		return nil
	}
	return &api.FleetOverride{What: o.What(), By: o.By, Why: o.Why, At: o.At}
}
