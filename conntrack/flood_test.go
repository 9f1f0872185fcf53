package conntrack

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"
)

// TestFloodKeepsEstablished fills a table with established flows, then
// throws ten times its capacity of spoofed first packets at it (SYNs,
// mid-stream ACKs and UDP datagrams from random clients) while the real
// flows keep talking. Every established flow must stay pinned to its
// original backend, and every refused insert must be counted.
func TestFloodKeepsEstablished(t *testing.T) {
	const slots = 1 << 15
	tab, err := New(Config{
		Capacity: slots,
		Shards:   1,
		Timeouts: Timeouts{TCPUnestablished: 5 * time.Second, TCPEstablished: time.Hour},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := tab.Shard(0)
	var untracked uint64

	// Fill until the table refuses; established flows are what remain.
	var est []Key
	for n := 0; n < slots; n++ {
		k := testKey(n)
		if _, r := establish(t, s, k, uint32(n%97)); r.Tracked() {
			est = append(est, k)
		} else {
			untracked++
		}
	}
	t.Logf("table holds %d established flows in %d slots", len(est), slots)

	rng := rand.New(rand.NewPCG(1, 2))
	firstPackets := []struct {
		proto, flags uint8
	}{{protoTCP, tcpSYN}, {protoTCP, tcpACK}, {17, 0}}
	var tracked uint64
	for n := range 10 * slots {
		if n%1000 == 0 {
			s.Advance(s.Now() + 1)
		}
		var k Key
		binary.LittleEndian.PutUint32(k.Src[:4], rng.Uint32())
		k.SrcPort = uint16(rng.Uint32())
		k.DstPort = 443
		p := firstPackets[n%len(firstPackets)]
		k.Proto = p.proto
		h := hashKey(&k)
		if _, ok := s.Lookup(&k, h); ok {
			continue // a random tuple repeated; not a new flow
		}
		if _, r := s.Insert(&k, h, 999, p.flags); r.Tracked() {
			tracked++
		} else {
			untracked++
		}

		// The real flows keep sending.
		if n%10 == 0 {
			k := est[(n/10)%len(est)]
			e, ok := lookup(s, k)
			if !ok {
				t.Fatalf("flood packet %d: established flow %v:%d lost", n, k.SrcAddr(), k.SrcPort)
			}
			s.Touch(e, tcpACK)
		}
	}

	for j, k := range est {
		e, ok := lookup(s, k)
		if !ok {
			t.Fatalf("established flow %d lost", j)
		}
		if want := uint32(testKeyIndex(k) % 97); e.Backend() != want {
			t.Fatalf("established flow %d re-pinned to %d, want %d", j, e.Backend(), want)
		}
	}
	st := s.Stats()
	t.Logf("flood: %d tracked, %d untracked; %+v", tracked, untracked, st)
	if st.UntrackedFull != untracked {
		t.Errorf("UntrackedFull = %d, callers saw %d", st.UntrackedFull, untracked)
	}
	if st.UntrackedFull == 0 || st.EvictedUnestablished == 0 {
		t.Errorf("the flood neither evicted nor was refused: %+v", st)
	}
	checkInvariants(t, s)
}

// testKeyIndex inverts testKey.
func testKeyIndex(k Key) int {
	hi := int(k.Src[2])<<8 | int(k.Src[3]) | int(k.Src[1]-0x12)<<16
	return hi<<10 | int(k.SrcPort-1024)
}

// TestSpoofedHandshakeFlood is the flood a middlebox that sees one
// direction must survive: spoofed SYN-then-ACK pairs from ten times the
// table's capacity of distinct tuples, arriving over a simulated span,
// while real flows run long transfers (a packet every tick). Half the real
// flows start before the flood and prove themselves; the other half start
// during it and must prove themselves under it.
//
// At 2048 new tuples a second the flood would need 3.75 tables to be held
// whole for the default Unconfirmed timeout: every real flow must keep its
// entry and its backend after every one of its packets and at the end of
// every tick, and be Established ProofTicks-1 ticks after its handshake.
// At 16384 a second (the whole table every tick) a flow that has not
// proven itself cannot be told from the flood for a tick or two and may
// lose its entry (its packets then go by their Maglev pick, which is the
// same backend); the proven flows must still never lose theirs.
// In both, no flood tuple may become Established or otherwise unevictable.
func TestSpoofedHandshakeFlood(t *testing.T) {
	t.Run("2048/s", func(t *testing.T) { spoofedHandshakeFlood(t, 80, true) })
	t.Run("16384/s", func(t *testing.T) { spoofedHandshakeFlood(t, 10, false) })
}

// spoofedHandshakeFlood sends the flood over floodTicks ticks. strict
// requires the real flows that start during the flood to keep their
// entries too.
func spoofedHandshakeFlood(t *testing.T, floodTicks int, strict bool) {
	const (
		slots      = 1 << 14
		real       = slots / 4 // flows with long transfers
		floodFlows = 10 * slots
		start      = ProofTicks // the flood starts when the first half is proven
		floodBe    = 999
	)
	perTick := floodFlows / floodTicks
	ticks := Tick(start + floodTicks + 2)
	tab, err := New(Config{Capacity: slots, Shards: 1, BucketKey: testBucketKey})
	if err != nil {
		t.Fatal(err)
	}
	s := tab.Shard(0)
	if alive := perTick * int(Ticks(DefaultTimeouts().TCPUnconfirmed)); alive < 3*slots {
		t.Fatalf("the flood would need only %d slots to be held whole, want >= 3x the %d slots", alive, slots)
	}

	// packet is the pipeline's conntrack step for one client packet.
	packet := func(k *Key, flags uint8, backend uint32) (Entry, bool) {
		h := hashKey(k)
		if e, ok := s.Lookup(k, h); ok {
			s.Touch(e, flags)
			return e, true
		}
		e, r := s.Insert(k, h, backend, flags)
		return e, r.Tracked()
	}

	// Real flows: index j < real/2 starts at tick 0, the rest are spread
	// over the flood. Flood tuples use indexes from 1<<20 up.
	realStart := func(j int) Tick {
		if j < real/2 {
			return 0
		}
		return start + Tick((j-real/2)*(floodTicks-ProofTicks)/(real/2))
	}
	// mustKeep reports whether real flow j must have its entry at tick now.
	mustKeep := func(j int, now Tick) bool {
		return strict || now-realStart(j) >= ProofTicks-1 && realStart(j) < start
	}
	type event struct {
		k     Key
		flags uint8
		real  int // index of the real flow, or -1 for a spoofed packet
	}
	const handshake = 0xff // a real SYN and its ACK, back to back (an RTT is far below a tick)
	rng := rand.New(rand.NewPCG(3, 4))
	var (
		events  []event
		acks    []Key // spoofed tuples whose SYN was sent last tick
		spoofed int
		lost    = map[int]bool{} // real flows that lost their entry at some point
	)
	for now := Tick(0); now < ticks; now++ {
		s.Advance(now)
		events = events[:0]
		for j := range real {
			switch st := realStart(j); {
			case now == st:
				events = append(events, event{testKey(j), handshake, j})
			case now > st:
				events = append(events, event{testKey(j), tcpACK, j})
			}
		}
		for _, k := range acks {
			events = append(events, event{k, tcpACK, -1})
		}
		acks = acks[:0]
		if now >= start && spoofed < floodFlows {
			for range perTick {
				k := testKey(1<<20 + spoofed)
				spoofed++
				// Half the spoofed ACKs follow in the same tick, half in the next.
				if spoofed%2 == 0 {
					events = append(events, event{k, tcpSYN, -1}, event{k, tcpACK, -1})
				} else {
					events = append(events, event{k, tcpSYN, -1})
					acks = append(acks, k)
				}
			}
		}
		// Interleave everyone's packets at random, keeping each flow's own
		// order (its SYN before its ACK).
		order := map[Key][]uint8{}
		for _, ev := range events {
			order[ev.k] = append(order[ev.k], ev.flags)
		}
		rng.Shuffle(len(events), func(a, b int) { events[a], events[b] = events[b], events[a] })
		for i := range events {
			q := order[events[i].k]
			events[i].flags, order[events[i].k] = q[0], q[1:]
		}

		for _, ev := range events {
			backend := uint32(floodBe)
			if ev.real >= 0 {
				backend = uint32(ev.real % 97)
				if _, ok := lookup(s, ev.k); !ok && ev.flags != handshake {
					if mustKeep(ev.real, now) {
						t.Fatalf("tick %d: real flow %d (started at tick %d) lost its entry", now, ev.real, realStart(ev.real))
					}
					lost[ev.real] = true
				}
			}
			var (
				e  Entry
				ok bool
			)
			if ev.flags == handshake {
				packet(&ev.k, tcpSYN, backend)
				e, ok = packet(&ev.k, tcpACK, backend)
			} else {
				e, ok = packet(&ev.k, ev.flags, backend)
			}
			if ev.real < 0 {
				if ok && !e.Evictable() {
					t.Fatalf("tick %d: spoofed tuple %v:%d is %v, level %d: unevictable", now, ev.k.SrcAddr(), ev.k.SrcPort, e.State(), e.Level())
				}
				continue
			}
			if !ok {
				t.Fatalf("tick %d: real flow %d (started at tick %d) refused an entry", now, ev.real, realStart(ev.real))
			}
			if want := uint32(ev.real % 97); e.Backend() != want {
				t.Fatalf("tick %d: real flow %d re-pinned to %d, want %d", now, ev.real, e.Backend(), want)
			}
			if mustKeep(ev.real, now) && now-realStart(ev.real) >= ProofTicks-1 && e.State() != StateEstablished {
				t.Fatalf("tick %d: real flow %d started at %d still %v level %d", now, ev.real, realStart(ev.real), e.State(), e.Level())
			}
		}

		// Every real flow that has started is still there, even those
		// whose packet this tick came before the flood's.
		for j := range real {
			if realStart(j) > now {
				continue
			}
			e, ok := lookup(s, testKey(j))
			switch {
			case !ok && mustKeep(j, now):
				t.Fatalf("tick %d: real flow %d (started at tick %d) lost its entry", now, j, realStart(j))
			case !ok:
				lost[j] = true
			case e.Backend() != uint32(j%97):
				t.Fatalf("tick %d: real flow %d re-pinned to %d", now, j, e.Backend())
			}
		}
	}
	if spoofed != floodFlows {
		t.Fatalf("sent %d spoofed tuples, want %d", spoofed, floodFlows)
	}

	var flood, floodProven, realProven int
	s.ForEach(func(e Entry) bool {
		switch {
		case testKeyIndex(e.Key()) < real:
			if e.State() == StateEstablished {
				realProven++
			}
		case !e.Evictable() || e.State() == StateEstablished:
			floodProven++
			fallthrough
		default:
			flood++
		}
		return true
	})
	st := s.Stats()
	t.Logf("%d new tuples/tick; end: %d flood entries, %d/%d real flows Established, %d real flows lost their entry at some point; %+v",
		perTick, flood, realProven, real, len(lost), st)
	if floodProven != 0 {
		t.Errorf("%d spoofed tuples ended proven", floodProven)
	}
	if st.EvictedUnestablished == 0 {
		t.Errorf("the flood never had to evict: it was not above capacity (%+v)", st)
	}
	checkInvariants(t, s)
}
