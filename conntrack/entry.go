package conntrack

// Entry is a handle to one tracked flow, returned by Lookup and Insert. It
// is a small value (no allocation) pointing into the shard's arrays.
//
// An Entry is valid only until the next Insert, Delete or Advance on the
// same shard: any of those may expire, evict or move the flow and reuse its
// slot. Use it right away for the packet at hand; never store it.
type Entry struct {
	b  *bucket
	bi uint32 // index of b in the shard
	i  uint32 // slot in b, 0-7
}

// Key returns the flow's key.
func (e Entry) Key() Key { return e.b.recs[e.i&7].key }

// Backend returns the opaque backend reference stored for the flow.
func (e Entry) Backend() uint32 { return e.b.recs[e.i&7].backend }

// Flags returns the pipeline's opaque flag bits for the flow.
func (e Entry) Flags() uint8 { return e.b.recs[e.i&7].flags }

// SetFlags replaces the pipeline's opaque flag bits for the flow.
func (e Entry) SetFlags(f uint8) { e.b.recs[e.i&7].flags = f }

// State returns the flow's protocol state.
func (e Entry) State() State { return State(e.b.state[e.i&7] & stateMask) }

// Evictable reports whether Insert may evict the flow to make room for a
// new one: it has not yet proven itself by sending in ProofTicks distinct
// ticks (see State). Proven flows are kept until they time out or are
// deleted.
func (e Entry) Evictable() bool { return evictable(e.b.state[e.i&7]) }

// Level returns the flow's proof level, 0 to ProofTicks: the number of
// distinct ticks in which it sent packets that count (see State).
func (e Entry) Level() int { return int(e.b.state[e.i&7]&levelMask) >> levelShift }

// LastSeen returns the tick of the flow's last packet.
func (e Entry) LastSeen() Tick { return e.b.seen[e.i&7] }
