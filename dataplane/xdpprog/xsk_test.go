package xdpprog

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// xsk is the smallest AF_XDP socket that can receive: a UMEM, a fill ring
// handed every frame once, and an RX ring. Tests use it to give the XSKMAP
// a real socket and to see what the program redirected. Close releases
// everything, including the ring mappings that keep a socket alive.
type xsk struct {
	fd     int
	umem   []byte
	fill   []byte // mapping of the fill ring
	rx     []byte // mapping of the RX ring
	off    unix.XDPMmapOffsets
	rxCons uint32 // our copy of the RX consumer index
}

const (
	xskFrames    = 16 // also every ring's size; a power of two
	xskFrameSize = 2048
)

// newXSK binds an AF_XDP socket to queue of interface ifindex. It must run
// in the interface's network namespace.
func newXSK(ifindex, queue int) (_ *xsk, err error) {
	x := &xsk{fd: -1}
	defer func() {
		if err != nil {
			x.Close()
		}
	}()
	if x.fd, err = unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0); err != nil {
		return nil, fmt.Errorf("socket(AF_XDP): %w", err)
	}
	if x.umem, err = unix.Mmap(-1, 0, xskFrames*xskFrameSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE); err != nil {
		return nil, fmt.Errorf("mmap UMEM: %w", err)
	}
	reg := unix.XDPUmemReg{Addr: uint64(uintptr(unsafe.Pointer(&x.umem[0]))), Len: uint64(len(x.umem)), Size: xskFrameSize}
	if err := sockopt(unix.SYS_SETSOCKOPT, x.fd, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
		return nil, fmt.Errorf("XDP_UMEM_REG: %w", err)
	}
	for _, ring := range []int{unix.XDP_UMEM_FILL_RING, unix.XDP_UMEM_COMPLETION_RING, unix.XDP_RX_RING} {
		if err := unix.SetsockoptInt(x.fd, unix.SOL_XDP, ring, xskFrames); err != nil {
			return nil, fmt.Errorf("ring size option %d: %w", ring, err)
		}
	}
	size := uint32(unsafe.Sizeof(x.off))
	if err := sockopt(unix.SYS_GETSOCKOPT, x.fd, unix.XDP_MMAP_OFFSETS, unsafe.Pointer(&x.off), uintptr(unsafe.Pointer(&size))); err != nil {
		return nil, fmt.Errorf("XDP_MMAP_OFFSETS: %w", err)
	}
	if x.fill, err = unix.Mmap(x.fd, unix.XDP_UMEM_PGOFF_FILL_RING, int(x.off.Fr.Desc)+xskFrames*8, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return nil, fmt.Errorf("mmap fill ring: %w", err)
	}
	if x.rx, err = unix.Mmap(x.fd, unix.XDP_PGOFF_RX_RING, int(x.off.Rx.Desc)+xskFrames*int(unsafe.Sizeof(unix.XDPDesc{})), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return nil, fmt.Errorf("mmap RX ring: %w", err)
	}
	// Hand every frame to the kernel once; a test receives fewer packets
	// than there are frames, so frames are never recycled.
	for i := range xskFrames {
		*(*uint64)(unsafe.Pointer(&x.fill[x.off.Fr.Desc+uint64(i)*8])) = uint64(i * xskFrameSize)
	}
	atomic.StoreUint32(x.ringWord(x.fill, x.off.Fr.Producer), xskFrames)
	if err := unix.Bind(x.fd, &unix.SockaddrXDP{Ifindex: uint32(ifindex), QueueID: uint32(queue)}); err != nil {
		return nil, fmt.Errorf("bind AF_XDP socket to interface %d queue %d: %w", ifindex, queue, err)
	}
	return x, nil
}

func sockopt(call uintptr, fd, opt int, val unsafe.Pointer, size uintptr) error {
	_, _, errno := unix.Syscall6(call, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(val), size, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

func (x *xsk) ringWord(ring []byte, off uint64) *uint32 {
	return (*uint32)(unsafe.Pointer(&ring[off]))
}

// recv waits up to timeout for the next received frame and returns a copy.
func (x *xsk) recv(timeout time.Duration) ([]byte, error) {
	deadline := time.Now().Add(timeout)
	for {
		prod := atomic.LoadUint32(x.ringWord(x.rx, x.off.Rx.Producer))
		if prod != x.rxCons {
			i := uint64(x.rxCons % xskFrames)
			d := (*unix.XDPDesc)(unsafe.Pointer(&x.rx[x.off.Rx.Desc+i*uint64(unsafe.Sizeof(unix.XDPDesc{}))]))
			frame := append([]byte(nil), x.umem[d.Addr:d.Addr+uint64(d.Len)]...)
			x.rxCons++
			atomic.StoreUint32(x.ringWord(x.rx, x.off.Rx.Consumer), x.rxCons)
			return frame, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, errors.New("no frame received")
		}
		fds := []unix.PollFd{{Fd: int32(x.fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, int(min(left, 100*time.Millisecond)/time.Millisecond)+1); err != nil && !errors.Is(err, unix.EINTR) {
			return nil, err
		}
	}
}

func (x *xsk) Close() {
	for _, m := range [][]byte{x.rx, x.fill, x.umem} {
		if m != nil {
			unix.Munmap(m)
		}
	}
	x.rx, x.fill, x.umem = nil, nil, nil
	if x.fd >= 0 {
		unix.Close(x.fd)
		x.fd = -1
	}
}
