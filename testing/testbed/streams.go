package testbed

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/vipd/vipd/testing/testkit"
)

// Streams is what streaming flows share, whatever carries them (TCP for
// EchoFlows, QUIC for package quicflow): every flow's progress, why the
// broken ones broke, how many flows each backend answered, and the stop
// that ends them all. Each flow runs on a goroutine of its own and
// reports through its Stream.
type Streams struct {
	stop    chan struct{}
	wg      sync.WaitGroup
	streams []*Stream // fixed at NewStreams

	mu      sync.Mutex
	broken  []string // why, per broken flow
	backend map[string]int
}

// Stream is one flow of Streams as its goroutine reports it. Its progress
// is guarded by the Streams' mutex; started is the goroutine's own.
type Stream struct {
	s       *Streams
	p       FlowProgress
	ready   chan<- error
	started bool
}

// FlowProgress is one streaming flow's progress: who it is (its client
// address, its backend), the rounds it completed, and whether it died
// (then it is among the broken already).
type FlowProgress struct {
	Local, Backend string
	Rounds         int
	Dead           bool
}

// NewStreams makes the bookkeeping of n flows; Start starts them.
func NewStreams(n int) *Streams {
	s := &Streams{stop: make(chan struct{}), backend: map[string]int{}}
	for range n {
		s.streams = append(s.streams, &Stream{s: s})
	}
	return s
}

// Stream is flow i's.
func (s *Streams) Stream(i int) *Stream { return s.streams[i] }

// Start runs run(i) for every flow i on a goroutine of its own and
// returns once each has completed a round (Stream.Round). If one fails
// first (Stream.Fail), or patience passes, it stops them all and says
// why: "<kind> flow to <to> did not start: ...".
func (s *Streams) Start(kind, to string, patience time.Duration, run func(i int)) error {
	ready := make(chan error, len(s.streams))
	for i, st := range s.streams {
		st.ready = ready
		s.wg.Go(func() { run(i) })
	}
	deadline := time.After(patience)
	for i := range s.streams {
		select {
		case err := <-ready:
			if err != nil {
				s.Finish()
				return fmt.Errorf("%s flow to %s did not start: %w", kind, to, err)
			}
		case <-deadline:
			s.Finish()
			return fmt.Errorf("only %d of %d %s flows to %s started within %v", i, len(s.streams), kind, to, patience)
		}
	}
	return nil
}

// Round timing: a round every roundGap, each allowed roundTimeout (long
// enough to ride out a box's hold time and, behind it, TCP's
// retransmission backoff or QUIC's probe timeouts).
const (
	roundGap     = 100 * time.Millisecond
	roundTimeout = 30 * time.Second
)

// Echo streams over w, reading from r (w itself, or a buffered reader of
// it), until Finish or a failure: every roundGap a round writes size
// pseudo-random bytes from rng and reads exactly those back, within
// roundTimeout, and counts (Round). first, if not nil, runs after the
// first write, before its echo is read (a QUIC server learns of a stream
// by its first frame, and only then sends its name); its error fails the
// flow. A round that Finish cuts short is not a failure.
func (st *Stream) Echo(w Deadliner, r io.Reader, rng *rand.Rand, size int, first func() error) {
	out, in := make([]byte, size), make([]byte, size)
	for round := 0; ; round++ {
		for i := range out {
			out[i] = byte(rng.Uint32())
		}
		w.SetDeadline(time.Now().Add(roundTimeout))
		_, err := w.Write(out)
		if err != nil {
			err = fmt.Errorf("write: %w", err)
		} else if round == 0 && first != nil {
			err = first()
		}
		if err == nil {
			if _, err = io.ReadFull(r, in); err != nil {
				err = fmt.Errorf("read: %w", err)
			} else if !bytes.Equal(in, out) {
				err = errors.New("the echo differs from what was sent")
			}
		}
		select {
		case <-st.Stopped():
			return
		default:
		}
		if err != nil {
			st.Fail(err)
			return
		}
		st.Round()
		select {
		case <-st.Stopped():
			return
		case <-time.After(roundGap):
		}
	}
}

// Deadliner is what a flow streams over: a TCP connection, a QUIC stream.
type Deadliner interface {
	io.Writer
	SetDeadline(time.Time) error
}

// Stopped is closed when the flows are to stop (Finish).
func (st *Stream) Stopped() <-chan struct{} { return st.s.stop }

// SetLocal records the flow's client address.
func (st *Stream) SetLocal(addr string) {
	st.s.mu.Lock()
	defer st.s.mu.Unlock()
	st.p.Local = addr
}

// Answered records the backend that answered the flow.
func (st *Stream) Answered(backend string) {
	st.s.mu.Lock()
	defer st.s.mu.Unlock()
	st.p.Backend = backend
	st.s.backend[backend]++
}

// Round counts a round completed; the first tells Start the flow runs.
func (st *Stream) Round() {
	st.s.mu.Lock()
	st.p.Rounds++
	st.s.mu.Unlock()
	if !st.started {
		st.started = true
		st.ready <- nil
	}
}

// Fail ends the flow on err: before its first round Start returns it,
// after it the flow is dead and among the broken.
func (st *Stream) Fail(err error) {
	if !st.started {
		st.ready <- err
		return
	}
	st.s.mu.Lock()
	defer st.s.mu.Unlock()
	st.p.Dead = true
	st.s.broken = append(st.s.broken, fmt.Sprintf("%s (backend %s) after %d rounds: %v", st.p.Local, st.p.Backend, st.p.Rounds, err))
}

// Progress is the flow's progress so far.
func (st *Stream) Progress() FlowProgress {
	st.s.mu.Lock()
	defer st.s.mu.Unlock()
	return st.p
}

// Progress is every flow's progress, in order, and why the broken ones
// broke.
func (s *Streams) Progress() ([]FlowProgress, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := make([]FlowProgress, len(s.streams))
	for i, st := range s.streams {
		ps[i] = st.p
	}
	return ps, append([]string(nil), s.broken...)
}

// Settle waits until every flow still alive has completed a round after
// now, for at most d, and returns the flows broken so far, counting the
// ones that made no progress as broken (stalled).
func (s *Streams) Settle(d time.Duration) (broken []string) {
	start, _ := s.Progress()
	testkit.Poll(d, func() bool {
		now, dead := s.Progress()
		var stalled []string
		for i, f := range now {
			if !f.Dead && f.Rounds <= start[i].Rounds {
				stalled = append(stalled, fmt.Sprintf("%s (backend %s) stalled after %d rounds", f.Local, f.Backend, f.Rounds))
			}
		}
		broken = append(dead, stalled...)
		return len(stalled) == 0
	})
	return broken
}

// Finish stops every flow and waits for them.
func (s *Streams) Finish() {
	select {
	case <-s.stop:
		return
	default:
	}
	close(s.stop)
	s.wg.Wait()
}

// Len is the number of flows started.
func (s *Streams) Len() int { return len(s.streams) }

// Backends counts the flows by the backend that answered them.
func (s *Streams) Backends() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.backend)
}
