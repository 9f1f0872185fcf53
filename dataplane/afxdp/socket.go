package afxdp

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/asavie/xdp"
	"github.com/vipd/vipd/packet"
	"golang.org/x/sys/unix"
)

// Options size one socket. Ring sizes and the frame count must be powers of
// two (config validates them); the frame size 2048 or 4096
// (dataplane.FrameSizeFor).
type Options struct {
	FrameSize      int
	FrameCount     int
	RxRing         int
	TxRing         int
	FillRing       int
	CompletionRing int
	// Copy forces copy mode (XDP_COPY); otherwise the kernel picks
	// zero-copy when the driver supports it.
	Copy bool
	// TxBudget raises the number of frames one sendto may transmit in copy
	// mode (XDP_MAX_TX_SKB_BUDGET, kernel 6.17+; the default is 32). 0
	// leaves the kernel's default.
	TxBudget int
	// BusyPollUsecs, when positive, turns on preferred busy polling
	// (SO_PREFER_BUSY_POLL, SO_BUSY_POLL = BusyPollUsecs and
	// SO_BUSY_POLL_BUDGET = BusyPollBudget): the kernel then runs the
	// device's NAPI in the worker's recvfrom, sendto and poll calls, and a
	// Queue whose sockets all accepted it keeps polling an empty rx ring
	// for this many microseconds before it sleeps. The kernel refuses
	// values above its sysctls without CAP_NET_ADMIN; Open does not fail
	// then: BusyPollErr says why, and the socket works without.
	BusyPollUsecs int
	// BusyPollBudget is the most frames one busy poll may process
	// (SO_BUSY_POLL_BUDGET, at most 65535); 0 means 64.
	BusyPollBudget int
}

// xdpPacketHeadroom is XDP_PACKET_HEADROOM: how far into its UMEM frame
// the kernel puts a received frame (the socket's own UMEM headroom is 0).
const xdpPacketHeadroom = 256

// MaxFrame returns the longest Ethernet frame (headers included, no FCS)
// that a socket with UMEM frames of frameSize bytes receives: the kernel
// drops a longer one and counts it in the socket's rx_dropped
// (vipd_driver_events_total{event="xsk_rx_dropped"}).
func MaxFrame(frameSize int) int { return frameSize - xdpPacketHeadroom }

// FrameOverhead is what a received frame adds to its MTU-sized packet
// here: the Ethernet header and a VLAN tag, which XDP sees in the frame.
const FrameOverhead = packet.EthernetSize + packet.VLANTagSize

// xdpMaxTxSkbBudget is the socket option XDP_MAX_TX_SKB_BUDGET (Linux 6.17,
// include/uapi/linux/if_xdp.h), not yet in golang.org/x/sys.
const xdpMaxTxSkbBudget = 9

// Socket is one AF_XDP socket bound to an interface queue, with its UMEM.
type Socket struct {
	xsk       *xdp.Socket
	fd        int
	umem      []byte
	frameSize uint64
	rx, tx    ring
	fill, cq  ring
	free      []uint64 // base addresses of free frames (a stack)
	budget    bool     // TxBudget was accepted
	zeroCopy  bool     // the kernel bound the socket in zero-copy mode
	// busyPoll is how long a Queue polls an empty rx ring before it
	// sleeps; non-zero only when the kernel accepted every busy-poll
	// option.
	busyPoll    time.Duration
	busyPollErr error

	st sockStats
}

type sockStats struct {
	fillStarved atomic.Uint64 // refills that found no free frame while the fill ring had room
	kicks       atomic.Uint64 // sendto calls
	kickErrors  atomic.Uint64 // sendto failures other than "try again", a link that is down included
	wakeups     atomic.Uint64 // recvfrom calls: fill-ring wakeups and busy polls
}

// socketFlags serializes the use of asavie/xdp's global bind flags.
var socketFlags sync.Mutex

// Open creates a socket on queue of the interface and hands the fill ring
// as many frames as it holds.
func Open(ifindex, queue int, o Options) (*Socket, error) {
	flags := uint16(unix.XDP_USE_NEED_WAKEUP)
	if o.Copy {
		flags |= unix.XDP_COPY
	}
	socketFlags.Lock()
	saved := xdp.DefaultSocketFlags
	xdp.DefaultSocketFlags = flags
	xsk, err := xdp.NewSocket(ifindex, queue, &xdp.SocketOptions{
		NumFrames:              o.FrameCount,
		FrameSize:              o.FrameSize,
		FillRingNumDescs:       o.FillRing,
		CompletionRingNumDescs: o.CompletionRing,
		RxRingNumDescs:         o.RxRing,
		TxRingNumDescs:         o.TxRing,
	})
	xdp.DefaultSocketFlags = saved
	socketFlags.Unlock()
	if err != nil {
		return nil, fmt.Errorf("afxdp: socket on ifindex %d queue %d: %w", ifindex, queue, err)
	}
	s := &Socket{xsk: xsk, fd: xsk.FD(), frameSize: uint64(o.FrameSize)}
	// GetFrame of a descriptor spanning the whole UMEM is the UMEM.
	s.umem = xsk.GetFrame(xdp.Desc{Addr: 0, Len: uint32(o.FrameCount * o.FrameSize)})
	if err := s.mapRings(o); err != nil {
		s.Close()
		return nil, err
	}
	if v, err := unix.GetsockoptInt(s.fd, unix.SOL_XDP, unix.XDP_OPTIONS); err == nil {
		s.zeroCopy = v&unix.XDP_OPTIONS_ZEROCOPY != 0
	}
	if o.TxBudget > 0 {
		s.budget = unix.SetsockoptInt(s.fd, unix.SOL_XDP, xdpMaxTxSkbBudget, o.TxBudget) == nil
	}
	if o.BusyPollUsecs > 0 {
		if s.busyPollErr = setBusyPoll(s.fd, o.BusyPollUsecs, o.BusyPollBudget); s.busyPollErr == nil {
			s.busyPoll = time.Duration(o.BusyPollUsecs) * time.Microsecond
		}
	}
	s.free = make([]uint64, 0, o.FrameCount)
	for i := o.FrameCount - 1; i >= 0; i-- {
		s.free = append(s.free, uint64(i)*s.frameSize)
	}
	s.refill()
	return s, nil
}

// setBusyPoll applies the three busy-poll options (Linux 5.11+). Raising
// SO_BUSY_POLL above net.core.busy_read, SO_BUSY_POLL_BUDGET above its
// current value and setting SO_PREFER_BUSY_POLL need CAP_NET_ADMIN (EPERM
// otherwise); an older kernel answers ENOPROTOOPT. On failure the options
// already set are turned off again, so that the socket is left as it was.
func setBusyPoll(fd, usecs, budget int) error {
	if budget <= 0 {
		budget = 64
	}
	opts := []struct {
		name string
		opt  int
		val  int
	}{
		{"SO_PREFER_BUSY_POLL", unix.SO_PREFER_BUSY_POLL, 1},
		{"SO_BUSY_POLL", unix.SO_BUSY_POLL, usecs},
		{"SO_BUSY_POLL_BUDGET", unix.SO_BUSY_POLL_BUDGET, budget},
	}
	for i, o := range opts {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, o.opt, o.val); err != nil {
			// Turning off needs no privilege: SO_BUSY_POLL 0 disables the
			// busy loop whatever the other two say.
			if i > 0 {
				unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PREFER_BUSY_POLL, 0)
				unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_BUSY_POLL, 0)
			}
			return fmt.Errorf("afxdp: setsockopt %s %d: %w", o.name, o.val, err)
		}
	}
	return nil
}

// BusyPoll reports whether the socket busy polls, and when it was asked
// to but the kernel refused, why.
func (s *Socket) BusyPoll() (bool, error) { return s.busyPoll > 0, s.busyPollErr }

// NAPIID is the NAPI instance the kernel busy polls for the socket
// (SO_INCOMING_NAPI_ID), recorded when the first frame arrives; 0 before
// that, or when the device's receive path has none (busy polling is then
// a no-op).
func (s *Socket) NAPIID() (int, error) {
	return unix.GetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_INCOMING_NAPI_ID)
}

func (s *Socket) mapRings(o Options) error {
	var off unix.XDPMmapOffsets
	size := uint32(unsafe.Sizeof(off))
	if _, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(s.fd), unix.SOL_XDP, unix.XDP_MMAP_OFFSETS,
		uintptr(unsafe.Pointer(&off)), uintptr(unsafe.Pointer(&size)), 0); errno != 0 {
		return fmt.Errorf("afxdp: getsockopt XDP_MMAP_OFFSETS: %w", errno)
	}
	var err error
	desc := unsafe.Sizeof(unix.XDPDesc{})
	if s.rx, err = mapRing(s.fd, unix.XDP_PGOFF_RX_RING, off.Rx, uint32(o.RxRing), desc); err != nil {
		return err
	}
	if s.tx, err = mapRing(s.fd, unix.XDP_PGOFF_TX_RING, off.Tx, uint32(o.TxRing), desc); err != nil {
		return err
	}
	if s.fill, err = mapRing(s.fd, unix.XDP_UMEM_PGOFF_FILL_RING, off.Fr, uint32(o.FillRing), 8); err != nil {
		return err
	}
	s.cq, err = mapRing(s.fd, unix.XDP_UMEM_PGOFF_COMPLETION_RING, off.Cr, uint32(o.CompletionRing), 8)
	return err
}

// FD is the socket's file descriptor, for the XDP program's XSKMAP.
func (s *Socket) FD() int { return s.fd }

// base returns the UMEM frame that holds address a.
func (s *Socket) base(a uint64) uint64 { return a &^ (s.frameSize - 1) }

// frame returns the storage of the UMEM frame at base.
func (s *Socket) frame(base uint64) []byte { return s.umem[base : base+s.frameSize : base+s.frameSize] }

// refill moves free frames to the fill ring.
func (s *Socket) refill() {
	room := s.fill.free(s.fill.size)
	if room == 0 {
		return
	}
	n := min(room, uint32(len(s.free)))
	if n < room {
		s.st.fillStarved.Add(1)
	}
	for i := uint32(0); i < n; i++ {
		*s.fill.addr(s.fill.cachedProd) = s.free[len(s.free)-1]
		s.free = s.free[:len(s.free)-1]
		s.fill.cachedProd++
	}
	s.fill.submit()
	if n > 0 && s.fill.needWakeup() {
		// Zero-copy drivers stop polling an empty fill ring until told.
		s.wake()
	}
}

// wake is a non-blocking recvfrom: it tells a zero-copy driver that waits
// for it (need-wakeup) to look at the fill ring again, and on a socket
// that busy polls it runs the device's NAPI here, in the caller's thread,
// moving up to the busy-poll budget of frames to the rx ring.
func (s *Socket) wake() {
	s.st.wakeups.Add(1)
	unix.Syscall6(unix.SYS_RECVFROM, uintptr(s.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
}

// reap returns transmitted frames to the free stack.
func (s *Socket) reap() {
	n := s.cq.avail()
	for i := uint32(0); i < n; i++ {
		s.free = append(s.free, s.base(*s.cq.addr(s.cq.cachedCons)))
		s.cq.cachedCons++
	}
	if n > 0 {
		s.cq.release()
	}
}

// push queues the frame bytes at address a for transmission; false when
// the tx ring is full (the caller keeps the frame).
func (s *Socket) push(a uint64, n int) bool {
	if s.tx.free(1) == 0 {
		return false
	}
	*s.tx.desc(s.tx.cachedProd) = unix.XDPDesc{Addr: a, Len: uint32(n)}
	s.tx.cachedProd++
	return true
}

// kick publishes queued transmissions and, when the kernel asks for it,
// wakes it up. In copy mode each sendto transmits up to the socket's
// budget (32 frames unless XDP_MAX_TX_SKB_BUDGET raised it), so kick calls
// again while the ring holds descriptors and the last call took some; it
// gives up after kickIdle calls in a row that took none (the device
// queue full: the next Transmit tries again). Each call that takes some
// takes at least one, so a kick makes at most a ring's worth of calls.
//
// Only a device that is gone (ENXIO: unregistered, the socket unbound) is
// an error. A link that is down (ENETDOWN) is counted and waited out: the
// socket stays bound across down and up, the descriptors stay on the ring
// (new ones are dropped as "ring full" once it fills) and the first kick
// after the link is back sends them.
func (s *Socket) kick() error {
	s.tx.submit()
	for idle := 0; idle < kickIdle; {
		// Copy mode transmits only inside sendto; zero-copy drivers send
		// on their own unless they set need-wakeup, or unless the socket
		// busy polls: then the driver's NAPI, completions included, runs
		// only when asked (xdpsock -B kicks every time too).
		if s.zeroCopy && s.busyPoll == 0 && !s.tx.needWakeup() {
			return nil
		}
		cons := atomic.LoadUint32(s.tx.cons)
		if cons == s.tx.cachedProd {
			return nil
		}
		s.st.kicks.Add(1)
		_, _, errno := unix.Syscall6(unix.SYS_SENDTO, uintptr(s.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
		if atomic.LoadUint32(s.tx.cons) == cons {
			idle++
		} else {
			idle = 0
		}
		switch errno {
		case 0, unix.EAGAIN, unix.EBUSY, unix.ENOBUFS, unix.EINTR:
		case unix.ENXIO:
			s.st.kickErrors.Add(1)
			return fmt.Errorf("afxdp: sendto: %w", errno)
		case unix.ENETDOWN:
			s.st.kickErrors.Add(1)
			return nil // nothing leaves until the link is up: no retry
		default:
			s.st.kickErrors.Add(1)
		}
	}
	return nil
}

// kickIdle is how many sendto calls in a row that transmit nothing a kick
// makes before it leaves the rest of the ring to the next one.
const kickIdle = 4

// KernelStats returns the kernel's counters for the socket (drops for a
// full rx ring, an empty fill ring, invalid descriptors...). Safe from any
// goroutine.
func (s *Socket) KernelStats() (unix.XDPStatistics, error) {
	var st unix.XDPStatistics
	size := uint32(unsafe.Sizeof(st))
	if _, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(s.fd), unix.SOL_XDP, unix.XDP_STATISTICS,
		uintptr(unsafe.Pointer(&st)), uintptr(unsafe.Pointer(&size)), 0); errno != 0 {
		return st, errno
	}
	return st, nil
}

// Close releases the socket and its UMEM: once it returns, the queue can
// be bound again.
func (s *Socket) Close() error {
	for _, r := range []*ring{&s.rx, &s.tx, &s.fill, &s.cq} {
		r.unmap()
	}
	if s.xsk == nil {
		return nil
	}
	// asavie/xdp maps the four rings in NewSocket and its Close forgets
	// them without unmapping: while one is mapped the socket file lives
	// on after its fd is closed, bound to its queue (a new socket there
	// gets EBUSY), in the XSKMAP, its UMEM pinned. Unmap what is left of
	// the socket in this process, by its inode, before closing it.
	var st unix.Stat_t
	unmapErr := unix.Fstat(s.fd, &st)
	if unmapErr == nil {
		unmapErr = unmapFile(st.Ino)
	}
	err := s.xsk.Close()
	s.xsk = nil
	if err != nil && !errors.Is(err, unix.EBADF) {
		return err
	}
	if unmapErr != nil {
		return fmt.Errorf("afxdp: unmapping the rings: %w", unmapErr)
	}
	return nil
}

// unmapFile unmaps every mapping of this process whose file has inode
// ino on the socket file system, as /proc/self/maps lists them
// ("socket:[ino]"). Nothing may use those mappings afterwards.
func unmapFile(ino uint64) error {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return err
	}
	name := "socket:[" + strconv.FormatUint(ino, 10) + "]"
	for _, line := range strings.Split(string(maps), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[5] != name {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		if _, _, errno := unix.Syscall(unix.SYS_MUNMAP, uintptr(start), uintptr(end-start), 0); errno != 0 {
			return fmt.Errorf("munmap %s: %w", f[0], errno)
		}
	}
	return nil
}
