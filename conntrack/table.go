package conntrack

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Config sizes a Table.
type Config struct {
	// Capacity is the number of flows the table can hold, over all
	// shards. Each shard gets ceil(Capacity/Shards) slots rounded up to a
	// whole number of 8-slot buckets, at least two buckets. Inserts start
	// to fail for some flows before every slot is used (see Insert and
	// TestOccupancy; README.md records the figure), so size it ~10% above
	// the flows to be pinned. Memory is 40 bytes per slot.
	Capacity int
	// Shards is the number of shards, one per dataplane worker.
	Shards int
	// Timeouts are the per-state idle timeouts; zero fields take defaults.
	Timeouts Timeouts
	// ExpiryBucketsPerAdvance is how many buckets an Advance examines at
	// most for timed-out flows; 0 means DefaultExpiryBucketsPerAdvance.
	ExpiryBucketsPerAdvance int
	// SweepPeriod is how long the expiry scan takes to examine every
	// bucket of a shard, whatever the packet rate: each tick of the clock
	// adds len(buckets)/SweepPeriod buckets to what the next Advance calls
	// examine (at most ExpiryBucketsPerAdvance a call, IdleExpiryBuckets
	// an AdvanceIdle). 0 means DefaultSweepPeriod; at least a second.
	SweepPeriod time.Duration
	// BucketKey is the secret that places flows in buckets
	// (docs/configuration.md, "The connection table under a flood", says
	// why it exists). All zero, the normal case, means New
	// draws one from crypto/rand, so that no one outside the process can
	// tell which flows share a bucket. Tests set it to get a reproducible layout. It is
	// local to the table: unlike the flow hash seed it is not shared with
	// other boxes, and nothing but the table's layout depends on it.
	BucketKey [16]byte
}

// DefaultExpiryBucketsPerAdvance is ExpiryBucketsPerAdvance when unset: at
// most 64 slots a batch, a few hundred nanoseconds.
const DefaultExpiryBucketsPerAdvance = 8

// DefaultSweepPeriod is SweepPeriod when unset. The scan only keeps
// Stats.Entries honest and hands idle buckets' slots back early (a
// timed-out flow is a miss and a free slot whether or not the scan has
// reached it), so it need not be fast: 10 s puts Entries within 10 s of
// the timeouts, for 13,108 bucket reads a second per shard of the default
// 1M slots, about a millisecond of CPU.
const DefaultSweepPeriod = 10 * time.Second

// IdleExpiryBuckets bounds an AdvanceIdle: a worker without traffic calls
// it once per poll timeout (100 ms in vipd), which keeps a 10 s sweep of
// shards up to 409,600 buckets (3.2M slots); the scan of a larger idle
// shard takes longer. 4,096 buckets take tens of microseconds, the most a
// packet arriving meanwhile waits.
const IdleExpiryBuckets = 4096

// maxBucketsPerShard keeps bucket arithmetic in uint32 without overflow
// (alternate adds an offset < nb to an index < nb).
const maxBucketsPerShard = 1 << 31

// ErrConfig is wrapped by New's errors for invalid configurations.
var ErrConfig = errors.New("conntrack: invalid config")

// Table is the connection table: a fixed set of shards, each owned by one
// worker. Only Stats, Capacity, NumShards, Bytes and Now may be called from
// any goroutine; everything else goes through the owner of a Shard.
type Table struct {
	shards []*Shard
	start  time.Time
}

// New allocates the whole table up front; nothing allocates afterwards.
func New(cfg Config) (*Table, error) {
	switch {
	case cfg.Shards < 1:
		return nil, fmt.Errorf("%w: Shards = %d, want >= 1", ErrConfig, cfg.Shards)
	case cfg.Capacity < 1:
		return nil, fmt.Errorf("%w: Capacity = %d, want >= 1", ErrConfig, cfg.Capacity)
	case cfg.ExpiryBucketsPerAdvance < 0:
		return nil, fmt.Errorf("%w: ExpiryBucketsPerAdvance = %d, want >= 0", ErrConfig, cfg.ExpiryBucketsPerAdvance)
	case cfg.SweepPeriod < 0 || cfg.SweepPeriod > 0 && cfg.SweepPeriod < time.Second:
		return nil, fmt.Errorf("%w: SweepPeriod = %v, want 0 (the default) or at least 1s", ErrConfig, cfg.SweepPeriod)
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{
		{"TCPUnestablished", cfg.Timeouts.TCPUnestablished},
		{"TCPUnconfirmed", cfg.Timeouts.TCPUnconfirmed},
		{"TCPEstablished", cfg.Timeouts.TCPEstablished},
		{"TCPClosing", cfg.Timeouts.TCPClosing},
		{"UDP", cfg.Timeouts.UDP},
	} {
		if f.d < 0 {
			return nil, fmt.Errorf("%w: Timeouts.%s = %v, want >= 0", ErrConfig, f.name, f.d)
		}
	}
	// Ceiling divisions written so that a Capacity near MaxInt cannot
	// overflow into a tiny table.
	perShard := cfg.Capacity / cfg.Shards
	if cfg.Capacity%cfg.Shards != 0 {
		perShard++
	}
	nb := perShard / slotsPerBucket
	if perShard%slotsPerBucket != 0 {
		nb++
	}
	nb = max(2, nb)
	if nb > maxBucketsPerShard {
		return nil, fmt.Errorf("%w: %d slots per shard, want <= %d", ErrConfig, perShard, maxBucketsPerShard*slotsPerBucket)
	}
	scan := cfg.ExpiryBucketsPerAdvance
	if scan == 0 {
		scan = DefaultExpiryBucketsPerAdvance
	}
	scan = min(scan, nb)
	period := cfg.SweepPeriod
	if period == 0 {
		period = DefaultSweepPeriod
	}
	periodTicks := uint64((period + time.Second - 1) / time.Second)
	timeout := cfg.Timeouts.ticksByState()
	kb := cfg.BucketKey
	if kb == ([16]byte{}) {
		if _, err := rand.Read(kb[:]); err != nil {
			return nil, fmt.Errorf("conntrack: bucket key: %w", err)
		}
	}
	key := [2]uint64{binary.LittleEndian.Uint64(kb[:8]), binary.LittleEndian.Uint64(kb[8:])}

	t := &Table{shards: make([]*Shard, cfg.Shards), start: time.Now()}
	for i := range t.shards {
		s := &Shard{
			buckets:    make([]bucket, nb),
			nb:         uint64(nb),
			key:        key,
			timeout:    timeout,
			minTimeout: slices.Min(timeout[StateSynSent : StateUDP+1]),
			scan:       scan,
			sweepRate:  (uint64(nb) + periodTicks - 1) / periodTicks,
			sweepTicks: periodTicks,
		}
		adviseHugePages(s.buckets)
		capacity := s.nb * slotsPerBucket
		s.relocMax = capacity - capacity/32
		s.publish()
		t.shards[i] = s
	}
	return t, nil
}

// Shard returns shard i, 0 <= i < NumShards. Hand each shard to exactly one
// goroutine.
func (t *Table) Shard(i int) *Shard { return t.shards[i] }

// NumShards returns the number of shards.
func (t *Table) NumShards() int { return len(t.shards) }

// Capacity returns the number of slots over all shards (Config.Capacity
// after rounding).
func (t *Table) Capacity() int { return len(t.shards) * len(t.shards[0].buckets) * slotsPerBucket }

// Bytes returns the memory held by the table's slots.
func (t *Table) Bytes() int { return len(t.shards) * len(t.shards[0].buckets) * bucketBytes }

// Now returns the current tick: whole seconds since New, from the monotonic
// clock. Workers call it once per batch and pass the result to Advance.
func (t *Table) Now() Tick { return Tick(time.Since(t.start) / TickDuration) }

// Stats returns the counters summed over all shards, each as of its last
// Advance. Safe to call from any goroutine, concurrently with the owners.
func (t *Table) Stats() Stats {
	var sum Stats
	for _, s := range t.shards {
		sum.add(s.snapshot())
	}
	return sum
}
