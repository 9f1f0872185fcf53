package daemon

import (
	"context"
	"sync"
	"time"
)

// Active flows per backend come from a walk over every worker's connection
// table shard, which the workers make between their batches.
const (
	// flowsTTL is how long a walk's result answers /v1/state: a loop of
	// requests costs the workers one walk per flowsTTL at most.
	flowsTTL = time.Second
	// flowsTimeout bounds one walk.
	flowsTimeout = 10 * time.Second
)

// flowCache answers "how many flows has each backend" from a walk made at
// most once per ttl and never twice at a time: callers that come while a
// walk runs wait for it, callers within ttl of its end get its result. A
// failed walk is not reused.
type flowCache struct {
	base context.Context // the walks' context: Run's
	walk func(context.Context) (map[uint32]int, error)
	ttl  time.Duration
	now  func() time.Time

	mu sync.Mutex
	// +checklocks:mu
	last *flowWalk // the running or the latest walk
	// +checklocks:mu
	walks int // walks made, for tests
}

// flowWalk is one walk. counts and err are written before done is closed
// and only read after.
type flowWalk struct {
	seq    int // 1 for the cache's first walk, and so on
	done   chan struct{}
	counts map[uint32]int
	err    error
	// finished and at are guarded by the mu of the flowCache that made
	// the walk. checklocks cannot check that: a guard it can name is a
	// field of this struct or a package variable.
	finished bool
	at       time.Time // when it finished
}

func newFlowCache(base context.Context, walk func(context.Context) (map[uint32]int, error), ttl time.Duration) *flowCache {
	return &flowCache{base: base, walk: walk, ttl: ttl, now: time.Now}
}

// get returns the flows per backend, at most ttl old. The map is shared:
// callers must not change it.
func (c *flowCache) get(ctx context.Context) (map[uint32]int, error) {
	counts, _, err := c.getWalk(ctx)
	return counts, err
}

// getWalk is get, and also which walk answered (see flowWalk.seq): a
// caller can tell a reused result from a new one.
func (c *flowCache) getWalk(ctx context.Context) (map[uint32]int, int, error) {
	c.mu.Lock()
	w := c.last
	if w == nil || w.finished && (w.err != nil || c.now().Sub(w.at) >= c.ttl) {
		c.walks++
		w = &flowWalk{seq: c.walks, done: make(chan struct{})}
		c.last = w
		go c.run(w)
	}
	c.mu.Unlock()
	select {
	case <-w.done:
		return w.counts, w.seq, w.err
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
}

// run makes walk w under the cache's own context, so that a caller that
// gives up does not fail the others waiting for it.
func (c *flowCache) run(w *flowWalk) {
	ctx, cancel := context.WithTimeout(c.base, flowsTimeout)
	w.counts, w.err = c.walk(ctx)
	cancel()
	c.mu.Lock()
	w.finished, w.at = true, c.now()
	c.mu.Unlock()
	close(w.done)
}

// walked returns the number of walks made.
func (c *flowCache) walked() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.walks
}
