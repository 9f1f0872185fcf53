package conntrack

import (
	"errors"
	"math"
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
)

// at sets the shard's clock without running the expiry scan, so a test can
// leave timed-out flows in place for Insert to find.
func at(s *Shard, now Tick) { s.now = now }

func TestNewConfig(t *testing.T) {
	for _, c := range []struct {
		name         string
		cfg          Config
		wantCapacity int
		wantErr      bool
	}{
		{"one slot rounds to two buckets", Config{Capacity: 1, Shards: 1}, 16, false},
		{"per shard rounding", Config{Capacity: 100, Shards: 3}, 3 * 40, false},
		{"exact", Config{Capacity: 1 << 20, Shards: 4}, 1 << 20, false},
		{"no shards", Config{Capacity: 10}, 0, true},
		{"no capacity", Config{Shards: 1}, 0, true},
		{"negative scan", Config{Capacity: 10, Shards: 1, ExpiryBucketsPerAdvance: -1}, 0, true},
		{"negative sweep period", Config{Capacity: 10, Shards: 1, SweepPeriod: -time.Second}, 0, true},
		{"sweep period under a tick", Config{Capacity: 10, Shards: 1, SweepPeriod: time.Second / 2}, 0, true},
		{"sweep period of a tick", Config{Capacity: 10, Shards: 1, SweepPeriod: time.Second}, 16, false},
		{"negative timeout", Config{Capacity: 10, Shards: 1, Timeouts: Timeouts{UDP: -1}}, 0, true},
		// Rounded up naively, these overflowed into a table of 16 and 64
		// slots.
		{"capacity near MaxInt", Config{Capacity: math.MaxInt, Shards: 1}, 0, true},
		{"capacity near MaxInt, sharded", Config{Capacity: math.MaxInt - 2, Shards: 4}, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			tab, err := New(c.cfg)
			if c.wantErr {
				if !errors.Is(err, ErrConfig) {
					t.Fatalf("New: err %v, want ErrConfig", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := tab.Capacity(); got != c.wantCapacity {
				t.Errorf("Capacity() = %d, want %d", got, c.wantCapacity)
			}
			if got := tab.Stats().Capacity; got != uint64(c.wantCapacity) {
				t.Errorf("Stats().Capacity = %d, want %d", got, c.wantCapacity)
			}
			if got, want := tab.Bytes(), c.wantCapacity*40; got != want {
				t.Errorf("Bytes() = %d, want %d (40 per slot)", got, want)
			}
		})
	}
}

func TestDefaultTimeoutsApplied(t *testing.T) {
	tab, err := New(Config{Capacity: 16, Shards: 1, Timeouts: Timeouts{UDP: 3e9}})
	if err != nil {
		t.Fatal(err)
	}
	s := tab.Shard(0)
	d := DefaultTimeouts()
	for st, want := range map[State]Tick{
		StateSynSent:     Ticks(d.TCPUnestablished),
		StateEstablished: Ticks(d.TCPEstablished),
		StateClosing:     Ticks(d.TCPClosing),
		StateUDPNew:      3,
		StateUDP:         3,
	} {
		if got := s.timeout[st]; got != want {
			t.Errorf("timeout[%v] = %d, want %d", st, got, want)
		}
	}
}

func TestInsertLookupDelete(t *testing.T) {
	s := newShard(t, 1024)
	k := testKey(42)
	if _, ok := lookup(s, k); ok {
		t.Fatal("hit in an empty table")
	}
	e := insert(t, s, k, 7, tcpSYN, Inserted)
	if e.Key() != k || e.Backend() != 7 || e.Flags() != 0 || e.State() != StateSynSent {
		t.Fatalf("inserted entry: key %v backend %d flags %d state %v", e.Key(), e.Backend(), e.Flags(), e.State())
	}
	e.SetFlags(0x5a)

	// Same key again: the existing entry, untouched.
	e2 := insert(t, s, k, 8, tcpACK, Existed)
	if e2.Backend() != 7 || e2.State() != StateSynSent || e2.Flags() != 0x5a {
		t.Fatalf("Existed returned backend %d state %v flags %#x", e2.Backend(), e2.State(), e2.Flags())
	}

	// An IPv6 key with the same leading bytes is a different flow.
	k6 := k
	k6.IPv6 = true
	if _, ok := lookup(s, k6); ok {
		t.Fatal("IPv6 key hit the IPv4 flow")
	}
	insert(t, s, k6, 9, tcpSYN, Inserted)
	if got, want := k6.SrcAddr(), netip.MustParseAddr("c612::"); got != want {
		t.Errorf("SrcAddr() = %v, want %v", got, want)
	}
	if got, want := k.SrcAddr(), netip.MustParseAddr("198.18.0.0"); got != want {
		t.Errorf("SrcAddr() = %v, want %v", got, want)
	}

	e, ok := lookup(s, k)
	if !ok || e.Backend() != 7 {
		t.Fatalf("lookup after insert: ok %v backend %d", ok, e.Backend())
	}
	s.Delete(e)
	if _, ok := lookup(s, k); ok {
		t.Fatal("hit after Delete")
	}
	if e, ok := lookup(s, k6); !ok || e.Backend() != 9 {
		t.Fatal("Delete removed the wrong flow")
	}
	st := s.Stats()
	if st.Inserts != 2 || st.Deletes != 1 || st.Entries != 1 {
		t.Fatalf("stats %+v", st)
	}
	checkInvariants(t, s)
}

// TestEvictionOrder uses a 16-slot shard: two buckets, so every flow has
// the same pair and "full" means 16 flows.
func TestEvictionOrder(t *testing.T) {
	t.Run("least proven first, then oldest; proven never", func(t *testing.T) {
		s := newShard(t, 16)
		// Seven unproven flows, all still within their timeouts at tick 7:
		// level 0 (SYN only) seen at ticks 4, 2, 3; level 1 (SYN+ACK, or one
		// UDP datagram) seen at ticks 5, 3; level 2 (TCP past the SYN in two
		// ticks, UDP in two ticks) seen at 6 and 5.
		type flow struct {
			k     Key
			seen  Tick
			level int
		}
		unproven := []flow{
			{testKey(1), 4, 0}, {testKey(2), 2, 0}, {testKey(3), 3, 0},
			{testKey(4), 5, 1}, {udpKey(5), 3, 1},
			{testKey(6), 6, 2}, {udpKey(7), 5, 2},
		}
		for _, f := range unproven {
			// Start so that the last of its ticks of proof is f.seen.
			at(s, f.seen-Tick(max(f.level-1, 0)))
			e := insert(t, s, f.k, 1, tcpSYN, Inserted)
			if f.k.Proto == protoTCP && f.level > 0 {
				s.Touch(e, tcpACK)
			}
			for e.Level() < f.level {
				at(s, s.Now()+1)
				s.Touch(e, tcpACK)
			}
			if e.Level() != f.level || e.LastSeen() != f.seen {
				t.Fatalf("setup %v:%d: level %d seen %d, want %d, %d", f.k.SrcAddr(), f.k.SrcPort, e.Level(), e.LastSeen(), f.level, f.seen)
			}
		}
		at(s, 6)
		var est []Key
		for n := 100; len(est) < 16-len(unproven); n++ {
			k := testKey(n)
			establish(t, s, k, 2)
			est = append(est, k)
		}
		at(s, 7)
		// Victims: level 0 by age (keys 2, 3, 1), level 1 by age (5, 4),
		// level 2 by age (7, 6).
		order := []int{1, 2, 0, 4, 3, 6, 5}
		gone := map[int]bool{}
		for j, v := range order {
			insert(t, s, testKey(1000+j), 3, tcpSYN, ReplacedUnestablished)
			gone[v] = true
			for u, f := range unproven {
				if _, ok := lookup(s, f.k); ok == gone[u] {
					t.Fatalf("insert %d: flow %d (level %d, seen %d) present %v, want %v", j, u, f.level, f.seen, ok, !gone[u])
				}
			}
			// Make the newcomer proven, so it is not the next victim.
			e, _ := lookup(s, testKey(1000+j))
			prove(e)
		}
		insert(t, s, testKey(2000), 4, tcpSYN, Untracked)
		insert(t, s, udpKey(2001), 4, 0, Untracked)
		for _, k := range est {
			if e, ok := lookup(s, k); !ok || e.Backend() != 2 {
				t.Fatalf("established flow lost or re-pinned: ok %v", ok)
			}
		}
		st := s.Stats()
		if st.EvictedUnestablished != uint64(len(unproven)) || st.UntrackedFull != 2 || st.EvictedExpired != 0 || st.Entries != 16 {
			t.Fatalf("stats %+v", st)
		}
		checkInvariants(t, s)
	})

	t.Run("expired before unestablished", func(t *testing.T) {
		s := newShard(t, 16)
		at(s, 0)
		stale := testKey(1)
		establish(t, s, stale, 1) // expires after tick 100
		at(s, 101)
		syn := testKey(2)
		insert(t, s, syn, 1, tcpSYN, Inserted)
		for n := 100; n < 114; n++ {
			establish(t, s, testKey(n), 2)
		}
		insert(t, s, testKey(500), 3, tcpSYN, ReplacedExpired)
		if _, ok := lookup(s, syn); !ok {
			t.Fatal("the unestablished flow went before the expired one")
		}
		insert(t, s, testKey(501), 3, tcpSYN, ReplacedUnestablished)
		if _, ok := lookup(s, syn); ok {
			t.Fatal("the oldest unestablished flow survived")
		}
		st := s.Stats()
		if st.EvictedExpired != 1 || st.EvictedUnestablished != 1 {
			t.Fatalf("stats %+v", st)
		}
		checkInvariants(t, s)
	})

	t.Run("expired duplicate is replaced, not returned", func(t *testing.T) {
		s := newShard(t, 16)
		k := testKey(1)
		insert(t, s, k, 1, tcpSYN, Inserted)
		at(s, 6) // SynSent lives 5 ticks
		e := insert(t, s, k, 2, tcpSYN, Inserted)
		if e.Backend() != 2 {
			t.Fatalf("backend %d, want the new pick 2", e.Backend())
		}
		if st := s.Stats(); st.Expirations != 1 || st.Entries != 1 {
			t.Fatalf("stats %+v", st)
		}
		checkInvariants(t, s)
	})
}

// TestOccupancy fills a shard with established flows until the first
// refusal. Two candidate buckets plus one level of relocation should hold
// ~92% before that; every stored flow must stay reachable.
func TestOccupancy(t *testing.T) {
	const slots = 1 << 16
	s := newShard(t, slots)
	n := 0
	for ; ; n++ {
		if _, r := establish(t, s, testKey(n), uint32(n)); !r.Tracked() {
			break
		}
	}
	occ := float64(n) / slots
	t.Logf("first refusal at %d of %d slots (%.1f%%), %d relocations", n, slots, 100*occ, s.Stats().Relocations)
	if occ < 0.85 {
		t.Errorf("first refusal at %.1f%% occupancy, want >= 85%%", 100*occ)
	}
	if s.Stats().Relocations == 0 {
		t.Error("no relocations on the way")
	}
	for j := range n {
		if e, ok := lookup(s, testKey(j)); !ok || e.Backend() != uint32(j) {
			t.Fatalf("flow %d: ok %v backend %d", j, ok, e.Backend())
		}
		// Insert finds it too, in whichever bucket of its pair it lives.
		if e := insert(t, s, testKey(j), 0, tcpSYN, Existed); e.Backend() != uint32(j) {
			t.Fatalf("flow %d: Existed with backend %d", j, e.Backend())
		}
	}
	checkInvariants(t, s)

	// Past the relocation threshold (~97%) the shard keeps filling its free
	// slots without moving flows.
	for m := n; m < 2*slots; m++ {
		establish(t, s, testKey(m), 0)
	}
	t.Logf("after 2x capacity attempts: %d/%d slots used", s.Stats().Entries, slots)
	checkInvariants(t, s)
}

func TestStrings(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{StateSynSent.String(), "SynSent"},
		{StateUDP.String(), "UDP"},
		{State(0).String(), "Free"},
		{State(9).String(), "State(?)"},
		{Untracked.String(), "Untracked"},
		{ReplacedUnestablished.String(), "ReplacedUnestablished"},
		{Existed.String(), "Existed"},
		{InsertResult(9).String(), "InsertResult(?)"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// TestBucketKey checks that the bucket layout is the table's own secret:
// two tables place the same flow hash differently, flows aimed at one
// bucket through the public flow hash scatter, and a fixed
// Config.BucketKey reproduces a layout.
func TestBucketKey(t *testing.T) {
	const capacity = 8192 // 1024 buckets
	newTab := func(key [16]byte) *Shard {
		tab, err := New(Config{Capacity: capacity, Shards: 2, Timeouts: testTimeouts, BucketKey: key})
		if err != nil {
			t.Fatal(err)
		}
		if tab.Shard(0).key != tab.Shard(1).key {
			t.Fatal("the shards of one table have different keys")
		}
		return tab.Shard(0)
	}
	a, b := newTab([16]byte{}), newTab([16]byte{})
	if a.key == b.key {
		t.Fatalf("two tables drew the same key %x", a.key)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	const n = 4096
	samePrimary, sameTag := 0, 0
	for range n {
		h := rng.Uint64()
		pa, ta := a.locate(h)
		pb, tb := b.locate(h)
		if pa == pb {
			samePrimary++
		}
		if ta == tb {
			sameTag++
		}
	}
	// By chance: n/1024 = 4 and n/65536 < 1.
	if samePrimary > 24 || sameTag > 4 {
		t.Errorf("of %d hashes, %d got the same primary bucket and %d the same tag in two tables", n, samePrimary, sameTag)
	}

	// Hashes that share the bits an unkeyed table would take the bucket
	// (high) and tag (low 16) from: what an attacker who knows the public
	// flow hash seed could aim at one bucket pair (16 slots).
	const aimed = 512
	base := rng.Uint64()
	unkeyed := func(h uint64) (uint64, uint16) { hi, _ := bits.Mul64(h, a.nb); return hi, uint16(h) }
	p0, t0 := unkeyed(base)
	buckets := map[uint32]int{}
	most := 0
	for i := range uint64(aimed) {
		h := base ^ i<<16
		if ph, th := unkeyed(h); ph != p0 || th != t0 {
			t.Fatalf("aimed hash %d does not share the unkeyed bucket and tag", i)
		}
		p, _ := a.locate(h)
		buckets[p]++
		most = max(most, buckets[p])
		k := testKey(int(i))
		if _, r := a.Insert(&k, h, 1, tcpSYN); r != Inserted {
			t.Fatalf("aimed flow %d: %v, want Inserted", i, r)
		}
	}
	if most > 8 {
		t.Errorf("%d of %d aimed hashes share one primary bucket", most, aimed)
	}
	st := a.Stats()
	if st.EvictedUnestablished != 0 || st.UntrackedFull != 0 {
		t.Errorf("aimed flows displaced each other: %+v", st)
	}
	for i := range uint64(aimed) {
		k := testKey(int(i))
		if _, ok := a.Lookup(&k, base^i<<16); !ok {
			t.Fatalf("aimed flow %d not found", i)
		}
	}

	// A fixed key gives the same layout in every table.
	c, d := newTab(testBucketKey), newTab(testBucketKey)
	for range 1000 {
		h := rng.Uint64()
		pc, tc := c.locate(h)
		pd, td := d.locate(h)
		if pc != pd || tc != td {
			t.Fatalf("same BucketKey, h %#x: bucket %d tag %#x vs %d %#x", h, pc, tc, pd, td)
		}
	}
}

// TestInsertMissed drives two shards with the same operations, one
// inserting missed flows with InsertAt and the other with InsertMissed, over
// enough flows to fill the table, evict and time out, revisiting flows so
// that some lookups find theirs timed out: every result, every later
// lookup and the statistics must agree.
func TestInsertMissed(t *testing.T) {
	a, b := newShard(t, 1024), newShard(t, 1024)
	key := func(j int) Key {
		k := Key{SrcPort: uint16(j % 5000), DstPort: 80, VIP: 1, Proto: 6}
		k.Src[0], k.Src[1] = 198, 18
		k.Src[3] = byte(j / 5000)
		return k
	}
	const flows = 7000
	inserted := map[int]bool{}
	timedOut := 0 // lookups of an inserted flow that missed
	for i := 0; i < 20000; i++ {
		if i%1500 == 0 {
			a.Advance(a.Now() + 7)
			b.Advance(b.Now() + 7)
		}
		j := i % flows
		if i%2 == 1 {
			j = (i * 7919) % flows // revisits out of order
		}
		k := key(j)
		h := hashKey(&k)
		la, lb := a.Locate(h), b.Locate(h)
		ea, oka := a.LookupAt(&k, la)
		eb, okb := b.LookupAt(&k, lb)
		if oka != okb {
			t.Fatalf("flow %d: lookups disagree: %v, %v", j, oka, okb)
		}
		if oka {
			a.Touch(ea, tcpACK)
			b.Touch(eb, tcpACK)
			continue
		}
		if inserted[j] {
			timedOut++
		}
		_, ra := a.InsertAt(&k, la, uint32(j), tcpSYN)
		_, rb := b.InsertMissed(&k, lb, uint32(j), tcpSYN)
		if ra != rb {
			t.Fatalf("flow %d: InsertAt %v, InsertMissed %v", j, ra, rb)
		}
		inserted[j] = ra.Tracked()
	}
	if sa, sb := a.Stats(), b.Stats(); sa != sb {
		t.Errorf("stats differ:\nInsertAt     %+v\nInsertMissed %+v", sa, sb)
	}
	for j := range flows { // where each flow went: found alike, pinned alike
		k := key(j)
		ea, oka := a.Lookup(&k, hashKey(&k))
		eb, okb := b.Lookup(&k, hashKey(&k))
		if oka != okb || oka && ea.Backend() != eb.Backend() {
			t.Fatalf("flow %d: afterwards found %v/%v", j, oka, okb)
		}
	}
	if timedOut < 100 {
		t.Fatalf("only %d lookups missed an inserted flow: the test misses the case", timedOut)
	}
}

// TestInsertMissedAfterTimeout: a lookup that finds its flow timed out in
// the flow's primary bucket is a miss, and InsertMissed right after it
// must put the flow back in its own pair, not in the pair of the key that
// missed before it. The primary's other flows stay fresh, so that after
// the timed-out flow is removed the emptier alternate is where it goes.
func TestInsertMissedAfterTimeout(t *testing.T) {
	s := newShard(t, 1024)
	f := testKey(0)
	lf := s.Locate(hashKey(&f))
	if _, r := s.InsertAt(&f, lf, 2, tcpSYN); r != Inserted {
		t.Fatalf("f: %v", r)
	}
	var fill []Entry // f's primary's other flows
	for n := 1; len(fill) < slotsPerBucket-1 && n < 1<<20; n++ {
		k := testKey(n)
		l := s.Locate(hashKey(&k))
		if l.p != lf.p {
			continue
		}
		e, r := s.InsertAt(&k, l, 1, tcpSYN)
		if r != Inserted || e.bi != lf.p {
			continue // it went to its alternate: keep looking
		}
		fill = append(fill, e)
	}
	if len(fill) < slotsPerBucket-1 {
		t.Fatalf("found %d flows for one bucket", len(fill))
	}
	if e, ok := s.Lookup(&f, hashKey(&f)); !ok || e.bi != lf.p {
		t.Fatal("f is not in its primary")
	}
	// f times out; its primary's other flows stay fresh.
	s.now += s.timeout[StateSynSent] + 1
	for _, e := range fill {
		s.Touch(e, tcpSYN)
	}
	// Another key misses first, leaving its own alternate behind.
	for n := 1 << 20; ; n++ {
		g := testKey(n)
		lg := s.Locate(hashKey(&g))
		if lg.p == lf.p || s.alternate(lg.p, lg.t) == s.alternate(lf.p, lf.t) {
			continue
		}
		if _, ok := s.LookupAt(&g, lg); ok {
			t.Fatal("g found")
		}
		break
	}
	if _, ok := s.LookupAt(&f, lf); ok {
		t.Fatal("f found after its timeout")
	}
	e, r := s.InsertMissed(&f, lf, 3, tcpSYN)
	if r != Inserted {
		t.Fatalf("InsertMissed: %v", r)
	}
	if want := s.alternate(lf.p, lf.t); e.bi != want {
		t.Errorf("f went to bucket %d, want its alternate %d (the emptier of its pair)", e.bi, want)
	}
	if e, ok := s.Lookup(&f, hashKey(&f)); !ok || e.Backend() != 3 {
		t.Fatalf("f after InsertMissed: found %v (backend %d)", ok, e.Backend())
	}
}

// TestEpoch: the epoch stays while every entry stays what a lookup of
// its key returns (hits, Touch, SetBackend, SetFlags, a flow placed in a
// free slot) and changes when a flow leaves its slot (Delete, a lookup
// that finds it expired) or the clock advances.
func TestEpoch(t *testing.T) {
	s := newShard(t, 1024)
	e := insert(t, s, testKey(1), 7, tcpSYN, Inserted)
	ep := s.Epoch()
	same := func(what string) {
		t.Helper()
		if s.Epoch() != ep {
			t.Errorf("%s changed the epoch", what)
		}
	}
	moved := func(what string) {
		t.Helper()
		if s.Epoch() == ep {
			t.Errorf("%s left the epoch", what)
		}
		ep = s.Epoch()
	}
	if _, ok := lookup(s, testKey(1)); !ok {
		t.Fatal("lookup missed")
	}
	same("a hit")
	s.Touch(e, tcpACK)
	s.SetBackend(e, 8)
	e.SetFlags(1)
	same("Touch, SetBackend, SetFlags")
	insert(t, s, testKey(2), 7, tcpSYN, Inserted)
	same("an insert into a free slot")
	if _, ok := lookup(s, testKey(3)); ok {
		t.Fatal("a lookup of a flow never inserted hit")
	}
	same("a miss")
	s.Delete(e)
	moved("Delete")
	s.Advance(s.Now())
	same("an Advance at the same tick that removes nothing")
	s.Advance(s.Now() + 1)
	moved("Advance")
	// testKey(2) is a SYN-only flow; far past its timeout, a lookup
	// reclaims it.
	s.now += 1 << 20
	ep = s.Epoch()
	if _, ok := lookup(s, testKey(2)); ok {
		t.Fatal("an expired flow hit")
	}
	moved("a lookup that reclaims an expired flow")
}
