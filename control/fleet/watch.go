package fleet

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// KV is a key below the prefix (without it) and its value, as read.
type KV struct {
	Key   string
	Value []byte
}

// Batch is what a watch delivers at once: the events of one or more whole
// revisions, or a progress notification (no events: the watch is current
// as of Revision), or Err.
type Batch struct {
	Events   []Event
	Revision int64
	// Compacted: the watch asked for a revision etcd has compacted away;
	// the watcher reads the keys again.
	Compacted bool
	Err       error
}

// Store is the fleet's keys in etcd, as the watcher needs them: the etcd
// client in vipd, a fake in tests.
type Store interface {
	// Get reads every key below the prefix, and the revision they are
	// as of.
	Get(ctx context.Context) (rev int64, kvs []KV, err error)
	// Watch watches the prefix from revision rev on, requiring a
	// leader and asking for progress notifications. The channel closes
	// when ctx is done or the watch fails for good.
	Watch(ctx context.Context, rev int64) <-chan Batch
}

// Watcher keeps a box on the fleet's latest revision: it reads the keys,
// applies them as one snapshot, and applies each later revision whole.
type Watcher struct {
	Store Store
	// Apply applies the keys as of one revision (one compile, one
	// publish). An error refuses that revision: the box keeps what it
	// had, and the next revision is tried afresh.
	Apply func(*Keys) error
	// Retry is how long to wait before reading again after a failure
	// (default 1 s).
	Retry time.Duration

	mu sync.Mutex
	// +checklocks:mu
	state WatchState
}

// WatchState is what the watcher knows, for status and metrics.
type WatchState struct {
	// Connected: the watch runs and etcd answered (an event or a
	// progress notification) since it last failed.
	Connected bool
	// Revision is the revision of the keys last applied, Applied when;
	// Current when the box last learned it was current (an event or a
	// progress notification at or past Revision).
	Revision int64
	Applied  time.Time
	Current  time.Time
	// Refused is the last revision Apply refused (0: none since the
	// last one applied), and Why why.
	Refused int64
	Why     string
	// EtcdError is the last failure to read or watch etcd, cleared when
	// it answers again.
	EtcdError string
	// Errors counts refused revisions.
	Errors uint64
}

// State returns a copy of the watcher's state.
func (w *Watcher) State() WatchState {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state
}

func (w *Watcher) update(f func(*WatchState)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(&w.state)
}

// apply applies k and records the outcome.
func (w *Watcher) apply(k *Keys, now time.Time) {
	err := w.Apply(k)
	w.update(func(s *WatchState) {
		if err != nil {
			s.Refused, s.Why, s.Errors = k.Revision, err.Error(), s.Errors+1
			return
		}
		s.Revision, s.Applied, s.Current, s.Refused, s.Why = k.Revision, now, now, 0, ""
	})
}

// Run keeps the box on the latest revision until ctx is done: read and
// apply, watch from the next revision, apply each revision's snapshot;
// read again after a compaction or a failed watch.
func (w *Watcher) Run(ctx context.Context) error {
	retry := w.Retry
	if retry <= 0 {
		retry = time.Second
	}
	for ctx.Err() == nil {
		keys, err := w.read(ctx)
		if err != nil {
			w.update(func(s *WatchState) { s.Connected, s.EtcdError = false, "reading etcd: "+err.Error() })
			if !sleep(ctx, retry) {
				break
			}
			continue
		}
		w.watch(ctx, keys)
		if !sleep(ctx, retry/10) {
			break
		}
	}
	return nil
}

// read reads every key and applies them, unless the box already holds
// that revision.
func (w *Watcher) read(ctx context.Context) (*Keys, error) {
	k, err := Read(ctx, w.Store)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	w.update(func(s *WatchState) { s.Connected, s.EtcdError = true, "" })
	if st := w.State(); st.Revision != k.Revision || st.Applied.IsZero() {
		w.apply(k.Clone(), now)
	} else {
		w.update(func(s *WatchState) { s.Current = now })
	}
	return k, nil
}

// Read reads every key below the prefix as one snapshot.
func Read(ctx context.Context, st Store) (*Keys, error) {
	rev, kvs, err := st.Get(ctx)
	if err != nil {
		return nil, err
	}
	k := &Keys{Revision: rev}
	for _, kv := range kvs {
		k.apply(Event{Key: kv.Key, Value: kv.Value, Revision: rev})
	}
	return k, nil
}

// Started tells the watcher what the box started with: the keys as of
// rev, applied at applied, last known to be the fleet's latest at
// current (when they were read from etcd; for a cache, when it was
// saved); connected when they were read from etcd just now. Call it
// before Run.
func (w *Watcher) Started(rev int64, applied, current time.Time, connected bool) {
	w.update(func(s *WatchState) {
		s.Revision, s.Applied, s.Current, s.Connected = rev, applied, current, connected
	})
}

// watch applies k's later revisions until the watch ends.
func (w *Watcher) watch(ctx context.Context, k *Keys) {
	for b := range w.Store.Watch(ctx, k.Revision+1) {
		switch {
		case b.Compacted:
			w.update(func(s *WatchState) {
				s.EtcdError = fmt.Sprintf("watch from revision %d: compacted; reading the keys again", k.Revision+1)
			})
			return
		case b.Err != nil:
			w.update(func(s *WatchState) { s.Connected, s.EtcdError = false, "watching etcd: "+b.Err.Error() })
			return
		}
		now := time.Now()
		for _, snap := range k.Advance(b.Events) {
			w.apply(snap, now)
		}
		if b.Revision > k.Revision {
			k.Revision = b.Revision
		}
		w.update(func(s *WatchState) {
			s.Connected, s.EtcdError = true, ""
			if b.Revision >= s.Revision {
				s.Current = now
			}
		})
	}
	w.update(func(s *WatchState) { s.Connected = false })
}

// sleep waits d or until ctx is done; false when ctx is.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
