package genl

import (
	"errors"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// TestFamily resolves the controller's own family, which every kernel
// with generic netlink has at a fixed id, and one no kernel has.
func TestFamily(t *testing.T) {
	c, err := netlink.Dial(unix.NETLINK_GENERIC, nil)
	if err != nil {
		t.Skipf("no generic netlink here: %v", err)
	}
	defer c.Close()
	id, err := Family(c, "nlctrl")
	if err != nil || id != unix.GENL_ID_CTRL {
		t.Errorf("Family(nlctrl) = %#x, %v; want %#x", id, err, unix.GENL_ID_CTRL)
	}
	if _, err := Family(c, "vipd_nofamily"); !errors.Is(err, ErrNoFamily) {
		t.Errorf("a missing family: %v, want ErrNoFamily", err)
	}
}

// TestRequest pins the generic header in front of the attributes.
func TestRequest(t *testing.T) {
	m := Request(0x1234, 7, netlink.Dump, []byte{8, 0, 1, 0, 9, 0, 0, 0})
	if m.Header.Type != 0x1234 || m.Header.Flags != netlink.Request|netlink.Dump {
		t.Errorf("header %+v", m.Header)
	}
	if want := []byte{7, 1, 0, 0, 8, 0, 1, 0, 9, 0, 0, 0}; string(m.Data) != string(want) {
		t.Errorf("data % x, want % x", m.Data, want)
	}
	ad, err := Attributes(m)
	if err != nil || !ad.Next() || ad.Type() != 1 || ad.Uint32() != 9 {
		t.Errorf("the attributes back: %v", err)
	}
	if _, err := Attributes(netlink.Message{Data: []byte{1, 2}}); err == nil {
		t.Error("a 2-byte answer decoded")
	}
}
