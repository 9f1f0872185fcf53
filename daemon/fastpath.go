package daemon

import (
	"fmt"

	"github.com/vipd/vipd/config"
	"github.com/vipd/vipd/conntrack"
	"github.com/vipd/vipd/dataplane"
	"github.com/vipd/vipd/dataplane/xdpprog"
	"github.com/vipd/vipd/linkwatch"
	"golang.org/x/sys/unix"
)

// fastLink is what decides whether the fast path can run on an interface:
// the link, and its XDP features as the kernel reports them (err when it
// does not).
type fastLink struct {
	link     linkwatch.Link
	features xdpprog.Features
	err      error
}

// fastPathRuns decides whether the XDP fast path runs under dp and ct on
// links, the ingress interface and, two-armed, the egress one; when it
// does not, why, for the log.
//
// "auto" runs it only where every frame it sends arrives: each interface
// runs XDP in the driver and, two-armed, takes the other's redirects
// (ndo_xdp_xmit) and makes them (XDP_REDIRECT), so that clients' packets
// cross one way and replies the other. A veth is never taken on trust:
// it delivers what XDP sends only while its peer runs an XDP program of
// its own, which vipd cannot see; its redirect-target feature follows
// the peer (TestInterfaceFeatures), but drivers/net/veth.c also sets it
// for a peer with GRO on alone, where frames sent with XDP_TX were lost
// here (nstest.XDPPass).
func fastPathRuns(dp *config.Dataplane, ct *config.Conntrack, links []fastLink) (bool, string) {
	switch {
	case dp.IO != config.IOAFXDP:
		return false, "io is not afxdp"
	case dp.FastPath == config.FastPathOff:
		return false, "fast_path is off"
	case dp.FastPath == config.FastPathOn:
		return true, ""
	case dp.XDPMode == config.XDPGeneric:
		return false, "xdp_mode is generic: the fast path is for XDP in the driver"
	case !config.FastPathRefreshFits(dp, ct):
		return false, "fast_path_refresh is not shorter than the conntrack timeouts"
	}
	need := xdpprog.FeatureBasic
	if len(links) > 1 {
		need |= xdpprog.FeatureRedirect | xdpprog.FeatureNDOXmit
	}
	for _, l := range links {
		switch {
		case l.link.Kind == "veth":
			return false, fmt.Sprintf("%s is a veth, which carries what XDP sends only while its peer runs an XDP program: set fast_path = \"on\" if the peer does", l.link.Name)
		case l.err != nil:
			return false, fmt.Sprintf("the XDP features of %s are unknown: %v", l.link.Name, l.err)
		case l.features&need != need:
			return false, fmt.Sprintf("the driver of %s lacks XDP features the fast path needs (has %#x, needs %#x: 1 XDP_TX in the driver, 2 redirect, 4 redirect target)",
				l.link.Name, uint64(l.features), uint64(need))
		}
	}
	return true, ""
}

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
	// refresh is the entries' lifetime (fast_path_refresh), in ns, less
	// the program's clock slack (xdpprog.Fast.ClockSlack): so no entry
	// serves longer than fast_path_refresh after it was written.
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
	v       xdpprog.FastEntry4
	v6      xdpprog.FastEntry6
}

func newFastWriter(f *xdpprog.Fast, n int, refresh int64, ifindex [2]uint32) (*fastWriter, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return nil, err
	}
	mono := ts.Nano() - dataplane.Nanotime()
	refresh -= int64(f.ClockSlack()) // fast_path_refresh is at least 100 ms, the slack 20
	brief := int64(conntrack.TickDuration - f.ClockSlack())
	return &fastWriter{fast: f, w: f.NewWriter(n), refresh: refresh, brief: brief, mono: mono, ifindex: ifindex}, nil
}

// Offer implements dataplane.FastPath.
func (f *fastWriter) Offer(x *dataplane.FastFlow) bool {
	if x.V6 {
		return f.offer6(x)
	}
	v := &f.v
	*v = xdpprog.FastEntry4{
		Gen: x.Gen, Expires: f.expires(x),
		Addr: x.Addr, Port: x.Port, IPSum: x.IPSum, L4Sum: x.L4Sum,
		MACs: x.MACs, MaxLen: x.MaxLen, In: f.ifindex[x.RxPort&1], Ref: x.Slot,
		SNAT: x.SNAT, Encap: x.Encap, EncapSrc: x.EncapSrc, OuterSum: x.OuterSum,
		GUE: x.GUE, GUESrcPort: x.GUESrcPort, GUEDstPort: x.GUEDstPort, Ifindex: f.egress(x),
	}
	return f.w.Add(xdpprog.FastKey4{Src: x.Src, Dst: x.Dst, SrcPort: x.SrcPort, DstPort: x.DstPort, Proto: x.Proto}, v)
}

// offer6 is Offer for an IPv6 flow.
func (f *fastWriter) offer6(x *dataplane.FastFlow) bool {
	v := &f.v6
	*v = xdpprog.FastEntry6{
		Gen: x.Gen, Expires: f.expires(x),
		Addr: x.Addr6, Port: x.Port, L4Sum: x.L4Sum,
		MACs: x.MACs, MaxLen: x.MaxLen, In: f.ifindex[x.RxPort&1], Ref: x.Slot, SNAT: x.SNAT,
		Encap: x.Encap, EncapSrc: x.EncapSrc6, FlowLabel: x.FlowLabel, Ifindex: f.egress(x),
	}
	return f.w.Add6(xdpprog.FastKey6{Src: x.Src6, Dst: x.Dst6, SrcPort: x.SrcPort, DstPort: x.DstPort, Proto: x.Proto}, v)
}

// expires is the Expires of x's entry written now, in the program's
// clock: a refresh from now; a conntrack tick (less the clock slack) for
// a Brief one, when that is shorter; 0, long past, for a Retire one.
func (f *fastWriter) expires(x *dataplane.FastFlow) uint64 {
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
func (f *fastWriter) egress(x *dataplane.FastFlow) uint32 {
	if x.TxPort == x.RxPort {
		return 0
	}
	return f.ifindex[x.TxPort&1]
}

// Flush implements dataplane.FastPath.
func (f *fastWriter) Flush() error { return f.w.Flush() }

// IPv6 implements dataplane.FastPath.
func (f *fastWriter) IPv6() bool { return f.fast.IPv6() }

// Forwarded implements dataplane.FastPath.
func (f *fastWriter) Forwarded(slot uint32) (uint64, uint64, bool) { return f.fast.Forwarded(slot) }
