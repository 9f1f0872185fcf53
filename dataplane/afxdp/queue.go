package afxdp

import (
	"fmt"
	"net"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/vipd/vipd/dataplane"
	"golang.org/x/sys/unix"
)

// Queue serves one NIC queue number on one interface (one-armed) or on
// both (two-armed) for a worker. In the two-armed case a frame that leaves
// by the other interface is copied into a frame of that interface's UMEM.
type Queue struct {
	socks    [2]*Socket // by port; the same socket twice when one-armed
	distinct []*Socket
	meta     []rxMeta // per desc of the batch in flight
	emit     []pending
	pfds     []unix.PollFd
	next     int // socket to read first, for fairness between ports
	// busyPoll: how long Receive keeps busy polling an empty rx ring
	// before it sleeps in poll; 0 when some socket does not busy poll.
	busyPoll time.Duration
	closed   bool

	st queueStats
	// sent and ringFull count a Transmit's frames, added to st once per
	// batch: an atomic add per frame costs a locked instruction each.
	sent, ringFull uint64
}

type rxMeta struct {
	sock *Socket
	base uint64
}

type pending struct {
	sock *Socket
	addr uint64
	n    int
}

type queueStats struct {
	rx, tx, txRingFull, noFrame, kernel, tooLong atomic.Uint64
}

// Stats are a queue's counters. Frames are counted once, where they end.
type Stats struct {
	RxFrames uint64 // received
	TxFrames uint64 // handed to the tx ring
	// TxRingFull: frames dropped because the tx ring was full.
	TxRingFull uint64
	// NoFrame: frames for the other port dropped for want of a free frame
	// of its UMEM to copy into. An Alloc that finds none is not counted
	// here: its caller counts the frame it could not emit (the pipeline's
	// no_tx_frame drop).
	NoFrame uint64
	// TooLong: frames for the other port dropped because they are longer
	// than a frame of its UMEM holds after the kernel's headroom (MaxFrame):
	// a frame received near MaxFrame and grown by encapsulation.
	TooLong uint64
	// KernelDropped: frames the pipeline gave to the kernel, which AF_XDP
	// cannot do; the XDP program is meant to keep them from reaching
	// vipd, so this stays at zero when its sets match the snapshot's.
	KernelDropped uint64
	FillStarved   uint64 // refills that found the free stack empty
	Kicks         uint64 // sendto wakeups
	KickErrors    uint64
	// Wakeups: non-blocking recvfrom calls, to wake a zero-copy driver
	// waiting on the fill ring (need-wakeup) or to busy poll.
	Wakeups uint64
	// Kernel-side counters, summed over the queue's sockets.
	RxDropped, RxRingFull, RxFillRingEmpty, TxRingEmpty, RxInvalid, TxInvalid uint64
	// TxBudget reports that every socket accepted XDP_MAX_TX_SKB_BUDGET.
	TxBudget bool
	// BusyPoll reports that the queue busy polls (every socket accepted
	// the busy-poll options).
	BusyPoll bool
}

// NewQueue builds the queue for queue id on ingress and, when egress is not
// nil, on egress. The sockets are the queue's: Close closes them.
func NewQueue(ingress, egress *Socket, batch int) *Queue {
	q := &Queue{socks: [2]*Socket{ingress, ingress}, meta: make([]rxMeta, batch)}
	q.distinct = []*Socket{ingress}
	if egress != nil && egress != ingress {
		q.socks[dataplane.PortEgress] = egress
		q.distinct = append(q.distinct, egress)
	}
	q.busyPoll = ingress.busyPoll
	for _, s := range q.distinct {
		q.pfds = append(q.pfds, unix.PollFd{Fd: int32(s.fd), Events: unix.POLLIN})
		q.busyPoll = min(q.busyPoll, s.busyPoll)
	}
	return q
}

// Receive implements dataplane.Queue.
func (q *Queue) Receive(descs []dataplane.Desc, timeout time.Duration) (int, error) {
	if q.closed {
		return 0, fmt.Errorf("afxdp: %w", net.ErrClosed)
	}
	if len(q.meta) < len(descs) {
		q.meta = make([]rxMeta, len(descs))
	}
	for _, s := range q.distinct {
		s.reap()
		s.refill()
	}
	n := q.take(descs)
	if n == 0 && q.busyPoll > 0 {
		n = q.poll(descs, timeout)
	} else if n == 0 && timeout <= 0 {
		// No poll below to do it: wake a zero-copy driver that waits
		// for the fill ring (need-wakeup, as xdpsock does when idle).
		for _, s := range q.distinct {
			if s.fill.needWakeup() {
				s.wake()
			}
		}
	}
	if n == 0 && timeout > 0 {
		// xsk_poll busy polls once (when the socket does) and wakes a
		// zero-copy driver that set need-wakeup on the fill ring, then
		// sleeps until a frame arrives.
		ms := int(timeout / time.Millisecond)
		for {
			_, err := unix.Poll(q.pfds, ms)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return 0, fmt.Errorf("afxdp: poll: %w", err)
			}
			break
		}
		n = q.take(descs)
	}
	q.st.rx.Add(uint64(n))
	return n, nil
}

// poll busy polls the queue's sockets, each non-blocking recvfrom running
// the device's NAPI in this thread for up to the busy-poll budget, until a
// frame arrives or, when the caller may wait, q.busyPoll has passed. With
// timeout 0 it polls once.
func (q *Queue) poll(descs []dataplane.Desc, timeout time.Duration) int {
	var end time.Time
	for i := 0; ; i++ {
		for _, s := range q.distinct {
			s.wake()
		}
		if n := q.take(descs); n > 0 || timeout <= 0 {
			return n
		}
		now := time.Now()
		if i == 0 {
			end = now.Add(min(q.busyPoll, timeout))
		} else if !now.Before(end) {
			return 0
		}
	}
}

// take moves received frames from the rx rings into descs.
func (q *Queue) take(descs []dataplane.Desc) int {
	n := 0
	k := len(q.distinct)
	for j := 0; j < k && n < len(descs); j++ {
		s := q.distinct[(q.next+j)%k]
		port := dataplane.PortIngress
		if s == q.socks[dataplane.PortEgress] && s != q.socks[dataplane.PortIngress] {
			port = dataplane.PortEgress
		}
		avail := min(s.rx.avail(), uint32(len(descs)-n))
		for i := uint32(0); i < avail; i++ {
			d := s.rx.desc(s.rx.cachedCons)
			s.rx.cachedCons++
			base := s.base(d.Addr)
			descs[n].Set(s.frame(base), int(d.Addr-base), int(d.Len), port)
			q.meta[n] = rxMeta{s, base}
			n++
		}
		if avail > 0 {
			s.rx.release()
		}
	}
	q.next++
	return n
}

// Transmit implements dataplane.Queue.
func (q *Queue) Transmit(descs []dataplane.Desc) error {
	for i := range descs {
		d := &descs[i]
		m := q.meta[i]
		switch d.Verdict {
		case dataplane.VerdictTX, dataplane.VerdictReply:
			q.send(m.sock, m.base, d)
		case dataplane.VerdictKernel:
			q.st.kernel.Add(1) // rare: the XDP program keeps them away
			m.sock.free = append(m.sock.free, m.base)
		default:
			m.sock.free = append(m.sock.free, m.base)
		}
		d.Buf = nil
	}
	for _, e := range q.emit {
		if e.sock.push(e.addr, e.n) {
			q.sent++
		} else {
			q.ringFull++
			e.sock.free = append(e.sock.free, e.sock.base(e.addr))
		}
	}
	q.emit = q.emit[:0]
	if q.sent != 0 {
		q.st.tx.Add(q.sent)
		q.sent = 0
	}
	if q.ringFull != 0 {
		q.st.txRingFull.Add(q.ringFull)
		q.ringFull = 0
	}
	var err error
	for _, s := range q.distinct {
		if e := s.kick(); e != nil && err == nil {
			err = e
		}
	}
	return err
}

// send transmits d, received into frame base of socket src, on d.Port.
func (q *Queue) send(src *Socket, base uint64, d *dataplane.Desc) {
	dst := q.socks[d.Port]
	if dst == src {
		if src.push(base+uint64(d.Off), d.Len) {
			q.sent++
		} else {
			q.ringFull++
			src.free = append(src.free, base)
		}
		return
	}
	// Another interface, another UMEM: copy.
	src.free = append(src.free, base)
	if uint64(d.Len) > dst.frameSize-unix.XDP_PACKET_HEADROOM {
		// A descriptor past its frame's end is one the kernel refuses
		// (xsk_invalid_descs) after taking it off the ring.
		q.st.tooLong.Add(1)
		return
	}
	if len(dst.free) == 0 {
		dst.reap()
		if len(dst.free) == 0 {
			q.st.noFrame.Add(1)
			return
		}
	}
	f := dst.free[len(dst.free)-1]
	dst.free = dst.free[:len(dst.free)-1]
	copy(dst.frame(f)[unix.XDP_PACKET_HEADROOM:], d.Buf[d.Off:d.Off+d.Len])
	if dst.push(f+unix.XDP_PACKET_HEADROOM, d.Len) {
		q.sent++
	} else {
		q.ringFull++
		dst.free = append(dst.free, f)
	}
}

// Alloc implements dataplane.Emitter: a free frame of the port's UMEM.
func (q *Queue) Alloc(port uint8) ([]byte, int, bool) {
	s := q.socks[port]
	if len(s.free) == 0 {
		s.reap()
		if len(s.free) == 0 {
			return nil, 0, false
		}
	}
	f := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	return s.frame(f), unix.XDP_PACKET_HEADROOM, true
}

// Emit implements dataplane.Emitter; buf is a frame Alloc returned for port.
func (q *Queue) Emit(buf []byte, off, n int, port uint8) {
	s := q.socks[port]
	base := uint64(uintptr(unsafe.Pointer(&buf[0])) - uintptr(unsafe.Pointer(&s.umem[0])))
	q.emit = append(q.emit, pending{s, base + uint64(off), n})
}

// Stats returns the queue's counters; safe from any goroutine.
func (q *Queue) Stats() Stats {
	st := Stats{
		RxFrames:      q.st.rx.Load(),
		TxFrames:      q.st.tx.Load(),
		TxRingFull:    q.st.txRingFull.Load(),
		NoFrame:       q.st.noFrame.Load(),
		TooLong:       q.st.tooLong.Load(),
		KernelDropped: q.st.kernel.Load(),
		TxBudget:      true,
		BusyPoll:      q.busyPoll > 0,
	}
	for _, s := range q.distinct {
		st.FillStarved += s.st.fillStarved.Load()
		st.Kicks += s.st.kicks.Load()
		st.KickErrors += s.st.kickErrors.Load()
		st.Wakeups += s.st.wakeups.Load()
		st.TxBudget = st.TxBudget && s.budget
		if k, err := s.KernelStats(); err == nil {
			st.RxDropped += k.Rx_dropped
			st.RxRingFull += k.Rx_ring_full
			st.RxFillRingEmpty += k.Rx_fill_ring_empty_descs
			st.TxRingEmpty += k.Tx_ring_empty_descs
			st.RxInvalid += k.Rx_invalid_descs
			st.TxInvalid += k.Tx_invalid_descs
		}
	}
	return st
}

// Close implements dataplane.Queue; it closes the sockets.
func (q *Queue) Close() error {
	if q.closed {
		return nil
	}
	q.closed = true
	var err error
	for _, s := range q.distinct {
		if e := s.Close(); e != nil && err == nil {
			err = e
		}
	}
	return err
}

var _ dataplane.Queue = (*Queue)(nil)
