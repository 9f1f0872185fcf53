package daemon

import (
	"fmt"

	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/dataplane"
	"github.com/vipd/vipd/dataplane/xdpprog"
	"github.com/vipd/vipd/internal/linkwatch"
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
