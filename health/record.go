package health

import (
	"context"
	"errors"
	"net"
	"os"
	"time"
)

// CheckBuckets are the upper bounds, in seconds, of the check-duration
// histogram (Record.Buckets): from a LAN connect to a check timeout.
var CheckBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// Record is what the checks of one backend saw last, and their totals:
// the answer to "why is it down, and since when".
type Record struct {
	// LastError is why the last check failed, "" when it passed.
	LastError string
	// Since is when the verdict (up, down, draining) last changed, or the
	// first verdict was reached.
	Since time.Time
	// LastCheck is how long the last check took.
	LastCheck time.Duration
	// OK and Fail count the checks by result.
	OK, Fail uint64
	// Buckets[i] counts the checks that took at most CheckBuckets[i]
	// seconds (not cumulative); Seconds is their total duration.
	Buckets [12]uint64
	Seconds float64
}

// Records returns each checked backend's record by reference.
func (m *Manager) Records() map[uint32]Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[uint32]Record, len(m.records))
	for ref, r := range m.records {
		out[ref] = *r
	}
	return out
}

// record notes a check of ref that took took and failed with errText
// ("" when it passed); changed: the verdict changed at now.
func (m *Manager) record(ref uint32, took time.Duration, errText string, changed bool, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.running[ref]; !ok {
		return // removed by Set meanwhile
	}
	if m.records == nil {
		m.records = map[uint32]*Record{}
	}
	r := m.records[ref]
	if r == nil {
		r = &Record{}
		m.records[ref] = r
	}
	r.LastError, r.LastCheck = errText, took
	if errText == "" {
		r.OK++
	} else {
		r.Fail++
	}
	if changed || r.Since.IsZero() {
		r.Since = now
	}
	s := took.Seconds()
	r.Seconds += s
	for i, b := range CheckBuckets {
		if s <= b {
			r.Buckets[i]++
			break
		}
	}
}

// describe is err as an operator reads it: "connect: connection refused"
// rather than the whole chain of the dialer's wrapping, "timeout after 1s"
// for a check that ran out its timeout, "HTTP 503" as probeHTTP says it.
func describe(err error, timeout time.Duration) string {
	if err == nil {
		return ""
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout()) {
		return "timeout after " + timeout.String()
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err.Error()
	}
	return err.Error()
}
