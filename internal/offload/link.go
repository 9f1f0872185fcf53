package offload

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// link is what Check needs of an interface: its kind and, for a veth,
// where its peer is. rtnetlink/v2, which the rest of vipd uses, does not
// decode IFLA_LINK_NETNSID, so this package reads the link message itself.
type link struct {
	index int
	kind  string // IFLA_INFO_KIND: "veth", "dummy", ...; "" for lo and physical NICs
	// peer is IFLA_LINK, the index of the other end of a veth (of the
	// lower device for others) in its own namespace; 0 when absent.
	peer int
	// nsid is IFLA_LINK_NETNSID: the id, as seen from this namespace, of
	// the namespace peer lives in; -1 when absent (peer is here).
	nsid int32
}

const (
	sizeofIfInfomsg      = 16     // sizeof(struct ifinfomsg)
	rtextFilterSkipStats = 1 << 3 // RTEXT_FILTER_SKIP_STATS: leave out the counters
)

// readLink asks the kernel about the interface called name, over the
// rtnetlink socket c (which determines the namespace). The error wraps
// unix.ENODEV when there is no such interface.
func readLink(c *netlink.Conn, name string) (link, error) {
	ae := netlink.NewAttributeEncoder()
	ae.String(unix.IFLA_IFNAME, name)
	ae.Uint32(unix.IFLA_EXT_MASK, rtextFilterSkipStats)
	attrs, err := ae.Encode()
	if err != nil {
		return link{}, err
	}
	req := netlink.Message{
		Header: netlink.Header{Type: unix.RTM_GETLINK, Flags: netlink.Request},
		Data:   append(make([]byte, sizeofIfInfomsg), attrs...), // family AF_UNSPEC, index 0: by name
	}
	msgs, err := c.Execute(req)
	if err != nil {
		return link{}, fmt.Errorf("offload: read link %s: %w", name, err)
	}
	for _, m := range msgs {
		if m.Header.Type == unix.RTM_NEWLINK {
			return parseLink(m.Data)
		}
	}
	return link{}, fmt.Errorf("offload: read link %s: no answer", name)
}

// parseLink decodes the body of an RTM_NEWLINK message.
func parseLink(b []byte) (link, error) {
	if len(b) < sizeofIfInfomsg {
		return link{}, errors.New("offload: short link message")
	}
	l := link{
		index: int(int32(binary.NativeEndian.Uint32(b[4:8]))),
		nsid:  -1,
	}
	ad, err := netlink.NewAttributeDecoder(b[sizeofIfInfomsg:])
	if err != nil {
		return link{}, fmt.Errorf("offload: link message: %w", err)
	}
	for ad.Next() {
		switch ad.Type() {
		case unix.IFLA_LINK:
			l.peer = int(int32(ad.Uint32()))
		case unix.IFLA_LINK_NETNSID:
			l.nsid = int32(ad.Uint32())
		case unix.IFLA_LINKINFO:
			ad.Nested(func(nad *netlink.AttributeDecoder) error {
				for nad.Next() {
					if nad.Type() == unix.IFLA_INFO_KIND {
						l.kind = nad.String()
					}
				}
				return nil
			})
		}
	}
	if err := ad.Err(); err != nil {
		return link{}, fmt.Errorf("offload: link message: %w", err)
	}
	return l, nil
}
