package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/vipd/vipd/control/config"
)

// Beginning is what a box starts with: the keys, as one snapshot, and
// the configuration they make with its local file.
type Beginning struct {
	Keys     *Keys
	Composed *Composed
	// FromCache: the keys are the cache file's (etcd did not answer, or
	// its latest revision does not apply on this box); Saved is when the
	// cache was written.
	FromCache bool
	Saved     time.Time
	// Etcd is why the box did not start from etcd (nil when it did).
	Etcd error
	// CacheProblem is why the cache was not usable, when the box started
	// from etcd anyway (nil: it was, or was not needed): the next
	// applied revision replaces it.
	CacheProblem error
}

// Begin reads the keys a box starts with: from etcd (st), given timeout
// to answer; when it does not, or its latest revision does not apply on
// this box, from the cache file ([fleet] cache_file), the last revision
// the box applied. No etcd and no usable cache is an error naming both:
// a box never starts with VIPs it cannot know are the fleet's.
func Begin(ctx context.Context, st Store, local *config.Config, timeout time.Duration) (*Beginning, error) {
	f := local.Fleet
	if f == nil {
		return nil, errors.New("fleet: Begin needs a configuration with [fleet]")
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	k, etcdErr := Read(rctx, st)
	cancel()
	if etcdErr != nil {
		etcdErr = fmt.Errorf("etcd (%s) did not answer within %v: %w", strings.Join(f.Endpoints, ", "), timeout, etcdErr)
	} else {
		c, err := Compose(local, k)
		if err == nil {
			b := &Beginning{Keys: k, Composed: c}
			if _, cerr := Load(f.CacheFile, f.Prefix); cerr != nil && !errors.Is(cerr, ErrNoCache) {
				b.CacheProblem = cerr
			}
			return b, nil
		}
		etcdErr = fmt.Errorf("the fleet's revision %d does not apply on this box: %w", k.Revision, err)
	}
	s, err := Load(f.CacheFile, f.Prefix)
	if err != nil {
		return nil, fmt.Errorf("%w; and no cache to start from: %w", etcdErr, err)
	}
	ck := s.Keys()
	c, err := Compose(local, ck)
	if err != nil {
		return nil, fmt.Errorf("%w; and the cache %s (revision %d) does not apply either: %w", etcdErr, f.CacheFile, s.Revision, err)
	}
	return &Beginning{Keys: ck, Composed: c, FromCache: true, Saved: s.Saved, Etcd: etcdErr}, nil
}
