package testkit

import (
	"testing"
	"time"
)

// Patience is the timeout of a wait with no reason for another: long
// enough for a busy machine (the wait ends as soon as its condition holds,
// so it costs nothing when the machine is not).
const Patience = 30 * time.Second

// The polling interval starts at firstPoll and doubles up to maxPoll: a
// condition that holds soon is seen soon, one that takes seconds is not
// evaluated thousands of times (some run a command or query a daemon).
const (
	firstPoll = time.Millisecond
	maxPoll   = 50 * time.Millisecond
)

// Poll evaluates cond until it returns true or timeout has passed, and
// reports whether it did. cond runs at least once, and once more at the
// deadline, so a wait that slept past it does not fail a condition that
// holds by then.
func Poll(timeout time.Duration, cond func() bool) bool {
	return poll(timeout, maxPoll, cond)
}

// poll is Poll with the longest pause between two evaluations of cond.
func poll(timeout, longest time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for pause := min(firstPoll, longest); ; pause = min(2*pause, longest) {
		if cond() {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		time.Sleep(min(pause, left))
	}
}

// Eventually fails t (t.Fatalf) unless cond returns true within timeout:
// "timed out after <timeout> waiting for <what>". It must be called from
// the test's goroutine; cond may itself fail t.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Poll(timeout, cond) {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// Stable fails t unless cond, polled, returns true every time for window
// without a break, within timeout: "timed out after <timeout> waiting for
// <what> (for <window>)". A false result starts the window over.
func Stable(t testing.TB, timeout, window time.Duration, what string, cond func() bool) {
	t.Helper()
	// Polled at least four times a window, so that one break in it is
	// seen.
	var since time.Time
	ok := poll(timeout, max(min(maxPoll, window/4), firstPoll), func() bool {
		now := time.Now()
		switch {
		case !cond():
			since = time.Time{}
		case since.IsZero():
			since = now
		case now.Sub(since) >= window:
			return true
		}
		return false
	})
	if !ok {
		t.Fatalf("timed out after %v waiting for %s (for %v)", timeout, what, window)
	}
}
