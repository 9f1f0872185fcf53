// Package conntrack is vipd's connection table: a sharded, fixed-capacity,
// open-addressed flow table that pins every live flow to its backend so that
// changes of the backend set do not break established connections. Maglev
// (package hashing) is the foundation; this table is the protection.
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
// and well mixed in all 64 bits. It need not be secret, and is not: its
// seed is shared by every box behind the routers and has a public default.
// The table therefore never takes a bucket straight from h (see Keyed
// buckets).
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
// # Layout and memory
//
// A shard is one flat []bucket with no pointers, so the garbage collector
// never scans it. A bucket holds 8 flows in 320 bytes: one cache line of
// metadata (16-bit tags, last-seen ticks, states, an overflow count) and
// eight 32-byte records (Key, backend, flags). That is 40 bytes per slot;
// a table holding 10M flows at 90% occupancy takes about 450 MB. Large
// tables are backed by transparent huge pages where the kernel allows, to
// keep random lookups from missing the TLB as well as the cache.
//
// Every flow has two candidate buckets; Insert uses the less loaded one and,
// when both are full, may move one resident flow to its own other bucket.
// The first refusals come some way short of full (TestOccupancy measures
// where; README.md records it), so Config.Capacity should be ~10% above
// the flows to be held. Capacity is rounded up per shard to whole buckets
// (at least two).
//
// # Keyed buckets
//
// Anyone who knows the flow hash seed can compute h for any tuple, and the
// seed cannot be secret: every box must use the same one so that they all
// pick the same backend, and the default is public. Were the bucket and
// tag taken from h, a client could pick tuples that all land in one bucket
// pair, and fill or churn those 16 slots (or those of a victim's flow)
// with a trickle of packets. So each Table draws a secret at New
// (crypto/rand; Config.BucketKey fixes it for tests) and every shard takes
// a flow's bucket and tag from a keyed bijection of h: two multiplies,
// each after folding in a word of the secret, with shift-xors between. The
// secret never leaves the process and nothing else depends on it: Maglev
// still uses h alone, and a restarted box starts with an empty table
// anyway. The mix is not a cryptographic PRF; it is there so that which
// tuples share a bucket differs from table to table and cannot be read
// off the public hash.
//
// # Time and expiry
//
// The clock is a Tick, whole seconds since the Table was created. Workers
// read it once per batch (Table.Now) and pass it to Shard.Advance; nothing on
// the packet path reads the wall clock. A flow expires when it has been idle
// longer than its state's timeout (Timeouts; see State for the machine).
// Advance examines a few buckets from a round-robin cursor per call
// (at most Config.ExpiryBucketsPerAdvance), never sweeping the table, and
// only as many as the clock owes: the cursor goes round a shard once a
// Config.SweepPeriod, however many batches a second its worker takes. A
// timed-out flow not reached yet is already a miss for Lookup and a free
// slot for Insert. A worker should call AdvanceIdle when it idles (e.g. on
// its poll timeout), so that expiry and the published counters keep moving
// without traffic.
//
// # When full
//
// Insert fills a free slot; else reuses a timed-out flow's slot; else moves a
// flow to make room; else evicts an evictable flow: of the unproven flows
// (below), the one with the lowest proof level, and among those the one
// seen longest ago; else refuses with Untracked, and the caller forwards
// the packet by its stateless Maglev pick. A proven flow is never evicted
// to make room for a new one. Each outcome has a counter in Stats.
//
// # Proof over time
//
// The table sees only the client's packets: in DSR the backend answers the
// client directly, and NAT replies are translated statelessly, maybe on
// another worker, without touching the table. Whatever a client sends can
// therefore be spoofed, so no packet, nor a SYN followed by an ACK, may by
// itself make an entry permanent: a flood of such pairs from random
// sources would fill the table with entries no new flow could replace for
// a whole established timeout.
//
// What a blind spoofer does not do cheaply is keep a tuple alive over time.
// So every entry carries a proof level: the number of distinct ticks
// (seconds) in which its flow sent packets that carry a conversation (TCP:
// any packet but a SYN without ACK, a FIN or a RST; other protocols: every
// datagram), at most ProofTicks = 3. State documents the exact transitions:
//
//   - TCP: a SYN makes SynSent (level 0); the first other packet makes
//     Unconfirmed at level 1 (also when it is the flow's first packet, as
//     for a flow picked up mid-stream); each later packet in a later tick
//     than the flow's last one adds a level; at level 3 the flow is
//     Established. FIN or RST makes Closing, which keeps the level.
//   - UDP and every other protocol: the first datagram makes UDPNew at
//     level 1, each datagram in a later tick adds a level, at 3 it is UDP.
//   - A flow at level 3 (Established, UDP, or Closing after Established)
//     is proven: never evicted, kept until its idle timeout or Delete.
//     Every other flow is evictable (Entry.Evictable).
//
// Three distinct ticks span more than one second of real time. A real
// transfer, which sends every tick, is proven within about two seconds of
// its handshake; a spoofer must send at least three packets per tuple,
// paced over more than a second, and its entries must live through that
// time while every new flow (its own flood included) evicts unproven
// entries, least proven and longest idle first: a spoofed pair is at level
// 0 or 1 and idle from then on, so it is what goes. Unproven TCP flows
// expire after their own short timeout (Timeouts.TCPUnconfirmed). The cost
// per packet is flat: the next phase is one lookup in a table indexed by
// the phase, the packet's class and whether its tick differs from the
// flow's last one, and the level lives in spare bits of the state byte.
//
// Limits. A flow that has not proven itself looks like the flood until it
// has: a flood that replaces the table's unproven part within a tick or
// two can evict a new real flow before its third tick (it is then
// re-inserted by its next packet, with the same Maglev pick, and forwarded
// all along). A sender that does keep a tuple alive for the proof time
// cannot be told from a client with what the table sees; it can hold
// entries as a real client does (and keep one with a packet per
// established timeout), up to the capacity, past which new flows are
// forwarded statelessly (Untracked). TestSpoofedHandshakeFlood runs both
// rates.
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
// # Reverse lookups without a table scan
//
// NAT replies need no reverse index. The control plane guarantees that a
// (backend address, backend port, protocol) belongs to exactly one NAT VIP,
// so the reply path maps the reply's source back to that VIP (id, address and
// port), rebuilds the forward Key from the reply's destination (the client)
// and the VIP port, computes the forward flow hash, and does one ordinary
// Lookup. ICMP errors for a VIP flow work the same way from the embedded,
// reversed header.
package conntrack
