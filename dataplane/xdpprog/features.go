package xdpprog

import (
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"
	"github.com/vipd/vipd/internal/genl"
	"golang.org/x/sys/unix"
)

// Features are the XDP actions an interface's driver supports, as the
// kernel reports them (the netdev generic netlink family's xdp-features,
// include/uapi/linux/netdev.h; Linux 6.3+). They may change while the
// interface lives: a veth's FeatureNDOXmit follows its peer.
type Features uint64

// Bits of Features (enum netdev_xdp_act).
const (
	// FeatureBasic: XDP_ABORTED, XDP_DROP, XDP_PASS and XDP_TX in the
	// driver (native mode).
	FeatureBasic Features = 1
	// FeatureRedirect: the driver carries out XDP_REDIRECT.
	FeatureRedirect Features = 2
	// FeatureNDOXmit: the interface takes frames other interfaces'
	// programs redirect to it (ndo_xdp_xmit). A veth has it only while its
	// peer runs an XDP program (TestInterfaceFeatures) or, by
	// drivers/net/veth.c, has GRO on: while the peer's NAPI runs, which
	// XDP_TX on the veth needs too.
	FeatureNDOXmit Features = 4
	// FeatureZeroCopy: AF_XDP zero-copy mode.
	FeatureZeroCopy Features = 8
)

// ErrNoFeatures is returned (wrapped) by InterfaceFeatures on a kernel that
// does not report XDP features (before Linux 6.3).
var ErrNoFeatures = errors.New("the kernel does not report XDP features (netdev netlink family, Linux 6.3+)")

// Constants of the netdev generic netlink family (include/uapi/linux/
// netdev.h), which golang.org/x/sys/unix does not have.
const (
	netdevCmdDevGet      = 1
	netdevAttrIfindex    = 1
	netdevAttrXDPFeature = 3
)

// InterfaceFeatures returns the XDP features of the interface with index
// ifindex, in the network namespace of the calling thread.
func InterfaceFeatures(ifindex int) (Features, error) {
	c, err := netlink.Dial(unix.NETLINK_GENERIC, nil)
	if err != nil {
		return 0, fmt.Errorf("xdpprog: generic netlink: %w", err)
	}
	defer c.Close()
	family, err := genl.Family(c, "netdev")
	if errors.Is(err, genl.ErrNoFamily) {
		return 0, fmt.Errorf("xdpprog: %w", ErrNoFeatures)
	}
	if err != nil {
		return 0, fmt.Errorf("xdpprog: %w", err)
	}
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(netdevAttrIfindex, uint32(ifindex))
	attrs, err := ae.Encode()
	if err != nil {
		return 0, err
	}
	msgs, err := c.Execute(genl.Request(family, netdevCmdDevGet, 0, attrs))
	if err != nil {
		return 0, fmt.Errorf("xdpprog: XDP features of interface %d: %w", ifindex, err)
	}
	for _, m := range msgs {
		ad, err := genl.Attributes(m)
		if err != nil {
			return 0, err
		}
		for ad.Next() {
			if ad.Type() == netdevAttrXDPFeature {
				return Features(ad.Uint64()), nil
			}
		}
		if err := ad.Err(); err != nil {
			return 0, fmt.Errorf("xdpprog: XDP features of interface %d: %w", ifindex, err)
		}
	}
	return 0, fmt.Errorf("xdpprog: interface %d: %w", ifindex, ErrNoFeatures)
}
