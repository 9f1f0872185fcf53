package events

import (
	"sync"
	"time"

	"github.com/vipd/vipd/control/admin/api"
)

// DefaultSize is how many events a Log keeps by default.
const DefaultSize = 1000

// Log is a ring of the last events. Safe for concurrent use.
type Log struct {
	mu   sync.Mutex
	ring []api.Event // ring[(seq-1) % len]
	next uint64      // the next event's sequence number (from 1)
	now  func() time.Time
}

// New returns a Log of the last size events (DefaultSize if size < 1).
func New(size int) *Log {
	if size < 1 {
		size = DefaultSize
	}
	return &Log{ring: make([]api.Event, size), next: 1, now: time.Now}
}

// Add records e, stamped with its sequence number and, when e.Time is
// zero, the time; it returns the sequence number.
func (l *Log) Add(e api.Event) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	e.Seq = l.next
	if e.Time.IsZero() {
		e.Time = l.now()
	}
	l.ring[(e.Seq-1)%uint64(len(l.ring))] = e
	l.next++
	return e.Seq
}

// Since returns the events after sequence number seq, oldest first, at
// most max of them (the newest max when more are kept; max < 1: all
// kept), and how many after seq fell off the ring before they could be
// read.
func (l *Log) Since(seq uint64, max int) (evs []api.Event, missed uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	first := uint64(1) // the oldest kept
	if n := uint64(len(l.ring)); l.next > n+1 {
		first = l.next - n
	}
	from := seq + 1
	if from < first {
		missed = first - from
		from = first
	}
	if max > 0 && l.next-from > uint64(max) {
		from = l.next - uint64(max)
	}
	for s := from; s < l.next; s++ {
		evs = append(evs, l.ring[(s-1)%uint64(len(l.ring))])
	}
	return evs, missed
}

// Last returns the sequence number of the newest event (0: none yet).
func (l *Log) Last() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next - 1
}
