package daemon

import (
	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/dataplane"
	"github.com/vipd/vipd/dataplane/afpacket"
	"github.com/vipd/vipd/dataplane/afxdp"
)

// Frames is the frame layout vipd's driver opens with: decided here
// alone, for the daemon at start and for `vipd -check-host`, so that the
// check warns of exactly the interfaces the daemon would.
type Frames struct {
	// Size is the driver's frame size in bytes (UMEM frame or ring slot).
	Size int
	// Longest is the longest frame the driver receives in one (the
	// driver's MaxFrame of Size), and Overhead what a frame adds to its
	// interface's MTU there (the driver's FrameOverhead).
	Longest, Overhead int
	// Chosen says how Size was chosen: "configured" or "by the
	// interfaces' MTUs".
	Chosen string
}

// FramesFor returns the frames dp's driver opens with for interfaces of
// the given MTUs: [dataplane] frame_size when set, else
// dataplane.FrameSizeFor's for the largest MTU.
func FramesFor(dp *config.Dataplane, mtus ...int) Frames {
	maxFrame, overhead := afxdp.MaxFrame, afxdp.FrameOverhead
	if dp.IO == config.IOAFPacket {
		maxFrame, overhead = afpacket.MaxFrame, afpacket.FrameOverhead
	}
	f := Frames{Size: dp.FrameSize, Overhead: overhead, Chosen: "configured"}
	if f.Size == 0 {
		f.Size, f.Chosen = dataplane.FrameSizeFor(maxFrame, overhead, mtus...), "by the interfaces' MTUs"
	}
	f.Longest = maxFrame(f.Size)
	return f
}

// Fits reports whether a frame of an interface with IP MTU mtu fits the
// driver's frames; if not, the kernel drops (AF_XDP) or cuts (AF_PACKET,
// then vipd drops) the longer ones. The zero Frames fits everything.
func (f Frames) Fits(mtu int) bool { return f.Longest == 0 || mtu+f.Overhead <= f.Longest }

// MaxMTU is the largest IP MTU whose frames fit.
func (f Frames) MaxMTU() int { return f.Longest - f.Overhead }
