package offload

import (
	"encoding/binary"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// linkMessage builds the body of an RTM_NEWLINK message for index with
// attributes set by fn.
func linkMessage(t *testing.T, index int32, fn func(ae *netlink.AttributeEncoder)) []byte {
	t.Helper()
	b := make([]byte, sizeofIfInfomsg)
	binary.NativeEndian.PutUint32(b[4:8], uint32(index))
	ae := netlink.NewAttributeEncoder()
	fn(ae)
	attrs, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return append(b, attrs...)
}

func TestParseLink(t *testing.T) {
	info := func(kind string) func(*netlink.AttributeEncoder) error {
		return func(nae *netlink.AttributeEncoder) error {
			nae.String(unix.IFLA_INFO_KIND, kind)
			return nil
		}
	}
	cases := []struct {
		name string
		msg  []byte
		want link
	}{
		{"loopback", linkMessage(t, 1, func(ae *netlink.AttributeEncoder) {
			ae.String(unix.IFLA_IFNAME, "lo")
		}), link{index: 1, nsid: -1}},
		{"veth, peer here", linkMessage(t, 4, func(ae *netlink.AttributeEncoder) {
			ae.String(unix.IFLA_IFNAME, "v0")
			ae.Uint32(unix.IFLA_LINK, 5)
			ae.Nested(unix.IFLA_LINKINFO, info("veth"))
		}), link{index: 4, kind: "veth", peer: 5, nsid: -1}},
		{"veth, peer elsewhere", linkMessage(t, 2, func(ae *netlink.AttributeEncoder) {
			ae.Uint32(unix.IFLA_LINK, 2)
			ae.Int32(unix.IFLA_LINK_NETNSID, 3)
			ae.Nested(unix.IFLA_LINKINFO, info("veth"))
		}), link{index: 2, kind: "veth", peer: 2, nsid: 3}},
		{"bridge", linkMessage(t, 9, func(ae *netlink.AttributeEncoder) {
			ae.Nested(unix.IFLA_LINKINFO, info("bridge"))
		}), link{index: 9, kind: "bridge", nsid: -1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseLink(tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("parseLink = %+v, want %+v", got, tc.want)
			}
		})
	}
	if _, err := parseLink(make([]byte, 8)); err == nil {
		t.Error("parseLink accepted a short message")
	}
}
