package memq

import (
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/vipd/vipd/dataplane"
)

// Frame is a frame on the in-memory wire.
type Frame struct {
	Data []byte
	Port uint8
}

// Queue implements dataplane.Queue. Inject and Output may be used from any
// goroutine; the Queue methods belong to the worker.
type Queue struct {
	in     chan Frame
	out    chan Frame
	kernel chan Frame
	pool   pool
	emit   []Frame
	done   chan struct{}
	once   sync.Once
}

// New returns a queue whose input and output channels hold up to depth
// frames. When the output is full, transmitted frames are dropped, as a
// full NIC ring would.
func New(depth int) *Queue {
	q := &Queue{
		in:     make(chan Frame, depth),
		out:    make(chan Frame, depth),
		kernel: make(chan Frame, depth),
		done:   make(chan struct{}),
	}
	return q
}

// Inject queues a copy of data as received on port.
func (q *Queue) Inject(data []byte, port uint8) {
	q.in <- Frame{append([]byte(nil), data...), port}
}

// Output is the channel of transmitted frames.
func (q *Queue) Output() <-chan Frame { return q.out }

// Kernel is the channel of frames handed to the kernel.
func (q *Queue) Kernel() <-chan Frame { return q.kernel }

// Receive implements dataplane.Queue.
func (q *Queue) Receive(descs []dataplane.Desc, timeout time.Duration) (int, error) {
	var t <-chan time.Time
	n := 0
	for n < len(descs) {
		var f Frame
		if n == 0 {
			if t == nil {
				timer := time.NewTimer(timeout)
				defer timer.Stop()
				t = timer.C
			}
			select {
			case f = <-q.in:
			case <-t:
				return 0, nil
			case <-q.done:
				return 0, fmt.Errorf("memq: %w", net.ErrClosed)
			}
		} else {
			select {
			case f = <-q.in:
			default:
				return n, nil
			}
		}
		buf := q.pool.get()
		copy(buf[dataplane.Headroom:], f.Data)
		descs[n].Set(buf, dataplane.Headroom, len(f.Data), f.Port)
		n++
	}
	return n, nil
}

// Transmit implements dataplane.Queue.
func (q *Queue) Transmit(descs []dataplane.Desc) error {
	select {
	case <-q.done:
		return fmt.Errorf("memq: %w", net.ErrClosed)
	default:
	}
	for i := range descs {
		d := &descs[i]
		switch d.Verdict {
		case dataplane.VerdictTX, dataplane.VerdictReply:
			q.send(q.out, Frame{append([]byte(nil), d.Buf[d.Off:d.Off+d.Len]...), d.Port})
		case dataplane.VerdictKernel:
			q.send(q.kernel, Frame{append([]byte(nil), d.Buf[d.Off:d.Off+d.Len]...), d.RxPort})
		}
		q.pool.put(d.Buf)
		d.Buf = nil
	}
	for _, f := range q.emit {
		q.send(q.out, f)
	}
	q.emit = q.emit[:0]
	return nil
}

func (q *Queue) send(c chan Frame, f Frame) {
	select {
	case c <- f:
	default:
	}
}

// Alloc implements dataplane.Emitter.
func (q *Queue) Alloc(uint8) ([]byte, int, bool) {
	return q.pool.get(), dataplane.Headroom, true
}

// Emit implements dataplane.Emitter.
func (q *Queue) Emit(buf []byte, off, n int, port uint8) {
	q.emit = append(q.emit, Frame{append([]byte(nil), buf[off:off+n]...), port})
	q.pool.put(buf)
}

// Close implements dataplane.Queue.
func (q *Queue) Close() error {
	q.once.Do(func() { close(q.done) })
	return nil
}

var _ dataplane.Queue = (*Queue)(nil)

// bufBytes is the size of every buffer the queue hands out: headroom and
// the longest test frame.
const bufBytes = 16384

// pool recycles the queue's buffers. A free list under a mutex rather
// than a sync.Pool: a slice put in a sync.Pool is boxed, one allocation
// each time, and Transmit (the worker) and Receive may run on different
// goroutines.
type pool struct {
	mu   sync.Mutex
	free [][]byte
}

func (p *pool) get() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.free); n > 0 {
		b := p.free[n-1]
		p.free = p.free[:n-1]
		return b
	}
	return make([]byte, bufBytes)
}

func (p *pool) put(b []byte) {
	p.mu.Lock()
	p.free = append(p.free, b[:cap(b)])
	p.mu.Unlock()
}
