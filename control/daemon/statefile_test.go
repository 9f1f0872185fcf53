package daemon

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/admin/client"
)

// TestStateWriteOffLock: a state file write that blocks (its temporary
// file is a FIFO nobody reads, as a hung disk would hold the write) keeps
// no admin request waiting: reads, readiness, /metrics and the query of
// vipd keepalived-check answer within 100 ms, and changes made meanwhile
// are in force at once. Once the disk answers, the latest state is
// written, holding every change, and each request has its answer.
func TestStateWriteOffLock(t *testing.T) {
	td := newTestDaemon(t, testConfig, nil)
	lb := td.logTo()
	td.run()
	td.waitRunning()
	state := filepath.Join(filepath.Dir(td.path), "state.json")
	fifo := filepath.Join(filepath.Dir(state), "."+filepath.Base(state)+".tmp") // writeFileDurably's
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// release lets the blocked write go on: with a reader, opening the
	// FIFO for writing returns (the write then fails or succeeds; either
	// way the writer goes on to the next state).
	var reader *os.File
	release := func() {
		if reader != nil {
			return
		}
		f, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			t.Errorf("opening the FIFO to release the write: %v", err)
			return
		}
		reader = f
	}
	t.Cleanup(func() {
		release()
		if reader != nil {
			reader.Close()
		}
	})

	type answer struct {
		ans *api.OverrideAnswer
		err error
	}
	answers := make(chan answer, 3)
	override := func(vip, backend string, w uint32) {
		go func() {
			ans, err := td.d.SetOverride(api.OverrideRequest{VIP: vip, Backend: backend, Weight: weight(w)})
			answers <- answer{ans, err}
		}()
	}
	changed := func(n int) bool {
		return len(lb.lines("run-time override changed")) >= n
	}
	waitFor := func(what string, cond func() bool) bool {
		t.Helper()
		for end := time.Now().Add(3 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(end) {
				t.Errorf("after 3 s: %s", what)
				return false
			}
		}
		return true
	}

	override("web", "198.18.1.12", 5)
	if !waitFor("the first override is not in force", func() bool { return changed(1) }) {
		t.FailNow()
	}
	// The first override's write is now blocked (or about to be).
	within := func(what string, f func(ctx context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- f(ctx) }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: %v", what, err)
			} else if took := time.Since(start); took > 100*time.Millisecond {
				t.Errorf("%s took %v while the state file was being written, want at most 100 ms", what, took)
			}
		case <-time.After(100 * time.Millisecond):
			t.Errorf("%s: no answer within 100 ms while the state file was being written", what)
		}
	}
	within("State (vipd status)", func(ctx context.Context) error { _, err := td.d.State(ctx); return err })
	within("Ready (readiness)", func(context.Context) error { return td.d.Ready() })
	within("/v1/state over the socket (vipd keepalived-check)", func(ctx context.Context) error {
		_, err := client.FetchSocketState(ctx, td.socket)
		return err
	})
	within("/metrics over the socket", func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://vipd/metrics", nil)
		if err != nil {
			return err
		}
		resp, err := client.SocketClient(td.socket).Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	})
	// Two more changes while the disk hangs: in force at once.
	override("web", "198.18.1.11", 6)
	override("dsr", "198.18.1.11", 7)
	waitFor("the overrides made while the state file was being written are not in force", func() bool { return changed(3) })

	release()
	for range 3 {
		select {
		case a := <-answers:
			if a.err != nil {
				t.Errorf("override: %v", a.err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("an override did not answer after the write was released")
		}
	}
	// The state on disk is the latest: all three overrides.
	saved := savedOverrides(t, state)
	for k, w := range map[string]uint32{
		"198.18.0.100:80/tcp 198.18.1.12:8080": 5,
		"198.18.0.100:80/tcp 198.18.1.11:8080": 6,
		"198.18.0.101:80/tcp 198.18.1.11:0":    7,
	} {
		if s := saved[k]; s.Weight == nil || *s.Weight != w {
			t.Errorf("state file: %s: %+v, want weight %d", k, s, w)
		}
	}
}

// TestStateWriterLatestWins: states submitted while a write is under way
// are written once, as the latest of them, and every submitter's wait
// ends with the write that holds its state.
func TestStateWriterLatestWins(t *testing.T) {
	type write struct {
		path string
		data string
	}
	writes := make(chan write, 10)
	unblock := make(chan struct{})
	first := true
	w := newStateWriter(func(path string, b []byte) error {
		if first { // only the writer goroutine calls this
			first = false
			<-unblock
		}
		writes <- write{path, string(b)}
		return nil
	}, func(string, error) { t.Error("a write failed") })
	n1 := w.submit("f", []byte("1"))
	n2 := w.submit("f", []byte("2"))
	n3 := w.submit("f", []byte("3"))
	if err := w.wait(n1, 20*time.Millisecond); err != errStateSlow {
		t.Errorf("wait while the write is blocked: %v, want errStateSlow", err)
	}
	close(unblock)
	for _, n := range []uint64{n1, n2, n3} {
		if err := w.wait(n, 10*time.Second); err != nil {
			t.Errorf("wait(%d): %v", n, err)
		}
	}
	var got []string
	for len(writes) > 0 {
		got = append(got, (<-writes).data)
	}
	// The first write may have taken "1" or a later state, depending on
	// when the writer started; the last is "3", and no state is written
	// after a later one.
	if len(got) == 0 || len(got) > 2 || got[len(got)-1] != "3" {
		t.Errorf("writes %q: want at most two, the last one \"3\"", got)
	}
	if w.wait(w.latest(), time.Second) != nil {
		t.Error("wait for the latest state")
	}
}
