package daemon

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vipd/vipd/dataplane"
	"github.com/vipd/vipd/internal/sdnotify"
	"github.com/vipd/vipd/testing/testkit"
)

// fakeSystemd is the service manager's end of $NOTIFY_SOCKET: a unixgram
// socket in a temporary directory whose datagrams arrive on msgs.
type fakeSystemd struct {
	n    *sdnotify.Notifier
	msgs chan string
}

func newFakeSystemd(t *testing.T) *fakeSystemd {
	t.Helper()
	dir, err := os.MkdirTemp("", "vipd-notify")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fs := &fakeSystemd{msgs: make(chan string, 1024)}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			fs.msgs <- string(buf[:n])
		}
	}()
	if fs.n, err = sdnotify.Dial(path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.n.Close() })
	return fs
}

// notify runs d.Notify against fs until the test ends.
func (fs *fakeSystemd) notify(t *testing.T, d *Daemon, watchdog time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Notify(ctx, fs.n, watchdog)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// next returns the next message other than WATCHDOG=1, or "" after wait.
func (fs *fakeSystemd) next(wait time.Duration) string {
	timeout := time.After(wait)
	for {
		select {
		case m := <-fs.msgs:
			if m != "WATCHDOG=1" {
				return m
			}
		case <-timeout:
			return ""
		}
	}
}

// TestNotifyReadyAfterWorkers holds the start where the platform opens the
// queues (and attaches the XDP program) and then where the workers wait
// for the host: no READY=1 may arrive at either point, and when it arrives
// the workers run.
func TestNotifyReadyAfterWorkers(t *testing.T) {
	td := newTestDaemon(t, testConfig, nil)
	fs := newFakeSystemd(t)
	opened, openRelease := make(chan struct{}), make(chan struct{})
	td.plat.onOpen = func() { close(opened); <-openRelease }
	hostWaits, hostRelease := make(chan struct{}), make(chan struct{})
	td.plat.onRun = func() { close(hostWaits); <-hostRelease }
	td.d.hostWait = time.Hour // the workers start when the host is ready, however slow the machine
	fs.notify(t, td.d, time.Minute)
	td.run()

	<-opened
	if m := fs.next(200 * time.Millisecond); m != "" {
		t.Errorf("while the queues open: got %q, want nothing", m)
	}
	close(openRelease)
	<-hostWaits
	if m := fs.next(300 * time.Millisecond); m != "" {
		t.Errorf("while the workers wait for the host: got %q, want nothing", m)
	}
	close(hostRelease)
	m := fs.next(30 * time.Second)
	if !strings.HasPrefix(m, "READY=1") {
		t.Fatalf("after the start: got %q, want READY=1", m)
	}
	select {
	case <-td.d.Running():
	default:
		t.Error("READY=1 arrived before the workers run")
	}
	if err := td.d.Ready(); err != nil {
		t.Errorf("READY=1 sent, but Ready() = %v", err)
	}
	// And the box forwards.
	if got := td.send(syn(t, "198.18.0.100", 1000, "S")); !got.IsValid() {
		t.Error("nothing forwarded after READY=1")
	}
}

// stallQueue blocks Receive while stalled is set, like a worker stuck in
// a driver.
type stallQueue struct {
	dataplane.Queue
	stalled *atomic.Bool
}

func (q stallQueue) Receive(descs []dataplane.Desc, timeout time.Duration) (int, error) {
	for q.stalled.Load() {
		time.Sleep(time.Millisecond)
	}
	return q.Queue.Receive(descs, timeout)
}

// TestWatchdogStopsWhenWorkerStalls feeds a 200 ms watchdog (WATCHDOG=1
// every 100 ms), stalls one of the two workers and expects the feed to
// stop, then to resume when the worker moves again.
func TestWatchdogStopsWhenWorkerStalls(t *testing.T) {
	td := newTestDaemon(t, testConfig, nil)
	var stalled atomic.Bool
	t.Cleanup(func() { stalled.Store(false) }) // runs before the daemon stops
	td.plat.wrap = func(i int, q dataplane.Queue) dataplane.Queue {
		if i == 1 {
			return stallQueue{q, &stalled}
		}
		return q
	}
	fs := newFakeSystemd(t)
	fs.notify(t, td.d, 200*time.Millisecond)
	td.run()
	td.waitRunning()

	// count returns how many WATCHDOG=1 arrive within d.
	count := func(d time.Duration) int {
		n := 0
		timeout := time.After(d)
		for {
			select {
			case m := <-fs.msgs:
				if m == "WATCHDOG=1" {
					n++
				}
			case <-timeout:
				return n
			}
		}
	}
	// pings waits for n WATCHDOG=1, for at most 30 s (they come every
	// 100 ms, half of WatchdogSec, on an idle machine).
	pings := func(what string, n int) {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for got := 0; got < n; {
			select {
			case m := <-fs.msgs:
				if m == "WATCHDOG=1" {
					got++
				}
			case <-timeout:
				t.Fatalf("%s: %d WATCHDOG=1 in 30 s, want %d", what, got, n)
			}
		}
	}
	pings("workers running", 5)
	stalled.Store(true)
	testkit.Eventually(t, testkit.Patience, "worker 1 seen stalled", func() bool {
		s := td.d.Stalled(100 * time.Millisecond)
		return len(s) == 1 && s[0] == 1
	})

	// Notify sees the stall from now on: a ping after this second was
	// sent after it (the second lets one sent before arrive).
	count(time.Second)
	if n := count(500 * time.Millisecond); n != 0 {
		t.Errorf("worker 1 stalled: %d WATCHDOG=1 in 500 ms, want none", n)
	}
	stalled.Store(false)
	pings("worker 1 moves again", 5)
}

// scriptQueue is a dataplane.Queue whose Receives return the frame counts
// of its script in turn.
type scriptQueue struct {
	dataplane.Queue
	script []int
}

func (q *scriptQueue) Receive([]dataplane.Desc, time.Duration) (int, error) {
	n := q.script[0]
	q.script = q.script[1:]
	return n, nil
}

// TestBeatQueueStamps checks when a worker's Receive stamps its beat: on
// the first call, after every idle Receive, and every beatEvery-th busy one,
// never older than that.
func TestBeatQueueStamps(t *testing.T) {
	busy := 2*beatEvery + 10
	var script []int
	for range busy {
		script = append(script, 64)
	}
	script = append(script, 0, 0, 64, 64) // idle twice, then busy again
	var at atomic.Int64
	q := &beatQueue{Queue: &scriptQueue{script: slices.Clone(script)}, at: &at, idle: true}
	var stamped []int
	for i := range script {
		at.Store(0)
		q.Receive(nil, 0)
		if at.Load() != 0 {
			stamped = append(stamped, i)
		}
	}
	// The first; every beatEvery-th while busy (not the first idle one,
	// 10 after the last stamp); the one after each idle Receive.
	want := []int{0, beatEvery, 2 * beatEvery, busy + 1, busy + 2}
	if !slices.Equal(stamped, want) {
		t.Errorf("stamped at Receives %v, want %v", stamped, want)
	}
}

// TestNotifyReadyAfterFirstRound: READY=1 waits for the first round of
// health checks (a backend whose check has not ended holds it), feeding
// the watchdog meanwhile, and comes when the last first check ends.
func TestNotifyReadyAfterFirstRound(t *testing.T) {
	fp := newFakeProbes()
	td := newTestDaemon(t, strings.NewReplacer("SLOW", "0s", "ALLDOWN", "drop").Replace(healthConfig), fp.probe)
	const limit = 3 * time.Second
	td.d.firstRoundMax = limit
	fp.hold(t, "198.18.1.11") // after the daemon: see TestNoFlowBeforeVerdict
	fs := newFakeSystemd(t)
	fs.notify(t, td.d, 200*time.Millisecond)
	td.run()
	testkit.Eventually(t, testkit.Patience, "the checks to start", td.d.checksStarted)
	started := time.Now()
	// Within 300 ms of the checks' start (the round's limit is 3 s): no
	// READY, the watchdog fed.
	feeds := 0
	timeout := time.After(300 * time.Millisecond)
wait:
	for {
		select {
		case m := <-fs.msgs:
			if m != "WATCHDOG=1" && time.Since(started) < limit/2 {
				t.Fatalf("before .11's first verdict: got %q", m)
			}
			feeds++
		case <-timeout:
			break wait
		}
	}
	if feeds == 0 {
		t.Error("the watchdog went unfed while waiting for the first round")
	}
	fp.release("198.18.1.11")
	if m := fs.next(testkit.Patience); !strings.HasPrefix(m, "READY=1") {
		t.Fatalf("after the first round: got %q, want READY=1", m)
	}
	if !td.d.FirstRoundDone() {
		t.Error("READY=1 before the first round is done")
	}
}
