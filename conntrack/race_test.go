package conntrack

import (
	"sync"
	"testing"
)

// TestConcurrentShards runs one goroutine per shard, as the dataplane does,
// while another goroutine polls Table.Stats. Run with -race: owners share
// nothing but the published counters.
func TestConcurrentShards(t *testing.T) {
	const shards = 4
	tab, err := New(Config{Capacity: 1 << 14, Shards: shards, Timeouts: testTimeouts})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var reader sync.WaitGroup
	reader.Go(func() {
		var last uint64
		for {
			st := tab.Stats()
			if st.Inserts < last {
				t.Errorf("Inserts went back from %d to %d", last, st.Inserts)
			}
			last = st.Inserts
			select {
			case <-done:
				return
			default:
			}
		}
	})

	var workers sync.WaitGroup
	for w := range shards {
		s := tab.Shard(w)
		workers.Go(func() {
			base := w << 20
			for batch := range 200 {
				s.Advance(Tick(batch / 10))
				for n := range 64 {
					k := testKey(base + batch*32 + n) // half the keys repeat from the last batch
					h := hashKey(&k)
					e, ok := s.Lookup(&k, h)
					switch {
					case !ok:
						s.Insert(&k, h, uint32(w), tcpSYN)
					case n%16 == 0:
						s.Delete(e)
					default:
						s.Touch(e, tcpACK)
					}
				}
			}
			s.Advance(s.Now())
		})
	}
	workers.Wait()
	close(done)
	reader.Wait()

	var want Stats
	for w := range shards {
		checkInvariants(t, tab.Shard(w))
		want.add(tab.Shard(w).Stats())
	}
	if got := tab.Stats(); got != want {
		t.Errorf("Table.Stats() = %+v\nsum of shards   = %+v", got, want)
	}
	if want.Inserts == 0 || want.Deletes == 0 {
		t.Errorf("workers did nothing: %+v", want)
	}
}
