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
