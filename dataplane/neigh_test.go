package dataplane

import (
	"net/netip"
	"sync"
	"testing"

	"github.com/vipd/vipd/conntrack"
)

// TestLearnedClientMAC: a NAT reply to an on-link client goes to the MAC the
// client sent its request from, also when the reply lands on another worker.
func TestLearnedClientMAC(t *testing.T) {
	spec := testSpec()
	spec.ClientOnLink = []netip.Prefix{netip.MustParsePrefix("198.18.0.0/24"), netip.MustParsePrefix("2001:2::/64")}
	cache := NewNeighborCache(64)
	snap, err := NewSnapshot(spec)
	if err != nil {
		t.Fatal(err)
	}
	ct, _ := conntrack.New(conntrack.Config{Capacity: 4096, Shards: 2})
	a := &harness{t: t, w: NewWorker(ct.Shard(0), WorkerOptions{Neighbors: cache}), snap: snap, now: 1e9, emit: &sliceEmitter{}}
	b := &harness{t: t, w: NewWorker(ct.Shard(1), WorkerOptions{Neighbors: cache}), snap: snap, now: 1e9, emit: &sliceEmitter{}}
	clientMAC := [6]byte{0x02, 0, 0, 0, 0, 0x77}
	tests := []struct {
		client, vip, backend netip.Addr
	}{
		{netip.MustParseAddr("198.18.0.77"), vipNAT4, netip.MustParseAddr("198.18.1.11")},
		{netip.MustParseAddr("2001:2::77"), vipNAT6, netip.MustParseAddr("2001:2:1::11")},
	}
	for _, tt := range tests {
		reply := build(t, pk{src: tt.backend, dst: tt.client, sport: 8080, dport: 5555, flags: "SA", srcMAC: macOf(1)})
		if d := b.runOn(PortEgress, reply); d.Verdict != VerdictDrop || d.Reason != DropNoNeighbor {
			t.Fatalf("%v before any request: %v %v, want drop no_neighbor", tt.client, d.Verdict, d.Reason)
		}
		a.run(build(t, pk{src: tt.client, dst: tt.vip, sport: 5555, dport: 80, flags: "S", srcMAC: clientMAC}))
		d := b.runOn(PortEgress, reply)
		if d.Verdict != VerdictTX {
			t.Fatalf("%v after its request, on the other worker: %v %v", tt.client, d.Verdict, d.Reason)
		}
		if got := [6]byte(d.frame()[0:6]); got != clientMAC {
			t.Errorf("%v: reply to %x, want the client's %x", tt.client, got, clientMAC)
		}
	}
	if m, ok := cache.Learned(netip.MustParseAddr("198.18.0.77")); !ok || m != clientMAC {
		t.Errorf("Learned = %x, %v", m, ok)
	}
	// A client off the connected subnets is not learned (its frames come
	// from the gateway).
	a.run(build(t, pk{src: client4.Next().Next().Next(), dst: vipNAT4, sport: 1, dport: 80, flags: "S", srcMAC: clientMAC}))
}

// TestNeighborCacheConcurrent hammers one cache from several goroutines:
// a lookup returns either a miss or the MAC its address was learned with,
// never a torn mixture (run with -race).
func TestNeighborCacheConcurrent(t *testing.T) {
	c := NewNeighborCache(64) // small: many addresses share slots
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20000; i++ {
				a := [4]byte{198, 18, byte(i >> 8), byte(i)}
				mac := [6]byte{2, byte(g), 0, 0, a[2], a[3]}
				hi, lo := nkey4(a)
				c.learn(hi, lo, mac)
				if m, ok := c.lookup(hi, lo); ok && (m[4] != a[2] || m[5] != a[3]) {
					t.Errorf("torn read: %v -> %x", a, m)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestNeighborCacheAllocs(t *testing.T) {
	c := NewNeighborCache(64)
	hi, lo := nkey4([4]byte{198, 18, 0, 9})
	if n := testing.AllocsPerRun(100, func() {
		c.learn(hi, lo, [6]byte{2, 0, 0, 0, 0, 9})
		c.lookup(hi, lo)
	}); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

// TestOnLinkClient6 checks the precomputed IPv6 prefix masks against
// netip.Prefix.Contains, for prefix lengths on both sides of 64.
func TestOnLinkClient6(t *testing.T) {
	prefixes := []string{"2001:db8::/32", "2001:2:0:1::/64", "2001:2:0:2:8000::/65", "2001:2::7/128", "fd00::/8"}
	addrs := []string{"2001:db8::1", "2001:db9::1", "2001:2:0:1::ffff", "2001:2:0:1:1::", "2001:2:0:2:8000::1",
		"2001:2:0:2:7fff::1", "2001:2::7", "2001:2::8", "fdff::1", "fe00::1", "::"}
	for _, ps := range prefixes {
		p := netip.MustParsePrefix(ps)
		s := &Snapshot{onLink6: []prefix6{mkPrefix6(p)}}
		for _, as := range addrs {
			a := netip.MustParseAddr(as)
			a16 := a.As16()
			if got, want := s.onLinkClient6(&a16), p.Contains(a); got != want {
				t.Errorf("%v in %v: %v, want %v", a, p, got, want)
			}
		}
	}
}
