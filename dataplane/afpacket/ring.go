package afpacket

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hdrLen is TPACKET_ALIGN(sizeof(struct tpacket2_hdr)): where a transmit
// frame's data starts (without PACKET_TX_HAS_OFF).
const hdrLen = 32

// blockSize is the size of a ring block, a multiple of the page size that
// holds a whole number of frames of 2048 or 4096 bytes.
const blockSize = 1 << 16

// ring is a TPACKET_V2 ring of fixed-size frames shared with the kernel.
// Each frame starts with a tpacket2_hdr whose status word says who owns
// it: the kernel (TP_STATUS_KERNEL / TP_STATUS_AVAILABLE, 0) or us. The
// status is written with a release store after the frame, and read with an
// acquire load before it.
type ring struct {
	mem       []byte
	frameSize int
	frames    int
	next      int // next frame to look at
}

// setupRing asks for a ring of n frames of size bytes (opt is
// PACKET_RX_RING or PACKET_TX_RING) and maps it.
func setupRing(fd, opt, size, n int) (ring, error) {
	per := blockSize / size
	n = (n + per - 1) / per * per
	req := unix.TpacketReq{Block_size: blockSize, Block_nr: uint32(n / per), Frame_size: uint32(size), Frame_nr: uint32(n)}
	if err := unix.SetsockoptTpacketReq(fd, unix.SOL_PACKET, opt, &req); err != nil {
		return ring{}, fmt.Errorf("setsockopt ring: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, n*size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return ring{}, fmt.Errorf("mmap ring: %w", err)
	}
	return ring{mem: mem, frameSize: size, frames: n}, nil
}

func (r *ring) frame(i int) []byte {
	return r.mem[i*r.frameSize : (i+1)*r.frameSize : (i+1)*r.frameSize]
}

func (r *ring) hdr(i int) *unix.Tpacket2Hdr {
	return (*unix.Tpacket2Hdr)(unsafe.Pointer(&r.mem[i*r.frameSize]))
}

func (r *ring) status(i int) uint32 { return atomic.LoadUint32(&r.hdr(i).Status) }

func (r *ring) setStatus(i int, s uint32) { atomic.StoreUint32(&r.hdr(i).Status, s) }

func (r *ring) unmap() {
	if r.mem != nil {
		unix.Munmap(r.mem)
		r.mem = nil
	}
}
