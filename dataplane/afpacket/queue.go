package afpacket

import (
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vipd/vipd/dataplane"
	"github.com/vipd/vipd/packet"
	"golang.org/x/sys/unix"
)

// Queue is one worker's share of one (one-armed) or two (two-armed)
// interfaces.
type Queue struct {
	ports    [2]*Port
	distinct []*Port
	meta     []rxMeta
	pool     [][]byte // spare buffers for emitted frames
	emit     []pending
	pfds     []unix.PollFd
	next     int
	closed   bool

	st queueStats
	// sent counts a Transmit's frames, added to st.tx once per batch: an
	// atomic add per frame costs a locked instruction each.
	sent    uint64
	dropsMu sync.Mutex
	drops   uint64
}

type rxMeta struct {
	port *Port
	slot int
}

type pending struct {
	buf    []byte
	off, n int
	port   uint8
}

type queueStats struct {
	rx, tx, txRingFull, txErrors, truncated, sockErrors atomic.Uint64
}

// Stats are a queue's counters.
type Stats struct {
	RxFrames   uint64
	TxFrames   uint64
	TxRingFull uint64 // frames dropped: no free transmit-ring slot
	TxErrors   uint64 // frames the kernel refused (TP_STATUS_WRONG_FORMAT), failed sendto calls (a link down)
	Truncated  uint64 // frames larger than a ring frame, dropped
	RxDropped  uint64 // frames the kernel dropped: receive ring full
	// SocketErrors: errors the kernel reported on a receive socket, read
	// and so cleared: ENETDOWN when its link went down (the socket stays
	// bound and receives again once the link is up).
	SocketErrors uint64
}

// NewQueue builds a worker's queue over its ports; egress may be nil
// (one-armed). Close closes the ports.
func NewQueue(ingress, egress *Port, batch int) *Queue {
	q := &Queue{ports: [2]*Port{ingress, ingress}, meta: make([]rxMeta, batch)}
	q.distinct = []*Port{ingress}
	if egress != nil && egress != ingress {
		q.ports[dataplane.PortEgress] = egress
		q.distinct = append(q.distinct, egress)
	}
	for _, p := range q.distinct {
		q.pfds = append(q.pfds, unix.PollFd{Fd: int32(p.rxfd), Events: unix.POLLIN})
	}
	for i := 0; i < 2*batch; i++ {
		q.pool = append(q.pool, make([]byte, ingress.tx.frameSize+dataplane.Headroom))
	}
	return q
}

// Receive implements dataplane.Queue.
func (q *Queue) Receive(descs []dataplane.Desc, timeout time.Duration) (int, error) {
	if q.closed {
		return 0, fmt.Errorf("afpacket: %w", net.ErrClosed)
	}
	if len(q.meta) < len(descs) {
		q.meta = make([]rxMeta, len(descs))
	}
	n := q.take(descs)
	if n == 0 && timeout > 0 {
		for {
			_, err := unix.Poll(q.pfds, int(timeout/time.Millisecond))
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return 0, fmt.Errorf("afpacket: poll: %w", err)
			}
			break
		}
		q.clearErrors()
		n = q.take(descs)
	}
	q.st.rx.Add(uint64(n))
	return n, nil
}

// clearErrors reads the pending error of every receive socket that poll
// reported one for. A packet socket whose link goes down gets ENETDOWN
// (packet_notifier), which stays pending, and keeps poll returning at
// once, until something reads it; the ring never does.
func (q *Queue) clearErrors() {
	for i := range q.pfds {
		if q.pfds[i].Revents&unix.POLLERR == 0 {
			continue
		}
		if v, err := unix.GetsockoptInt(int(q.pfds[i].Fd), unix.SOL_SOCKET, unix.SO_ERROR); err == nil && v != 0 {
			q.st.sockErrors.Add(1)
		}
	}
}

func (q *Queue) take(descs []dataplane.Desc) int {
	n := 0
	k := len(q.distinct)
	for j := 0; j < k && n < len(descs); j++ {
		p := q.distinct[(q.next+j)%k]
		port := dataplane.PortIngress
		if p == q.ports[dataplane.PortEgress] && p != q.ports[dataplane.PortIngress] {
			port = dataplane.PortEgress
		}
		for n < len(descs) {
			i := p.rx.next
			if p.rx.status(i)&unix.TP_STATUS_USER == 0 {
				break
			}
			p.rx.next = (i + 1) % p.rx.frames
			h := p.rx.hdr(i)
			if h.Snaplen < h.Len {
				q.st.truncated.Add(1)
				p.rx.setStatus(i, 0)
				continue
			}
			f := p.rx.frame(i)
			off, l := int(h.Mac), int(h.Snaplen)
			if h.Status&unix.TP_STATUS_VLAN_VALID != 0 && l >= 12 {
				// Put the tag the kernel stripped back in front of the
				// EtherType: the MACs move 4 bytes into the reserve.
				copy(f[off-4:off+8], f[off:off+12])
				off -= 4
				l += 4
				tpid := h.Vlan_tpid
				if tpid == 0 {
					tpid = packet.EtherTypeVLAN
				}
				binary.BigEndian.PutUint16(f[off+12:], tpid)
				binary.BigEndian.PutUint16(f[off+14:], h.Vlan_tci)
			}
			descs[n].Set(f, off, l, port)
			q.meta[n] = rxMeta{p, i}
			n++
		}
	}
	q.next++
	return n
}

// Transmit implements dataplane.Queue: frames to send are copied into the
// transmit ring of their port, every receive slot is given back, and one
// sendto per port flushes the ring.
func (q *Queue) Transmit(descs []dataplane.Desc) error {
	for i := range descs {
		d := &descs[i]
		if d.Verdict == dataplane.VerdictTX || d.Verdict == dataplane.VerdictReply {
			q.queueTx(q.ports[d.Port], d.Buf[d.Off:d.Off+d.Len])
		}
		// VerdictKernel: the kernel received its own copy of the frame.
		m := q.meta[i]
		m.port.rx.setStatus(m.slot, 0)
		d.Buf = nil
	}
	for _, e := range q.emit {
		q.queueTx(q.ports[e.port], e.buf[e.off:e.off+e.n])
		q.pool = append(q.pool, e.buf)
	}
	q.emit = q.emit[:0]
	if q.sent != 0 {
		q.st.tx.Add(q.sent)
		q.sent = 0
	}
	for _, p := range q.distinct {
		if _, _, errno := unix.Syscall6(unix.SYS_SENDTO, uintptr(p.txfd), 0, 0, unix.MSG_DONTWAIT, 0, 0); errno != 0 &&
			errno != unix.EAGAIN && errno != unix.ENOBUFS && errno != unix.EINTR {
			// Only a device that is gone is fatal. While a link is down
			// (ENETDOWN) the frames wait in the ring, new ones are
			// dropped as "ring full" once it fills, and the first
			// sendto after the link is back sends them.
			if errno == unix.ENXIO {
				return fmt.Errorf("afpacket: sendto: %w", errno)
			}
			q.st.txErrors.Add(1)
		}
	}
	return nil
}

// queueTx copies frame into the next free slot of p's transmit ring.
func (q *Queue) queueTx(p *Port, frame []byte) {
	i := p.tx.next
	st := p.tx.status(i)
	if st == unix.TP_STATUS_WRONG_FORMAT {
		q.st.txErrors.Add(1)
		st = 0
	}
	if st != 0 || len(frame) > p.tx.frameSize-hdrLen {
		q.st.txRingFull.Add(1)
		return
	}
	f := p.tx.frame(i)
	copy(f[hdrLen:], frame)
	p.tx.hdr(i).Len = uint32(len(frame))
	p.tx.setStatus(i, unix.TP_STATUS_SEND_REQUEST)
	p.tx.next = (i + 1) % p.tx.frames
	q.sent++
}

// Alloc implements dataplane.Emitter.
func (q *Queue) Alloc(uint8) ([]byte, int, bool) {
	if len(q.pool) == 0 {
		return nil, 0, false
	}
	b := q.pool[len(q.pool)-1]
	q.pool = q.pool[:len(q.pool)-1]
	return b, dataplane.Headroom, true
}

// Emit implements dataplane.Emitter.
func (q *Queue) Emit(buf []byte, off, n int, port uint8) {
	q.emit = append(q.emit, pending{buf, off, n, port})
}

// Stats returns the queue's counters; safe from any goroutine.
func (q *Queue) Stats() Stats {
	q.dropsMu.Lock()
	for _, p := range q.distinct {
		if d, err := p.Drops(); err == nil {
			q.drops += d
		}
	}
	drops := q.drops
	q.dropsMu.Unlock()
	return Stats{
		RxFrames:     q.st.rx.Load(),
		TxFrames:     q.st.tx.Load(),
		TxRingFull:   q.st.txRingFull.Load(),
		TxErrors:     q.st.txErrors.Load(),
		Truncated:    q.st.truncated.Load(),
		RxDropped:    drops,
		SocketErrors: q.st.sockErrors.Load(),
	}
}

// Close implements dataplane.Queue; call it once the worker has stopped.
func (q *Queue) Close() error {
	if q.closed {
		return nil
	}
	q.closed = true
	for _, p := range q.distinct {
		p.Close()
	}
	return nil
}

var _ dataplane.Queue = (*Queue)(nil)
