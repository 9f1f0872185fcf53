package conntrack

import (
	"testing"
	"time"
)

// FuzzShard runs a sequence of operations decoded from the input against a
// small shard and a reference model (a map with its own implementation of
// the state machine and timeouts), checking after every step:
//
//   - a hit agrees with the model in backend, state, flags and last-seen;
//   - a flow the model holds as live and proven is always found — only
//     unproven (evictable) flows may vanish early, and never more of them
//     than Stats.EvictedUnestablished counts;
//   - Untracked is returned only when both candidate buckets are full of
//     live, non-evictable flows;
//   - the structure is sound (checkInvariants).
func FuzzShard(f *testing.F) {
	f.Add([]byte{0, 0, 1, 2, 0, 3, 4, 1, 1, 2, 4, 2, 2, 16, 4, 9})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := fuzzInput(data)
		cfg := in.byte()
		tab, err := New(Config{
			Capacity:                16 * (1 + int(cfg%4)), // 2 to 8 buckets
			Shards:                  1,
			ExpiryBucketsPerAdvance: 1 + int(cfg>>2%3),
			Timeouts:                fuzzTimeouts,
			BucketKey:               testBucketKey,
		})
		if err != nil {
			t.Fatal(err)
		}
		m := model{s: tab.Shard(0), t: t, flows: map[Key]*modelFlow{}}
		for len(in) > 0 {
			m.step(in.byte(), &in)
			checkInvariants(t, m.s)
			m.sweep()
		}
	})
}

var fuzzTimeouts = Timeouts{
	TCPUnestablished: 3 * time.Second,
	TCPUnconfirmed:   5 * time.Second,
	TCPEstablished:   20 * time.Second,
	TCPClosing:       4 * time.Second,
	UDP:              6 * time.Second,
}

// fuzzInput hands out the fuzzer's bytes, then zeros.
type fuzzInput []byte

func (in *fuzzInput) byte() byte {
	if len(*in) == 0 {
		return 0
	}
	b := (*in)[0]
	*in = (*in)[1:]
	return b
}

// fuzzKey maps a byte to one of 96 keys, enough to overfill the largest
// shard: TCP and UDP, some IPv6.
func fuzzKey(b byte) Key {
	n := int(b % 96)
	k := testKey(n)
	if n >= 64 {
		k = udpKey(n)
	}
	k.IPv6 = n%5 == 0
	return k
}

type modelFlow struct {
	backend uint32
	state   State
	level   int // proof level, 0..ProofTicks
	seen    Tick
	flags   uint8
}

// evictable is the model's reading of the proof rule.
func (f *modelFlow) evictable() bool { return f.level < ProofTicks }

type model struct {
	s        *Shard
	t        *testing.T
	flows    map[Key]*modelFlow
	now      Tick
	vanished uint64 // evictable flows that disappeared before timing out
}

// modelTimeout is the model's own reading of fuzzTimeouts, in ticks.
func modelTimeout(st State) Tick {
	switch st {
	case StateSynSent:
		return 3
	case StateUnconfirmed:
		return 5
	case StateEstablished:
		return 20
	case StateClosing:
		return 4
	}
	return 6
}

// modelInitial and modelNext restate the machine documented on State:
// the state and proof level after a flow's first packet, and after a later
// one (later: in a later tick than the flow's last packet).
func modelInitial(proto, flags uint8) (State, int) {
	switch {
	case proto != protoTCP:
		return StateUDPNew, 1
	case flags&(tcpFIN|tcpRST) != 0:
		return StateClosing, 0
	case flags&tcpSYN != 0 && flags&tcpACK == 0:
		return StateSynSent, 0
	}
	return StateUnconfirmed, 1
}

func modelNext(st State, level int, flags uint8, later bool) (State, int) {
	step := func(unproven, proven State) (State, int) {
		if !later {
			return st, level
		}
		if level+1 == ProofTicks {
			return proven, ProofTicks
		}
		return unproven, level + 1
	}
	end := flags&(tcpFIN|tcpRST) != 0
	syn := flags&tcpSYN != 0 && flags&tcpACK == 0
	switch st {
	case StateUDPNew:
		return step(StateUDPNew, StateUDP)
	case StateUDP:
		return StateUDP, level
	case StateClosing:
		if syn && !end {
			return StateSynSent, 0
		}
		return StateClosing, level
	}
	switch {
	case end:
		return StateClosing, level
	case syn && st == StateSynSent:
		return StateSynSent, 0
	case st == StateSynSent:
		return StateUnconfirmed, 1
	case syn || st == StateEstablished:
		return st, level
	}
	return step(StateUnconfirmed, StateEstablished)
}

// live returns the model's flow for k if it has not timed out; timed-out
// flows are forgotten.
func (m *model) live(k Key) *modelFlow {
	f := m.flows[k]
	if f != nil && m.now-f.seen > modelTimeout(f.state) {
		delete(m.flows, k)
		return nil
	}
	return f
}

// gone records that the shard no longer has k although the model did.
func (m *model) gone(k Key, f *modelFlow) {
	m.t.Helper()
	if !f.evictable() {
		m.t.Fatalf("live proven %v flow %v:%d (proto %d) vanished", f.state, k.SrcAddr(), k.SrcPort, k.Proto)
	}
	m.vanished++
	delete(m.flows, k)
}

// same checks a hit against the model.
func (m *model) same(e Entry, f *modelFlow) {
	m.t.Helper()
	if e.Backend() != f.backend || e.State() != f.state || e.Level() != f.level || e.Flags() != f.flags || e.LastSeen() != f.seen ||
		e.Evictable() != f.evictable() {
		m.t.Fatalf("entry backend %d state %v level %d flags %d seen %d; model %+v", e.Backend(), e.State(), e.Level(), e.Flags(), e.LastSeen(), *f)
	}
}

// find looks k up in both the shard and the model and reconciles them.
func (m *model) find(k Key) (Entry, *modelFlow, bool) {
	m.t.Helper()
	f := m.live(k)
	e, ok := lookup(m.s, k)
	switch {
	case ok && f == nil:
		m.t.Fatalf("hit on %v:%d, which the model does not hold", k.SrcAddr(), k.SrcPort)
	case ok:
		m.same(e, f)
	case f != nil:
		m.gone(k, f)
		f = nil
	}
	return e, f, ok
}

func (m *model) step(op byte, in *fuzzInput) {
	t := m.t
	switch op % 8 {
	case 0: // Insert
		k, backend, flags := fuzzKey(in.byte()), uint32(in.byte()), in.byte()
		f := m.live(k)
		e, r := m.s.Insert(&k, hashKey(&k), backend, flags)
		if r == Existed {
			if f == nil {
				t.Fatalf("Insert: Existed for a flow the model does not hold")
			}
			m.same(e, f)
			return
		}
		if f != nil {
			m.gone(k, f)
		}
		if r == Untracked {
			m.checkRefusal(k)
			return
		}
		f = &modelFlow{backend: backend, seen: m.now}
		f.state, f.level = modelInitial(k.Proto, flags)
		m.flows[k] = f
		m.same(e, f)
	case 1: // Lookup
		m.find(fuzzKey(in.byte()))
	case 2: // Touch
		k, flags := fuzzKey(in.byte()), in.byte()
		if e, f, ok := m.find(k); ok {
			m.s.Touch(e, flags)
			f.state, f.level = modelNext(f.state, f.level, flags, m.now > f.seen)
			f.seen = m.now
			m.same(e, f)
		}
	case 3: // Delete
		k := fuzzKey(in.byte())
		if e, _, ok := m.find(k); ok {
			m.s.Delete(e)
			delete(m.flows, k)
		}
	case 4: // Advance: usually a few ticks, sometimes past every timeout
		d := Tick(in.byte())
		if d > 250 {
			d = 100
		}
		m.now += d % 101
		m.s.Advance(m.now)
	case 5: // SetBackend
		k, b := fuzzKey(in.byte()), uint32(in.byte())
		if e, f, ok := m.find(k); ok {
			m.s.SetBackend(e, b)
			f.backend = b
		}
	case 6: // SetFlags
		k, fl := fuzzKey(in.byte()), in.byte()
		if e, f, ok := m.find(k); ok {
			e.SetFlags(fl)
			f.flags = fl
		}
	case 7: // CountByBackend: between the model's keepers and all it holds
		got := map[uint32]int{}
		countAll(m.s, got, 1+int(in.byte()%4))
		lo, hi := map[uint32]int{}, map[uint32]int{}
		for k := range m.flows {
			if f := m.live(k); f != nil {
				hi[f.backend]++
				if !f.evictable() {
					lo[f.backend]++
				}
			}
		}
		for b, n := range got {
			if b&InactiveBit != 0 {
				// A subset of the reference's flows.
				if n > got[b&^InactiveBit] {
					t.Fatalf("CountByBackend: %d inactive of %d flows of %d", n, got[b&^InactiveBit], b&^InactiveBit)
				}
				continue
			}
			if n < lo[b] || n > hi[b] {
				t.Fatalf("CountByBackend[%d] = %d, model says %d..%d", b, n, lo[b], hi[b])
			}
		}
		for b, n := range lo {
			if got[b] < n {
				t.Fatalf("CountByBackend[%d] = %d, model keeps %d", b, got[b], n)
			}
		}
	}
}

// checkRefusal verifies that Insert had no right to store k: both of its
// buckets are full of live flows that may not be evicted.
func (m *model) checkRefusal(k Key) {
	m.t.Helper()
	p, tag := m.s.locate(hashKey(&k))
	for _, bi := range []uint32{p, m.s.alternate(p, tag)} {
		b := &m.s.buckets[bi]
		for i := range slotsPerBucket {
			switch {
			case b.tag(i) == 0:
				m.t.Fatalf("Untracked with a free slot in bucket %d", bi)
			case m.s.expired(b, i):
				m.t.Fatalf("Untracked with a timed-out flow in bucket %d", bi)
			case evictable(b.state[i]):
				m.t.Fatalf("Untracked with an evictable flow in bucket %d", bi)
			}
		}
	}
}

// sweep checks every flow the model holds.
func (m *model) sweep() {
	m.t.Helper()
	for k := range m.flows {
		if m.live(k) != nil {
			m.find(k)
		}
	}
	if ev := m.s.Stats().EvictedUnestablished; m.vanished > ev {
		m.t.Fatalf("%d evictable flows vanished, only %d evictions counted", m.vanished, ev)
	}
}
