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
