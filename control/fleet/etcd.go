package fleet

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// EtcdStore is the Store of a fleet in etcd: every key below Prefix.
type EtcdStore struct {
	Client *clientv3.Client
	// Prefix is [fleet] prefix, ending in "/".
	Prefix string
	// Progress is how often a watch asks etcd whether it is current
	// (DefaultProgress when 0): etcd's own progress notifications come
	// every 10 minutes, too seldom to tell a quiet fleet from a lost one.
	Progress time.Duration
}

// DefaultProgress is how often a watch asks for a progress notification.
const DefaultProgress = 2 * time.Second

// Get implements Store: one range read of the prefix, linearizable (a
// member cut off from the quorum fails it rather than answer stale).
func (s *EtcdStore) Get(ctx context.Context) (int64, []KV, error) {
	resp, err := s.Client.Get(ctx, s.Prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, nil, err
	}
	kvs := make([]KV, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		kvs[i] = KV{Key: strings.TrimPrefix(string(kv.Key), s.Prefix), Value: kv.Value}
	}
	return resp.Header.Revision, kvs, nil
}

// Watch implements Store: the prefix from rev on, requiring a leader (a
// member that lost the quorum ends the watch instead of going quiet) and
// with progress notifications (so that a quiet fleet still shows the box
// current).
func (s *EtcdStore) Watch(ctx context.Context, rev int64) <-chan Batch {
	out := make(chan Batch)
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	wch := s.Client.Watch(wctx, s.Prefix, clientv3.WithPrefix(), clientv3.WithRev(rev), clientv3.WithProgressNotify())
	every := s.Progress
	if every <= 0 {
		every = DefaultProgress
	}
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
				// The same context as the watch: etcd answers on the
				// watch stream the context's metadata selects. A failure
				// shows as the box going stale.
				s.Client.RequestProgress(wctx)
			}
		}
	}()
	go func() {
		defer close(out)
		defer cancel()
		for resp := range wch {
			b := Batch{Revision: resp.Header.Revision}
			switch err := resp.Err(); {
			case resp.CompactRevision != 0 || errors.Is(err, rpctypes.ErrCompacted):
				b.Compacted = true
			case err != nil:
				b.Err = err
			default:
				for _, ev := range resp.Events {
					b.Events = append(b.Events, Event{
						Key:      strings.TrimPrefix(string(ev.Kv.Key), s.Prefix),
						Value:    ev.Kv.Value,
						Delete:   ev.Type == clientv3.EventTypeDelete,
						Revision: ev.Kv.ModRevision,
					})
				}
			}
			select {
			case out <- b:
			case <-ctx.Done():
				return
			}
			if b.Compacted || b.Err != nil {
				return
			}
		}
		if ctx.Err() == nil {
			select {
			case out <- Batch{Err: errors.New("the watch ended")}:
			case <-ctx.Done():
			}
		}
	}()
	return out
}
