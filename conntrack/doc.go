// Package conntrack is vipd's connection table: a sharded, fixed-capacity,
// open-addressed flow table that pins every live flow to its backend so that
// changes of the backend set do not break established connections. Maglev
// (package hashing) is the foundation; this table is the protection. Why it
// resists a spoofed flood, and how, is in docs/configuration.md, "The
// connection table under a flood"; its layout, memory and speed in
// README.md beside this file.
//
// # Threading
//
// A Table is a fixed set of shards, one per dataplane worker. Flows reach a
// worker by the NIC's RSS (or AF_PACKET fanout hash), so each worker owns its
// shard outright: a Shard has no locks and no atomics on the packet path and
// must only be used by its owner goroutine. The exceptions are Table.Stats,
// Capacity, Bytes, NumShards and Now, which any goroutine may call: each
// shard publishes its counters with atomic stores once per Advance, so
// Stats lags a shard by at most one batch.
//
// # Per packet
//
// The pipeline computes the flow hash once (hashing.Flow4/Flow6, the hash
// that also picks the Maglev slot) and passes it with the Key; conntrack
// never hashes keys. h must be the same function of the Key on every call
// and well mixed in all 64 bits. It need not be secret: the table takes a
// flow's bucket from h mixed with a secret of its own, drawn at New
// (Config.BucketKey fixes it for tests), so that knowing the shared
// flow-hash seed does not let anyone aim at a bucket.
//
//	s.Advance(tab.Now()) // once per batch, before its frames
//	// for each frame of the batch:
//	e, ok := s.Lookup(&k, h)
//	if !ok {
//		b := maglev(h)
//		s.Insert(&k, h, b, tcpFlags) // Untracked or not, the packet goes to b
//		return b
//	}
//	if removedOrDown(e.Backend()) {
//		s.SetBackend(e, maglev(h))
//	}
//	s.Touch(e, tcpFlags)
//	return e.Backend()
//
// An Entry is a handle valid until the next Insert, Delete or Advance on its
// shard, and used for the packet at hand; more exactly, while the shard's
// Epoch stays the same, which a caller may check to keep the Entry for the
// next packet of the same flow (a burst's) instead of looking it up again.
// Lookup, Insert, Touch, SetBackend, Renew, Delete and Advance do not allocate.
//
// Config.Capacity should be ~10% above the flows to be held: the first
// refusals come some way short of full (TestOccupancy). Capacity is rounded
// up per shard to whole buckets (at least two).
//
// # Time and expiry
//
// The clock is a Tick, whole seconds since the Table was created. Workers
// read it once per batch (Table.Now) and pass it to Shard.Advance; nothing on
// the packet path reads the wall clock. A flow expires when it has been idle
// longer than its state's timeout (Timeouts; see State for the machine).
// Advance examines a bounded number of buckets per call
// (Config.ExpiryBucketsPerAdvance), going round a shard once a
// Config.SweepPeriod; a timed-out flow not reached yet is already a miss for
// Lookup and a free slot for Insert. A worker should call AdvanceIdle when
// it idles (e.g. on its poll timeout), so that expiry and the published
// counters keep moving without traffic.
//
// # When full, and proof over time
//
// Insert fills a free slot; else reuses a timed-out flow's slot; else moves a
// flow to make room; else evicts an evictable flow: of the unproven flows,
// the one with the lowest proof level, and among those the one seen longest
// ago; else refuses with Untracked, and the caller forwards the packet by
// its stateless Maglev pick. Each outcome has a counter in Stats.
//
// A flow's proof level counts the distinct ticks in which it sent packets
// that carry a conversation, up to ProofTicks; a flow at ProofTicks is
// proven and never evicted to make room for a new one (Entry.Evictable),
// only expired or deleted. No single packet, nor a SYN followed by an ACK,
// proves a flow: the table sees only the client's half, which can be
// spoofed. State documents the exact transitions.
//
// # Backend changes
//
// The table stores an opaque backend reference per flow. On each hit the
// pipeline compares it with its snapshot: a removed or down backend is
// replaced by a fresh Maglev pick with SetBackend (counted as a repick); a
// draining backend keeps its flows. A new connection on a flow's tuple (a
// client reusing its ports) that the pipeline places elsewhere takes the
// entry over with Renew: new backend, a new flow's state and proof level,
// its age counted afresh. Shard.CountByBackend counts live flows
// per backend for the control plane in bounded steps: the owning worker runs
// one step between batches (the control plane sends the request, the worker
// hands back the sum), like every other Shard method.
//
// There is no reverse index: NAT replies are translated without the table
// (package dataplane, reply4.go), and an ICMP error about a VIP flow is
// looked up with the forward Key rebuilt from the packet it quotes.
package conntrack
