package fleet

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultBoxTTL is the lease of a box's status key, in seconds: a box
// that stops (or loses etcd) disappears from fleet status this long
// after its last renewal.
const DefaultBoxTTL = 10

// BoxKey keeps a box's status under boxes/BOX, on a lease it renews: the
// key goes when the box does.
type BoxKey struct {
	Client *clientv3.Client
	Prefix string
	Box    string
	// TTL is the lease in seconds (DefaultBoxTTL when 0).
	TTL int64
	// Retry is how long to wait after a failure (1 s when 0).
	Retry time.Duration
}

// Key is the box's status key.
func (k *BoxKey) Key() string { return k.Prefix + KeyBoxes + k.Box }

// Run writes each status that arrives on updates, under a lease it keeps
// alive, until ctx is done; a lease that expires or a write that fails is
// granted again and the latest status written again. On return the lease
// is revoked, so the key goes at once.
func (k *BoxKey) Run(ctx context.Context, updates <-chan BoxStatus) {
	ttl, retry := k.TTL, k.Retry
	if ttl <= 0 {
		ttl = DefaultBoxTTL
	}
	if retry <= 0 {
		retry = time.Second
	}
	var latest []byte
	for ctx.Err() == nil {
		lease, alive, err := k.grant(ctx, ttl)
		if err != nil {
			if !sleep(ctx, retry) {
				return
			}
			continue
		}
		if latest != nil {
			if _, err := k.Client.Put(ctx, k.Key(), string(latest), clientv3.WithLease(lease)); err != nil {
				k.revoke(lease)
				if !sleep(ctx, retry) {
					return
				}
				continue
			}
		}
	serve:
		for {
			select {
			case <-ctx.Done():
				k.revoke(lease)
				return
			case _, ok := <-alive:
				if !ok { // the lease is gone (expired, revoked, etcd away)
					break serve
				}
			case st, ok := <-updates:
				if !ok { // no more updates: keep the last one alive
					updates = nil
					continue
				}
				b, err := st.Encode()
				if err != nil {
					continue
				}
				latest = b
				if _, err := k.Client.Put(ctx, k.Key(), string(b), clientv3.WithLease(lease)); err != nil {
					break serve
				}
			}
		}
		k.revoke(lease)
		if !sleep(ctx, retry/10) {
			return
		}
	}
}

// grant takes a lease of ttl seconds and keeps it alive.
func (k *BoxKey) grant(ctx context.Context, ttl int64) (clientv3.LeaseID, <-chan *clientv3.LeaseKeepAliveResponse, error) {
	g, err := k.Client.Grant(ctx, ttl)
	if err != nil {
		return 0, nil, err
	}
	alive, err := k.Client.KeepAlive(ctx, g.ID)
	if err != nil {
		return 0, nil, err
	}
	return g.ID, alive, nil
}

// revoke ends lease now, so that the key goes with it (best effort, a
// second at most).
func (k *BoxKey) revoke(lease clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	k.Client.Revoke(ctx, lease)
}
