package e2e

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/testing/testbed"
	"github.com/vipd/vipd/testing/testkit"
)

// slowDownload fetches n bytes reading at most rate bytes/s, so that the
// transfer is in flight while the test changes things. It reports the
// backend as soon as the headers arrive.
func (e *env) slowDownload(url string, n int64, rate int, backend chan<- string) error {
	return e.slowDownloadCounted(url, n, rate, backend, nil)
}

// slowDownloadCounted is slowDownload that also keeps the bytes read so
// far in got.
func (e *env) slowDownloadCounted(url string, n int64, rate int, backend chan<- string, got *atomic.Int64) error {
	resp, err := e.c.Get(fmt.Sprintf("%s/bytes?n=%d", url, n))
	if err != nil {
		backend <- ""
		return err
	}
	defer resp.Body.Close()
	backend <- resp.Header.Get("X-Backend")
	if got == nil {
		got = new(atomic.Int64)
	}
	buf := make([]byte, rate/20)
	for got.Load() < n {
		k, err := io.ReadFull(resp.Body, buf[:min(int64(len(buf)), n-got.Load())])
		got.Add(int64(k))
		if err != nil {
			return fmt.Errorf("after %d of %d bytes: %w", got.Load(), n, err)
		}
		time.Sleep(50 * time.Millisecond) // paces the reads at rate: the test's subject, not a wait
	}
	return nil
}

// withFastPath runs f as two subtests: the workers alone, and with the
// XDP fast path forwarding established flows (every snapshot the change
// publishes retires the handed-down flows, which the workers hand down
// again as conntrack has them). refresh is the fast path's.
func withFastPath(t *testing.T, refresh string, f func(t *testing.T, o testbed.Options, co testbed.ConfigOptions)) {
	t.Run("workers", func(t *testing.T) { f(t, testbed.Options{}, testbed.ConfigOptions{}) })
	t.Run("fast path", func(t *testing.T) {
		f(t, testbed.Options{XDPPeers: true}, testbed.ConfigOptions{FastPath: refresh})
	})
}

// fastPathUsed fails the test when the fast path was on (co) but
// forwarded fewer than min frames: a fast path variant must exercise it.
func (e *env) fastPathUsed(co testbed.ConfigOptions, min float64) {
	e.t.Helper()
	if co.FastPath == "" {
		return
	}
	n := e.metric("vipd_driver_events_total", "event", "fast_path_forwarded")
	e.t.Logf("the fast path forwarded %v frames", n)
	if n < min {
		e.t.Errorf("the fast path forwarded %v frames, want at least %v", n, min)
	}
}

// TestFailover: a backend killed mid-run is marked down by its health
// checks and then gets no new connection; transfers on the other backends
// complete.
func TestFailover(t *testing.T) { withFastPath(t, "2s", testFailover) }

func testFailover(t *testing.T, o testbed.Options, co testbed.ConfigOptions) {
	co.Health = testbed.FastHealth
	e := setup(t, o, co)
	e.waitBackends("web-nat", "up")
	// Transfers in flight, ~2.5 s each at 4 MiB/s.
	type xfer struct {
		backend string
		err     error
	}
	var wg sync.WaitGroup
	results := make([]xfer, 6)
	got := make([]atomic.Int64, len(results))
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			be := make(chan string, 1)
			url := natURL
			if i%2 == 1 {
				url = dsrURL
			}
			err := e.slowDownloadCounted(url, 10<<20, 4<<20, be, &got[i])
			results[i] = xfer{<-be, err}
		}()
	}
	// The kill lands mid-transfer: once each transfer has 2 of its 10 MiB
	// (half a second's worth, however long a busy machine takes for it).
	for i := range got {
		waitFor(t, patience, fmt.Sprintf("transfer %d's first 2 MiB", i), func() bool { return got[i].Load() >= 2<<20 })
	}
	victim := e.bed.Backends[0]
	killed := time.Now()
	victim.Kill()
	// New connections, one every 20 ms, until a second after vipd's state
	// shows the backend down (it is read from the snapshot the workers
	// use). A connection begun after that read must not fail; the ones
	// begun before may have gone to the killed backend.
	const interval, fall = 200 * time.Millisecond, 2
	nominal := time.Duration(float64((fall+1)*interval) * 1.1) // the kill lands anywhere in an interval; 10% jitter
	type attempt struct {
		at  time.Duration
		err error
		who string
	}
	var attempts []attempt
	var down time.Duration // since the kill, when the state first read down; 0 until then
	c := e.bed.HTTPClient(10 * time.Second)
	for down == 0 || time.Since(killed) < down+time.Second {
		if down == 0 {
			if time.Since(killed) > patience {
				t.Fatalf("the killed backend is not down %v after the kill: %+v", patience, backendByName(mustState(t, e), "web-nat", victim))
			}
			if st, err := e.v.State(); err == nil && backendByName(st, "web-nat", victim).Forwarding == "down" {
				down = time.Since(killed)
			}
		}
		start := time.Since(killed)
		body, err := testbed.Get(context.Background(), c, natURL+"/")
		attempts = append(attempts, attempt{start, err, strings.TrimSpace(body)})
		time.Sleep(20 * time.Millisecond)
	}
	wg.Wait()
	after := 0
	for _, a := range attempts {
		if a.at <= down {
			continue
		}
		after++
		if a.err != nil || a.who == victim.Name {
			t.Errorf("connection at +%v after the kill, down at +%v: %v %q", a.at.Round(time.Millisecond), down.Round(time.Millisecond), a.err, a.who)
		}
	}
	if after == 0 {
		t.Errorf("no connection was tried after the backend went down")
	}
	for i, r := range results {
		if r.backend != victim.Name && r.err != nil {
			t.Errorf("transfer %d on %s (not the killed backend) failed: %v", i, r.backend, r.err)
		}
	}
	if b := backendByName(mustState(t, e), "web-nat", victim); b.Health != "down" || b.Forwarding != "down" {
		t.Errorf("killed backend state: %+v", b)
	}
	t.Logf("down %v after the kill (%v on an idle machine); %d connections, %d after that", down.Round(time.Millisecond), nominal, len(attempts), after)
	// Thousands of frames: how many of the transfers' (up to 60 MiB)
	// depends on which ones the kill ended and on how often the
	// snapshots the kill publishes sent the flows back to the workers.
	e.fastPathUsed(co, 5000)
}

// mustState reads vipd's state or fails the test.
func mustState(t *testing.T, e *env) *api.State {
	t.Helper()
	st, err := e.v.State()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestDrain: a backend drained by its own health check (503 + X-Drain)
// finishes its in-flight 64 MiB transfer and gets no new connection; its
// active flows then go to zero.
func TestDrain(t *testing.T) { withFastPath(t, "500ms", testDrain) }

func testDrain(t *testing.T, o testbed.Options, co testbed.ConfigOptions) {
	co.Health, co.ClosingTimeout = testbed.FastHealth, "1s"
	e := setup(t, o, co)
	e.waitBackends("web-nat", "up")
	be := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- e.slowDownload(natURL, 64<<20, 32<<20, be) }()
	name := <-be
	var target *testbed.Backend
	for _, b := range e.bed.Backends {
		if b.Name == name {
			target = b
		}
	}
	if target == nil {
		t.Fatalf("transfer did not start: %v", <-done)
	}
	target.SetDraining(true)
	waitFor(t, patience, "the backend draining", func() bool {
		st, err := e.v.State()
		return err == nil && backendByName(st, "web-nat", target).Forwarding == "draining"
	})
	counts := e.names(natURL, 60)
	if counts[target.Name] != 0 {
		t.Errorf("the draining backend got %d new connections: %v", counts[target.Name], counts)
	}
	if err := <-done; err != nil {
		t.Fatalf("the draining backend's transfer failed: %v", err)
	}
	e.fastPathUsed(co, 20000) // most of the 64 MiB's 46,000 segments
	var st *api.State
	if !testkit.Poll(patience, func() bool {
		var err error
		st, err = e.v.State()
		return err == nil && backendByName(st, "web-nat", target).ActiveFlows == 0
	}) {
		t.Fatalf("active flows of the drained backend did not reach 0: %+v", backendByName(st, "web-nat", target))
	}
}

// backendByName finds a backend of a VIP in the admin state.
func backendByName(st *api.State, vip string, b *testbed.Backend) api.BackendState {
	for _, v := range st.VIPs {
		if v.Name != vip {
			continue
		}
		for _, x := range v.Backends {
			if x.Address == b.Addr.String() {
				return x
			}
		}
	}
	return api.BackendState{}
}
