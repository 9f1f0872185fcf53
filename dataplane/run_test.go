package dataplane

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/vipd/vipd/conntrack"
)

// scriptQueue is a Queue for Run: it hands out the frames put in its
// channel one per Receive (none: an idle poll), and records verdicts.
type scriptQueue struct {
	in   chan []byte
	mu   sync.Mutex
	out  []Verdict
	idle chan struct{} // receives a value after every idle poll
}

func (q *scriptQueue) Receive(descs []Desc, timeout time.Duration) (int, error) {
	select {
	case f := <-q.in:
		buf := make([]byte, Headroom+len(f))
		copy(buf[Headroom:], f)
		descs[0] = Desc{Buf: buf, Off: Headroom, Len: len(f)}
		return 1, nil
	case <-time.After(timeout):
		select {
		case q.idle <- struct{}{}:
		default:
		}
		return 0, nil
	}
}

func (q *scriptQueue) Transmit(descs []Desc) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, d := range descs {
		q.out = append(q.out, d.Verdict)
	}
	return nil
}

func (q *scriptQueue) Alloc(uint8) ([]byte, int, bool) { return nil, 0, false }
func (q *scriptQueue) Emit([]byte, int, int, uint8)    {}
func (q *scriptQueue) Close() error                    { return nil }

// running is a worker's Run in a goroutine of its own: stopped is closed
// when Run has returned, with err.
type running struct {
	stopped chan struct{}
	err     error
}

// startRun stores testSpec's snapshot in snaps and runs w on q (batches of
// 8, 5 ms polls) until the test ends, when it stops Run and fails the test
// if Run failed.
func startRun(t *testing.T, w *Worker, q Queue, snaps *Snapshots) *running {
	t.Helper()
	snap, err := NewSnapshot(testSpec())
	if err != nil {
		t.Fatal(err)
	}
	snaps.Store(snap)
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{stopped: make(chan struct{})}
	go func() {
		r.err = w.Run(ctx, q, snaps, 8, 5*time.Millisecond)
		close(r.stopped)
	}()
	t.Cleanup(func() {
		cancel()
		<-r.stopped
		if r.err != nil {
			t.Errorf("Run: %v", r.err)
		}
	})
	return r
}

// TestRunAdoptsWhileIdle: a snapshot that an idle worker takes up between
// polls (Run's idle branch) is adopted whole — per-backend counters and
// the schedulers' per-reference state — so the first new flow of a VIP
// with a load-aware scheduler after it is forwarded. (The idle branch once
// took the snapshot without the schedulers' arrays: the first miss for a
// maglev_bounded VIP indexed an empty slice and the worker panicked, as an
// e2e run showed.)
func TestRunAdoptsWhileIdle(t *testing.T) {
	for _, sched := range []Scheduler{SchedMaglevBounded, SchedWRR, SchedLC, SchedP2C} {
		t.Run(sched.String(), func(t *testing.T) {
			w := newHarness(t, testSpec()).w
			q := &scriptQueue{in: make(chan []byte, 1), idle: make(chan struct{}, 1)}
			var snaps Snapshots
			run := startRun(t, w, q, &snaps)
			<-q.idle
			// A new snapshot with more backends and the scheduler on
			// nat4, taken up while idle.
			spec := testSpec()
			spec.VIPs[0].Scheduler = sched
			spec.VIPs[0].Backends = append(spec.VIPs[0].Backends, BackendSpec{Ref: 60, Addr: spec.VIPs[0].Backends[0].Addr.Next().Next().Next(), Port: 8080, Weight: 1, State: BackendUp, MAC: macOf(60)})
			s2, err := NewSnapshot(spec)
			if err != nil {
				t.Fatal(err)
			}
			snaps.Store(s2)
			<-q.idle
			<-q.idle // at least one idle poll after the store
			for i := uint16(0); i < 20; i++ {
				q.in <- build(t, pk{src: client4, dst: vipNAT4, sport: 40000 + i, dport: 80, flags: "S"})
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				q.mu.Lock()
				n := len(q.out)
				q.mu.Unlock()
				if n == 20 {
					break
				}
				select {
				case <-run.stopped:
					t.Fatalf("Run returned %v", run.err)
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d of 20 frames came back", n)
				}
				time.Sleep(5 * time.Millisecond)
			}
			for i, v := range q.out {
				if v != VerdictTX {
					t.Errorf("frame %d: verdict %v", i, v)
				}
			}
		})
	}
}

// TestRunSweepsWhileIdle: flows that time out while their worker has
// nothing to forward leave its conntrack shard within the sweep period,
// so the published entry count falls with them. (An idle worker once
// examined 8 buckets a poll: a shard of the default million slots took
// 27 minutes to go round with vipd's 100 ms polls, 82 s here.)
func TestRunSweepsWhileIdle(t *testing.T) {
	tab, err := conntrack.New(conntrack.Config{Capacity: 1 << 20, Shards: 1, SweepPeriod: time.Second,
		Timeouts: conntrack.Timeouts{TCPUnestablished: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	w := NewWorker(tab.Shard(0), WorkerOptions{})
	q := &scriptQueue{in: make(chan []byte, 20), idle: make(chan struct{}, 1)}
	var snaps Snapshots
	startRun(t, w, q, &snaps)
	for i := uint16(0); i < 20; i++ {
		q.in <- build(t, pk{src: client4, dst: vipNAT4, sport: 40000 + i, dport: 80, flags: "S"})
	}
	// The SYNs' flows are in; then nothing comes: they time out after a
	// second or two (whole ticks) and the idle sweep, a round a second,
	// reclaims them. 30 s bounds it on a busy machine and still tells
	// the sweep from the one it replaced (82 s). All 20 were in once the
	// table counted them or the worker sent all 20 on (a poll a busy
	// machine delays can miss the count).
	start := time.Now()
	seen := false
	for {
		e := tab.Stats().Entries
		q.mu.Lock()
		sent := len(q.out)
		q.mu.Unlock()
		if e == 20 || sent == 20 {
			seen = true
		}
		if seen && e == 0 {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("%d entries 30 s after 20 SYNs with a 1 s timeout (saw all 20: %v)", e, seen)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("20 SYN flows gone %v after they came", time.Since(start).Round(100*time.Millisecond))
}
