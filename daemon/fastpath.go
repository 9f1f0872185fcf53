package daemon

import (
	"github.com/vipd/vipd/dataplane"
	"github.com/vipd/vipd/dataplane/xdpprog"
	"golang.org/x/sys/unix"
)

// fastPlatform is a Platform with an XDP fast path (LinuxPlatform with
// [dataplane] fast_path on).
type fastPlatform interface {
	// FastPath returns queue's worker's way into the fast path, or nil
	// when there is none.
	FastPath(queue int) dataplane.FastPath
	// SetFastGeneration makes the fast path use only entries computed
	// under the snapshot of generation gen: called right after each
	// snapshot is published.
	SetFastGeneration(gen uint32) error
}

// fastWriter is a worker's dataplane.FastPath into an xdpprog fast path:
// it turns FastFlows into the program's entries, with an expiry refresh
// from now, and writes them in one system call per Flush.
type fastWriter struct {
	fast *xdpprog.Fast
	w    *xdpprog.Writer
	// refresh is the entries' lifetime (fast_path_refresh), in ns.
	refresh int64
	// mono is CLOCK_MONOTONIC (bpf_ktime_get_ns's clock) minus
	// dataplane.Nanotime, both read at the start: Go's monotonic clock
	// is CLOCK_MONOTONIC on Linux, so one offset converts for good.
	mono int64
	// ifindex is each port's interface, for an entry whose packets leave
	// by another one than they came in on.
	ifindex [2]uint32
	v       xdpprog.FastEntry4
}

func newFastWriter(f *xdpprog.Fast, n int, refresh int64, ifindex [2]uint32) (*fastWriter, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return nil, err
	}
	mono := ts.Nano() - dataplane.Nanotime()
	return &fastWriter{fast: f, w: f.NewWriter(n), refresh: refresh, mono: mono, ifindex: ifindex}, nil
}

// Offer implements dataplane.FastPath.
func (f *fastWriter) Offer(x *dataplane.FastFlow) bool {
	v := &f.v
	*v = xdpprog.FastEntry4{
		Gen: x.Gen, Expires: uint64(f.mono + dataplane.Nanotime() + f.refresh),
		Addr: x.Addr, Port: x.Port, IPSum: x.IPSum, L4Sum: x.L4Sum,
		MACs: x.MACs, MaxLen: x.MaxLen, In: f.ifindex[x.RxPort&1], Ref: x.Slot,
		SNAT: x.SNAT, Encap: x.Encap, EncapSrc: x.EncapSrc, OuterSum: x.OuterSum,
	}
	if x.TxPort != x.RxPort {
		v.Ifindex = f.ifindex[x.TxPort&1]
	}
	return f.w.Add(xdpprog.FastKey4{Src: x.Src, Dst: x.Dst, SrcPort: x.SrcPort, DstPort: x.DstPort, Proto: x.Proto}, v)
}

// Flush implements dataplane.FastPath.
func (f *fastWriter) Flush() error { return f.w.Flush() }

// Forwarded implements dataplane.FastPath.
func (f *fastWriter) Forwarded(slot uint32) (uint64, uint64, bool) { return f.fast.Forwarded(slot) }
