package testkit

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is a testing.TB whose Fatalf records the message and ends the
// goroutine, as the real one does.
type recorder struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.msg = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}

// run calls f with a recorder on its own goroutine and returns the
// message f failed with ("" when it did not fail).
func run(f func(testing.TB)) string {
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.msg
}

func TestPoll(t *testing.T) {
	n := 0
	if !Poll(time.Minute, func() bool { n++; return n == 5 }) {
		t.Fatal("Poll of a condition that comes true returned false")
	}
	start := time.Now()
	n = 0
	if Poll(30*time.Millisecond, func() bool { n++; return false }) {
		t.Fatal("Poll of a false condition returned true")
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Errorf("Poll gave up after %v, before its 30ms timeout", d)
	}
	if n < 2 {
		t.Errorf("Poll evaluated the condition %d times, want it again at the deadline", n)
	}
}

func TestEventually(t *testing.T) {
	n := 0
	if msg := run(func(tb testing.TB) { Eventually(tb, time.Minute, "five", func() bool { n++; return n == 5 }) }); msg != "" {
		t.Errorf("Eventually of a condition that comes true failed: %s", msg)
	}
	msg := run(func(tb testing.TB) { Eventually(tb, 20*time.Millisecond, "never", func() bool { return false }) })
	if want := "timed out after 20ms waiting for never"; msg != want {
		t.Errorf("Eventually failed with %q, want %q", msg, want)
	}
}

func TestStable(t *testing.T) {
	// True, then one break, then true for good: the window starts over
	// at the break.
	start := time.Now()
	brk := start.Add(20 * time.Millisecond)
	var broke bool
	msg := run(func(tb testing.TB) {
		Stable(tb, time.Minute, 40*time.Millisecond, "steady", func() bool {
			if !broke && time.Now().After(brk) {
				broke = true
				return false
			}
			return true
		})
	})
	if msg != "" {
		t.Fatalf("Stable of a condition that settles failed: %s", msg)
	}
	if d := time.Since(start); d < 60*time.Millisecond {
		t.Errorf("Stable returned after %v, before the window after the break (60ms)", d)
	}
	msg = run(func(tb testing.TB) {
		Stable(tb, 30*time.Millisecond, time.Hour, "an hour", func() bool { return true })
	})
	if !strings.HasPrefix(msg, "timed out after 30ms waiting for an hour") {
		t.Errorf("Stable failed with %q", msg)
	}
}
