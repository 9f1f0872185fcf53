package dataplane

import (
	"time"
)

// Queue is one NIC queue as a driver presents it to a worker. A queue is
// used by exactly one goroutine. The batch contract:
//
//   - Receive fills descs[:n] with received frames (Buf with at least
//     Headroom free before Off, RxPort set) and returns n. It waits at most
//     timeout for the first frame; n == 0 means none arrived.
//   - The worker then runs the pipeline on every desc, using the queue as
//     the batch's Emitter for extra frames.
//   - Transmit takes back the batch — exactly descs[:n] of the preceding
//     Receive, in the same order, before the next Receive (drivers keep
//     per-position bookkeeping): frames with verdict TX or Reply are sent
//     on their Port, frames for the kernel are handed to it where the
//     driver can (else counted by the driver and dropped), the rest are
//     recycled; then the emitted frames are sent. After Transmit the descs'
//     buffers belong to the driver again.
//
// After Close, every call returns an error wrapping net.ErrClosed.
type Queue interface {
	Emitter
	Receive(descs []Desc, timeout time.Duration) (int, error)
	Transmit(descs []Desc) error
	Close() error
}

// FrameSizeFor returns the frame size a driver opens with for interfaces
// of these MTUs, given its MaxFrame and FrameOverhead (what a frame adds
// to its packet there): 2048 when a frame of each fits (MTU 1774 and
// below with AF_XDP, 1836 with AF_PACKET), else 4096, the largest (an
// AF_XDP frame may not span pages). Smaller frames spread a ring's frames
// over half as many pages: docs/performance-log.md, "Frame size, measured".
func FrameSizeFor(maxFrame func(frameSize int) int, overhead int, mtus ...int) int {
	for _, m := range mtus {
		if m+overhead > maxFrame(2048) {
			return 4096
		}
	}
	return 2048
}
