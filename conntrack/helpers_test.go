package conntrack

import (
	"encoding/binary"
	"testing"
	"time"
)

// hashKey stands in for the pipeline's flow hash (hashing.Flow4/Flow6):
// conntrack only needs a well-mixed 64-bit function of the key.
func hashKey(k *Key) uint64 {
	a := binary.LittleEndian.Uint64(k.Src[0:8])
	b := binary.LittleEndian.Uint64(k.Src[8:16])
	c := uint64(k.SrcPort) | uint64(k.DstPort)<<16 | uint64(k.VIP)<<32 | uint64(k.Proto)<<48
	if k.IPv6 {
		c |= 1 << 56
	}
	return fmix(fmix(fmix(a^0x9e3779b97f4a7c15)^b) ^ c)
}

// fmix is the MurmurHash3 64-bit finalizer.
func fmix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// testKey returns a distinct IPv4 TCP key for every n < 2^24: clients in
// 198.18.0.0/15, 1024 source ports each, seven VIPs.
func testKey(n int) Key {
	var k Key
	binary.BigEndian.PutUint32(k.Src[:4], 0xc6120000+uint32(n>>10))
	k.SrcPort = 1024 + uint16(n&1023)
	k.DstPort = 443
	k.VIP = uint16(n % 7)
	k.Proto = protoTCP
	return k
}

// udpKey is testKey(n) as a UDP flow.
func udpKey(n int) Key {
	k := testKey(n)
	k.Proto = 17
	return k
}

// testTimeouts are short and distinct, so tests can tell states apart.
var testTimeouts = Timeouts{
	TCPUnestablished: 5 * time.Second,
	TCPUnconfirmed:   8 * time.Second,
	TCPEstablished:   100 * time.Second,
	TCPClosing:       10 * time.Second,
	UDP:              20 * time.Second,
}

// testBucketKey fixes the bucket layout of test tables, so that a failure
// (or a fuzz input) reproduces; TestBucketKey covers random keys.
var testBucketKey = [16]byte{0: 0x5e, 7: 0xc2, 8: 0x11, 15: 0x9d}

// newShard returns the single shard of a fresh table of the given capacity.
func newShard(tb testing.TB, capacity int) *Shard {
	tb.Helper()
	t, err := New(Config{Capacity: capacity, Shards: 1, Timeouts: testTimeouts, BucketKey: testBucketKey})
	if err != nil {
		tb.Fatal(err)
	}
	return t.Shard(0)
}

// insert inserts k and fails the test unless the result is want.
func insert(tb testing.TB, s *Shard, k Key, backend uint32, flags uint8, want InsertResult) Entry {
	tb.Helper()
	e, r := s.Insert(&k, hashKey(&k), backend, flags)
	if r != want {
		tb.Fatalf("Insert(%v:%d) = %v, want %v", k.SrcAddr(), k.SrcPort, r, want)
	}
	return e
}

// lookup returns the entry for k, if live.
func lookup(s *Shard, k Key) (Entry, bool) { return s.Lookup(&k, hashKey(&k)) }

// establish inserts k as a TCP flow, completes its handshake and marks it
// proven (Established) as if it had gone on sending for ProofTicks ticks,
// without moving the shard's clock. Tests of the proof itself use Touch
// and Advance instead.
func establish(tb testing.TB, s *Shard, k Key, backend uint32) (Entry, InsertResult) {
	tb.Helper()
	e, r := s.Insert(&k, hashKey(&k), backend, tcpSYN)
	if r.Tracked() {
		s.Touch(e, tcpACK)
		prove(e)
	}
	return e, r
}

// prove puts a TCP flow in Established, a UDP flow in UDP, at the top
// proof level, keeping altBit.
func prove(e Entry) {
	st := StateEstablished
	if e.Key().Proto != protoTCP {
		st = StateUDP
	}
	p := &e.b.state[e.i&7]
	*p = *p&altBit | phase(st, ProofTicks)
}

// validPhase holds the phases the machine documented on State can reach.
var validPhase = func() (v [phaseMask + 1]bool) {
	for lv := uint8(0); lv <= ProofTicks; lv++ {
		v[phase(StateClosing, lv)] = true
	}
	for lv := uint8(1); lv < ProofTicks; lv++ {
		v[phase(StateUnconfirmed, lv)] = true
		v[phase(StateUDPNew, lv)] = true
	}
	v[phase(StateSynSent, 0)] = true
	v[phase(StateEstablished, ProofTicks)] = true
	v[phase(StateUDP, ProofTicks)] = true
	return v
}()

// checkInvariants verifies the structure of s from scratch: every occupied
// slot holds a key whose hash gives that tag and one of the two buckets of
// its pair (with altBit telling which), overflow counts match, keys are
// unique, the live count matches, and the counter identity of Stats holds.
func checkInvariants(tb testing.TB, s *Shard) {
	tb.Helper()
	ovf := make([]uint32, len(s.buckets))
	seen := make(map[Key]bool)
	var live uint64
	for bi := range s.buckets {
		b := &s.buckets[bi]
		for i := range slotsPerBucket {
			tag := b.tag(i)
			if tag == 0 {
				continue
			}
			live++
			k := b.recs[i].key
			if seen[k] {
				tb.Fatalf("key %v:%d stored twice", k.SrcAddr(), k.SrcPort)
			}
			seen[k] = true
			p, t := s.locate(hashKey(&k))
			if t != tag {
				tb.Fatalf("bucket %d slot %d: tag %#x, hash gives %#x", bi, i, tag, t)
			}
			if ph := b.state[i] & phaseMask; !validPhase[ph] {
				tb.Fatalf("bucket %d slot %d: bad phase %#x (state %v, level %d)", bi, i, ph, State(ph&stateMask), ph>>levelShift)
			}
			if b.state[i]&^(phaseMask|altBit) != 0 {
				tb.Fatalf("bucket %d slot %d: stray bits in state byte %#x", bi, i, b.state[i])
			}
			alt := b.state[i]&altBit != 0
			switch {
			case !alt && uint32(bi) != p:
				tb.Fatalf("bucket %d slot %d: not alt but primary is %d", bi, i, p)
			case alt && uint32(bi) != s.alternate(p, t):
				tb.Fatalf("bucket %d slot %d: alt but alternate is %d", bi, i, s.alternate(p, t))
			case alt:
				ovf[p]++
			}
		}
	}
	for bi := range s.buckets {
		if got := s.buckets[bi].ovf; got != ovf[bi] {
			tb.Fatalf("bucket %d: ovf %d, recount %d", bi, got, ovf[bi])
		}
	}
	st := s.Stats()
	if live != s.live || st.Entries != live {
		tb.Fatalf("live %d, counted %d, Stats.Entries %d", s.live, live, st.Entries)
	}
	if st.Entries != st.Inserts-st.Expirations-st.EvictedExpired-st.EvictedUnestablished-st.Deletes {
		tb.Fatalf("counter identity broken: %+v", st)
	}
}
