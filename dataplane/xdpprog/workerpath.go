package xdpprog

import (
	"time"

	"github.com/vipd/vipd/conntrack"
	"github.com/vipd/vipd/dataplane"
	"golang.org/x/sys/unix"
)

// FlowWriter is a worker's dataplane.FastPath into the fast path: it
// turns the FastFlows a worker offers into the program's entries, with an
// expiry refresh from now, and writes them in one system call per Flush.
// One per worker; it is not safe for concurrent use.
type FlowWriter struct {
	fast *Fast
	w    *Writer
	// refresh is the entries' lifetime (fast_path_refresh), in ns, less
	// the program's clock slack (Fast.ClockSlack): so no entry serves
	// longer than fast_path_refresh after it was written.
	refresh int64
	// mono is CLOCK_MONOTONIC (bpf_ktime_get_ns's clock) minus
	// dataplane.Nanotime, both read at the start: Go's monotonic clock
	// is CLOCK_MONOTONIC on Linux, so one offset converts for good.
	mono int64
	// brief is a Brief entry's lifetime, in ns: a conntrack tick less
	// the program's clock slack.
	brief int64
	// ifindex is each port's interface, for an entry whose packets leave
	// by another one than they came in on.
	ifindex [2]uint32
	v       FastEntry4
	v6      FastEntry6
}

// NewFlowWriter returns a writer that queues up to n entries between
// flushes, each serving refresh (fast_path_refresh, at least 100 ms)
// after it was written; ifindex is each port's interface.
func (f *Fast) NewFlowWriter(n int, refresh time.Duration, ifindex [2]uint32) (*FlowWriter, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return nil, err
	}
	mono := ts.Nano() - dataplane.Nanotime()
	life := int64(refresh - f.ClockSlack()) // refresh is at least 100 ms, the slack 20
	brief := int64(conntrack.TickDuration - f.ClockSlack())
	return &FlowWriter{fast: f, w: f.NewWriter(n), refresh: life, brief: brief, mono: mono, ifindex: ifindex}, nil
}

// Offer implements dataplane.FastPath.
func (f *FlowWriter) Offer(x *dataplane.FastFlow) bool {
	if x.V6 {
		return f.offer6(x)
	}
	v := &f.v
	*v = FastEntry4{
		Gen: x.Gen, Expires: f.expires(x),
		Addr: x.Addr, Port: x.Port, IPSum: x.IPSum, L4Sum: x.L4Sum,
		MACs: x.MACs, MaxLen: x.MaxLen, In: f.ifindex[x.RxPort&1], Ref: x.Slot,
		SNAT: x.SNAT, Encap: x.Encap, EncapSrc: x.EncapSrc, OuterSum: x.OuterSum,
		GUE: x.GUE, GUESrcPort: x.GUESrcPort, GUEDstPort: x.GUEDstPort, Ifindex: f.egress(x),
	}
	return f.w.Add(FastKey4{Src: x.Src, Dst: x.Dst, SrcPort: x.SrcPort, DstPort: x.DstPort, Proto: x.Proto}, v)
}

// offer6 is Offer for an IPv6 flow.
func (f *FlowWriter) offer6(x *dataplane.FastFlow) bool {
	v := &f.v6
	*v = FastEntry6{
		Gen: x.Gen, Expires: f.expires(x),
		Addr: x.Addr6, Port: x.Port, L4Sum: x.L4Sum,
		MACs: x.MACs, MaxLen: x.MaxLen, In: f.ifindex[x.RxPort&1], Ref: x.Slot, SNAT: x.SNAT,
		Encap: x.Encap, EncapSrc: x.EncapSrc6, FlowLabel: x.FlowLabel, Ifindex: f.egress(x),
	}
	return f.w.Add6(FastKey6{Src: x.Src6, Dst: x.Dst6, SrcPort: x.SrcPort, DstPort: x.DstPort, Proto: x.Proto}, v)
}

// expires is the Expires of x's entry written now, in the program's
// clock: a refresh from now; a conntrack tick (less the clock slack) for
// a Brief one, when that is shorter; 0, long past, for a Retire one.
func (f *FlowWriter) expires(x *dataplane.FastFlow) uint64 {
	life := f.refresh
	switch {
	case x.Retire:
		return 0
	case x.Brief:
		life = min(life, f.brief)
	}
	return uint64(f.mono + dataplane.Nanotime() + life)
}

// egress is the interface an entry sends x's packets by: 0 (XDP_TX) when
// they leave by the one they came in on.
func (f *FlowWriter) egress(x *dataplane.FastFlow) uint32 {
	if x.TxPort == x.RxPort {
		return 0
	}
	return f.ifindex[x.TxPort&1]
}

// Flush implements dataplane.FastPath.
func (f *FlowWriter) Flush() error { return f.w.Flush() }

// IPv6 implements dataplane.FastPath.
func (f *FlowWriter) IPv6() bool { return f.fast.IPv6() }

// Forwarded implements dataplane.FastPath.
func (f *FlowWriter) Forwarded(slot uint32) (uint64, uint64, bool) { return f.fast.Forwarded(slot) }

var _ dataplane.FastPath = (*FlowWriter)(nil)
