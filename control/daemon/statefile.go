package daemon

import (
	"context"
	"errors"
	"sync"
	"time"
)

// stateWriter writes the state file ([dataplane] state_file) off the
// daemon's lock. Every admin request takes d.mu, readiness and the
// keepalived track script's query among them, so a write under d.mu (an
// fsync of the file and of its directory) would make a slow disk a
// failed track script, a FAULT and a failover.
//
// The daemon marshals the state under d.mu, where it is consistent, and
// submits the bytes; one goroutine writes them (writeFileDurably: still
// atomic and durable). Each submission is a whole state, so a submission
// that arrives while another waits replaces it: the latest state wins and
// a burst of changes costs one write more, not one write each. A caller
// that must report the outcome (vipd weight, drain, reload) waits for it
// after it has released d.mu.
type stateWriter struct {
	// write replaces the file at path with b (writeFileDurably).
	write func(path string, b []byte) error
	// failed reports a failed write (log and count), from the writer.
	failed func(path string, err error)

	mu sync.Mutex
	// path and data are the latest state not yet taken by the writer;
	// data is nil when there is none.
	// +checklocks:mu
	path string
	// +checklocks:mu
	data []byte
	// queued counts the states submitted so far; written is the number
	// of the latest one a finished write held, and err that write's
	// result.
	// +checklocks:mu
	queued uint64
	// +checklocks:mu
	written uint64
	// +checklocks:mu
	err error
	// busy is set while the writer goroutine runs.
	// +checklocks:mu
	busy bool
	// wrote is closed, and replaced, whenever written advances.
	// +checklocks:mu
	wrote chan struct{}
}

func newStateWriter(write func(string, []byte) error, failed func(string, error)) *stateWriter {
	return &stateWriter{write: write, failed: failed, wrote: make(chan struct{})}
}

// submit queues b as the state file's content at path and returns its
// number, for wait. It never blocks on the disk.
func (s *stateWriter) submit(path string, b []byte) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queued++
	s.path, s.data = path, b
	if !s.busy {
		s.busy = true
		go s.run()
	}
	return s.queued
}

// run writes the latest submitted state until none is left.
func (s *stateWriter) run() {
	for {
		s.mu.Lock()
		if s.data == nil {
			s.busy = false
			s.mu.Unlock()
			return
		}
		path, b, n := s.path, s.data, s.queued
		s.data = nil
		s.mu.Unlock()

		err := s.write(path, b)
		if err != nil {
			s.failed(path, err)
		}

		s.mu.Lock()
		s.written, s.err = n, err
		close(s.wrote)
		s.wrote = make(chan struct{})
		s.mu.Unlock()
	}
}

// errStateSlow is wait's error when the write has not finished in time.
var errStateSlow = errors.New("still being written")

// wait waits until state n (or a later one, which holds n's changes too)
// is written, for at most timeout, and returns that write's error,
// errStateSlow if it has not finished by then. n = 0 waits for nothing.
func (s *stateWriter) wait(n uint64, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		s.mu.Lock()
		if s.written >= n {
			err := s.err
			s.mu.Unlock()
			return err
		}
		ch := s.wrote
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return errStateSlow
		}
	}
}

// latest returns the number of the latest submitted state, for wait.
func (s *stateWriter) latest() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queued
}

// How long a caller waits for the state file, after its change is in
// force: an admin request (vipd weight, drain, reload) reports a write
// that takes longer as still in progress rather than hang on the disk,
// and a stopping daemon waits for its last state a little longer.
const (
	stateWaitRequest = 5 * time.Second
	stateWaitStop    = 10 * time.Second
)

// syncState waits, for at most timeout, until every state submitted so
// far is written; a failure is the writer's to log and count.
func (d *Daemon) syncState(timeout time.Duration) {
	if err := d.stateW.wait(d.stateW.latest(), timeout); errors.Is(err, errStateSlow) {
		d.log.Warn("the state file is still being written: going on without waiting for it", "waited", timeout)
	}
}
