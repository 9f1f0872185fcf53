package genl

import (
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// headerLen is the size of struct genlmsghdr: command, version, reserved.
const headerLen = 4

// ErrNoFamily is returned (wrapped) by Family for a family the kernel does
// not have.
var ErrNoFamily = errors.New("genl: no such family")

// Family returns the id of the generic netlink family called name.
func Family(c *netlink.Conn, name string) (uint16, error) {
	ae := netlink.NewAttributeEncoder()
	ae.String(unix.CTRL_ATTR_FAMILY_NAME, name)
	attrs, err := ae.Encode()
	if err != nil {
		return 0, err
	}
	msgs, err := c.Execute(Request(unix.GENL_ID_CTRL, unix.CTRL_CMD_GETFAMILY, 0, attrs))
	if errors.Is(err, unix.ENOENT) {
		return 0, fmt.Errorf("%w: %q", ErrNoFamily, name)
	}
	if err != nil {
		return 0, fmt.Errorf("genl: family %q: %w", name, err)
	}
	for _, m := range msgs {
		ad, err := Attributes(m)
		if err != nil {
			return 0, err
		}
		for ad.Next() {
			if ad.Type() == unix.CTRL_ATTR_FAMILY_ID {
				return ad.Uint16(), nil
			}
		}
	}
	return 0, fmt.Errorf("genl: family %q: no id in the answer", name)
}

// Request is a request of command cmd (version 1) to family with the
// encoded attributes; flags are added to netlink.Request (netlink.Dump).
func Request(family uint16, cmd uint8, flags netlink.HeaderFlags, attrs []byte) netlink.Message {
	return netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(family), Flags: netlink.Request | flags},
		Data:   append([]byte{cmd, 1, 0, 0}, attrs...),
	}
}

// Attributes decodes the attributes of an answer, after its generic
// header.
func Attributes(m netlink.Message) (*netlink.AttributeDecoder, error) {
	if len(m.Data) < headerLen {
		return nil, fmt.Errorf("genl: an answer of %d bytes", len(m.Data))
	}
	return netlink.NewAttributeDecoder(m.Data[headerLen:])
}
