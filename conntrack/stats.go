package conntrack

import "sync/atomic"

// Stats are a table's (or one shard's) counters. They satisfy, per shard
// and summed:
//
//	Entries = Inserts - Expirations - EvictedExpired - EvictedUnestablished - Deletes
type Stats struct {
	Capacity uint64 // slots (flows the table can hold at most)
	Entries  uint64 // occupied slots, including timed-out flows not yet reclaimed
	Inserts  uint64 // flows stored by Insert, whatever slot they took

	Expirations          uint64 // timed-out flows reclaimed by Advance, Lookup or Insert's duplicate check
	EvictedExpired       uint64 // timed-out flows overwritten by Insert in a full bucket pair
	EvictedUnestablished uint64 // unproven (evictable) live flows overwritten by Insert in a full bucket pair
	UntrackedFull        uint64 // Inserts refused (Untracked): the flow goes stateless
	Relocations          uint64 // flows moved to their other bucket to make room
	Deletes              uint64 // flows removed by Delete
	Repicks              uint64 // SetBackend and Renew calls (flows re-pinned off a removed or down backend, tuples given to a new connection)
}

func (a *Stats) add(b Stats) {
	a.Capacity += b.Capacity
	a.Entries += b.Entries
	a.Inserts += b.Inserts
	a.Expirations += b.Expirations
	a.EvictedExpired += b.EvictedExpired
	a.EvictedUnestablished += b.EvictedUnestablished
	a.UntrackedFull += b.UntrackedFull
	a.Relocations += b.Relocations
	a.Deletes += b.Deletes
	a.Repicks += b.Repicks
}

// counters are the owner's plain counters; only the owner reads or writes
// them, so the packet path pays an ordinary increment.
type counters struct {
	inserts, expirations, evictedExpired, evictedUnestablished uint64
	untracked, relocations, deletes, repicks                   uint64
}

// published is the copy of the counters other goroutines read. The owner
// stores it once per Advance. The padding keeps it off the cache lines of
// the owner's hot fields, so a reader polling Stats does not steal them.
type published struct {
	_     [64]byte
	stats [10]atomic.Uint64 // in Stats field order
	_     [64]byte
}

// Stats returns the shard's exact current counters. Owner only.
func (s *Shard) Stats() Stats {
	return Stats{
		Capacity:             s.nb * slotsPerBucket,
		Entries:              s.live,
		Inserts:              s.c.inserts,
		Expirations:          s.c.expirations,
		EvictedExpired:       s.c.evictedExpired,
		EvictedUnestablished: s.c.evictedUnestablished,
		UntrackedFull:        s.c.untracked,
		Relocations:          s.c.relocations,
		Deletes:              s.c.deletes,
		Repicks:              s.c.repicks,
	}
}

// publish makes the counters visible to snapshot. It runs once per batch
// (Advance), and stores only the counters that changed: an atomic store is
// a locked instruction on amd64, which also waits for every store before
// it to drain, and at steady state most counters do not move for many
// batches. The loads are plain ones there.
func (s *Shard) publish() {
	st := s.Stats()
	for i, v := range [...]uint64{st.Capacity, st.Entries, st.Inserts, st.Expirations,
		st.EvictedExpired, st.EvictedUnestablished, st.UntrackedFull, st.Relocations,
		st.Deletes, st.Repicks} {
		if p := &s.pub.stats[i]; p.Load() != v {
			p.Store(v)
		}
	}
}

// snapshot returns the counters as of the shard's last Advance. Any goroutine.
func (s *Shard) snapshot() Stats {
	p := &s.pub.stats
	return Stats{
		Capacity:             p[0].Load(),
		Entries:              p[1].Load(),
		Inserts:              p[2].Load(),
		Expirations:          p[3].Load(),
		EvictedExpired:       p[4].Load(),
		EvictedUnestablished: p[5].Load(),
		UntrackedFull:        p[6].Load(),
		Relocations:          p[7].Load(),
		Deletes:              p[8].Load(),
		Repicks:              p[9].Load(),
	}
}
