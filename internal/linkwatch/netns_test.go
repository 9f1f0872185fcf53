package linkwatch

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/vipd/vipd/testing/nstest"
)

// TestReadVirtualAddresses: in a namespace, with the kernel's own flags,
// the addresses keepalived adds to a link — one in the link's subnet (the
// kernel makes it secondary), one host address — come after the link's
// own address, though lower: Addrs[0] is the box's own address whichever
// box holds the virtual ones.
func TestReadVirtualAddresses(t *testing.T) {
	nstest.RequireRoot(t)
	ns := nstest.New(t, "lw")
	ns.Must(t, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth1")
	ns.Must(t, "ip", "addr", "add", "198.18.1.20/24", "dev", "eth1")
	ns.Must(t, "ip", "addr", "add", "198.18.1.5/24", "dev", "eth1")
	ns.Must(t, "ip", "addr", "add", "198.18.1.4/32", "dev", "eth1")
	var l Link
	if err := ns.Do(func() (err error) { l, err = Read("eth1"); return err }); err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("198.18.1.20/24"), netip.MustParsePrefix("198.18.1.4/32"), netip.MustParsePrefix("198.18.1.5/24")}
	if !slices.Equal(l.Addrs, want) {
		t.Errorf("eth1's addresses %v, want %v", l.Addrs, want)
	}
}
