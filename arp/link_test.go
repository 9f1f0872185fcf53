package arp

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jsimonetti/rtnetlink/v2"
	"golang.org/x/sys/unix"
)

func TestLinksFromMessages(t *testing.T) {
	lm := []rtnetlink.LinkMessage{
		{Index: 1, Attributes: &rtnetlink.LinkAttributes{Name: "lo", MTU: 65536, Address: make(net.HardwareAddr, 6)}},
		{Index: 2, Attributes: &rtnetlink.LinkAttributes{Name: "eth0", MTU: 9000, Address: net.HardwareAddr(macA[:])}},
		{Index: 3, Attributes: &rtnetlink.LinkAttributes{Name: "tun0", MTU: 1420}}, // no L2 address
	}
	am := []rtnetlink.AddressMessage{
		{Family: unix.AF_INET6, PrefixLength: 64, Index: 2, Attributes: &rtnetlink.AddressAttributes{Address: net.ParseIP("2001:2::1")}},
		{Family: unix.AF_INET, PrefixLength: 24, Index: 2, Attributes: &rtnetlink.AddressAttributes{
			Address: net.ParseIP("198.18.0.1").To4(), Local: net.ParseIP("198.18.0.1").To4()}},
		// Point-to-point: IFA_ADDRESS is the peer, IFA_LOCAL our own.
		{Family: unix.AF_INET, PrefixLength: 32, Index: 3, Attributes: &rtnetlink.AddressAttributes{
			Address: net.ParseIP("198.18.9.2").To4(), Local: net.ParseIP("198.18.9.1").To4()}},
		{Family: unix.AF_INET, PrefixLength: 8, Index: 1, Attributes: &rtnetlink.AddressAttributes{Local: net.ParseIP("127.0.0.1")}},
		{Family: unix.AF_INET, PrefixLength: 24, Index: 99}, // unknown link, no attributes: skipped
	}
	got := linksFromMessages(lm, am)
	want := []Link{
		{Index: 1, Name: "lo", MTU: 65536, Addrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/8")}},
		{Index: 2, Name: "eth0", MAC: macA, MTU: 9000, Addrs: []netip.Prefix{
			netip.MustParsePrefix("198.18.0.1/24"), netip.MustParsePrefix("2001:2::1/64")}},
		{Index: 3, Name: "tun0", MTU: 1420, Addrs: []netip.Prefix{netip.MustParsePrefix("198.18.9.1/32")}},
	}
	if !slices.EqualFunc(got, want, Link.equal) {
		t.Errorf("linksFromMessages =\n%+v\nwant\n%+v", got, want)
	}
}

func TestRouteFromMessage(t *testing.T) {
	for _, c := range []struct {
		name string
		m    rtnetlink.RouteMessage
		want route
	}{
		{"on-link with source", rtnetlink.RouteMessage{Family: unix.AF_INET, DstLength: 24, Type: unix.RTN_UNICAST,
			Attributes: rtnetlink.RouteAttributes{Dst: net.ParseIP("198.18.0.0").To4(), OutIface: 2, Src: net.ParseIP("198.18.0.1").To4()}},
			route{Dst: netip.MustParsePrefix("198.18.0.0/24"), Type: unix.RTN_UNICAST, Ifindex: 2, Src: netip.MustParseAddr("198.18.0.1")}},
		{"default via gateway with metric and MTU", rtnetlink.RouteMessage{Family: unix.AF_INET, Type: unix.RTN_UNICAST,
			Attributes: rtnetlink.RouteAttributes{Gateway: net.ParseIP("198.18.0.2").To4(), OutIface: 2, Priority: 100,
				Metrics: &rtnetlink.RouteMetrics{MTU: 1400}}},
			route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Type: unix.RTN_UNICAST, Ifindex: 2, Gateway: netip.MustParseAddr("198.18.0.2"), Priority: 100, MTU: 1400}},
		{"IPv6 default", rtnetlink.RouteMessage{Family: unix.AF_INET6, Type: unix.RTN_UNICAST,
			Attributes: rtnetlink.RouteAttributes{Gateway: net.ParseIP("fe80::1"), OutIface: 3}},
			route{Dst: netip.MustParsePrefix("::/0"), Type: unix.RTN_UNICAST, Ifindex: 3, Gateway: netip.MustParseAddr("fe80::1")}},
		{"IPv4 via IPv6 (RFC 5549)", rtnetlink.RouteMessage{Family: unix.AF_INET, DstLength: 16, Type: unix.RTN_UNICAST,
			Attributes: rtnetlink.RouteAttributes{Dst: net.ParseIP("198.19.0.0").To4(), OutIface: 2,
				Via: &rtnetlink.RouteVia{Family: unix.AF_INET6, Addr: net.ParseIP("fe80::1")}}},
			route{Dst: netip.MustParsePrefix("198.19.0.0/16"), Type: unix.RTN_UNICAST, Ifindex: 2, Gateway: netip.MustParseAddr("fe80::1")}},
		{"multipath: first hop", rtnetlink.RouteMessage{Family: unix.AF_INET, Type: unix.RTN_UNICAST,
			Attributes: rtnetlink.RouteAttributes{Multipath: []rtnetlink.NextHop{
				{Hop: rtnetlink.RTNextHop{IfIndex: 4}, Gateway: net.ParseIP("198.18.4.1").To4()},
				{Hop: rtnetlink.RTNextHop{IfIndex: 5}, Gateway: net.ParseIP("198.18.5.1").To4()},
			}}},
			route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Type: unix.RTN_UNICAST, Ifindex: 4, Gateway: netip.MustParseAddr("198.18.4.1")}},
		{"local", rtnetlink.RouteMessage{Family: unix.AF_INET, DstLength: 32, Type: unix.RTN_LOCAL,
			Attributes: rtnetlink.RouteAttributes{Dst: net.ParseIP("198.18.0.1").To4(), OutIface: 1}},
			route{Dst: netip.MustParsePrefix("198.18.0.1/32"), Type: unix.RTN_LOCAL, Ifindex: 1}},
	} {
		if got := routeFromMessage(&c.m); got != c.want {
			t.Errorf("%s: routeFromMessage =\n%+v, want\n%+v", c.name, got, c.want)
		}
	}
}

func TestNeighborFromMessage(t *testing.T) {
	good := rtnetlink.NeighMessage{Family: unix.AF_INET, Index: 2, State: unix.NUD_REACHABLE,
		Attributes: &rtnetlink.NeighAttributes{Address: net.ParseIP("198.18.0.2").To4(), LLAddress: net.HardwareAddr(macB[:])}}
	n, ok := neighborFromMessage(&good)
	if !ok || n != (neighbor{Ifindex: 2, Addr: netip.MustParseAddr("198.18.0.2"), MAC: macB, State: unix.NUD_REACHABLE}) || !n.usable() {
		t.Errorf("neighborFromMessage = %+v, %v", n, ok)
	}
	incomplete := rtnetlink.NeighMessage{Family: unix.AF_INET6, Index: 2, State: unix.NUD_INCOMPLETE,
		Attributes: &rtnetlink.NeighAttributes{Address: net.ParseIP("2001:2::2")}}
	if n, ok := neighborFromMessage(&incomplete); !ok || n.usable() || n.stale() {
		t.Errorf("incomplete entry: %+v, %v; want present, unusable", n, ok)
	}
	bridge := rtnetlink.NeighMessage{Family: unix.AF_BRIDGE, Index: 2, Attributes: &rtnetlink.NeighAttributes{LLAddress: net.HardwareAddr(macB[:])}}
	if _, ok := neighborFromMessage(&bridge); ok {
		t.Error("bridge FDB entry taken for a neighbor")
	}
	for state, usable := range map[uint16]bool{
		unix.NUD_REACHABLE: true, unix.NUD_PERMANENT: true, unix.NUD_NOARP: true, unix.NUD_DELAY: true, unix.NUD_PROBE: true,
		unix.NUD_STALE: false, unix.NUD_FAILED: false, unix.NUD_INCOMPLETE: false, unix.NUD_NONE: false,
	} {
		if got := (neighbor{MAC: macB, State: state}).usable(); got != usable {
			t.Errorf("state %#x: usable = %v, want %v", state, got, usable)
		}
	}
	if (neighbor{State: unix.NUD_PERMANENT}).usable() {
		t.Error("an entry without a MAC is usable")
	}
}

func TestOnLinkPrefixes(t *testing.T) {
	k := testKernel()
	k.routes = append(k.routes,
		route{Dst: netip.MustParsePrefix("198.18.7.0/24"), Type: unix.RTN_UNICAST, Ifindex: 9}, // another link
		route{Dst: netip.MustParsePrefix("198.18.0.0/24"), Type: unix.RTN_UNICAST, Ifindex: eth0, Priority: 5})
	got, err := onLinkPrefixes(k, "eth0")
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{
		netip.MustParsePrefix("198.18.0.0/24"),
		netip.MustParsePrefix("2001:2::/64"),
		netip.MustParsePrefix("fe80::/64"),
	}
	if !slices.Equal(got, want) {
		t.Errorf("onLinkPrefixes = %v, want %v", got, want)
	}
	if _, err := onLinkPrefixes(k, "nope0"); !errors.Is(err, ErrLinkNotFound) {
		t.Errorf("unknown link: %v, want ErrLinkNotFound", err)
	}
}

func TestDefaultRoute(t *testing.T) {
	rs := testKernel().routes
	if r, ok := defaultRoute(rs, false); !ok || r.Gateway != gwV4 {
		t.Errorf("v4 default = %+v, %v; want via %v (lowest metric)", r, ok, gwV4)
	}
	if r, ok := defaultRoute(rs, true); !ok || r.Gateway != gwV6 {
		t.Errorf("v6 default = %+v, %v", r, ok)
	}
	onLinkDefault := []route{{Dst: netip.MustParsePrefix("0.0.0.0/0"), Type: unix.RTN_UNICAST, Ifindex: 2}}
	if _, ok := defaultRoute(onLinkDefault, false); ok {
		t.Error("a default route without a gateway has no next hop")
	}
}

// fakeEvents feeds watchLinks.
type fakeEvents struct {
	refs      chan []linkRef
	closed    chan struct{}
	closeOnce sync.Once
}

func newFakeEvents() *fakeEvents {
	return &fakeEvents{refs: make(chan []linkRef, 100), closed: make(chan struct{})}
}

func (e *fakeEvents) Next() ([]linkRef, error) {
	select {
	case r := <-e.refs:
		if r == nil {
			return nil, errors.New("netlink: receive: bad file descriptor")
		}
		return r, nil
	case <-e.closed:
		return nil, net.ErrClosed
	}
}

func (e *fakeEvents) Close() error {
	e.closeOnce.Do(func() { close(e.closed) })
	return nil
}

func (k *fakeKernel) setLink(l Link) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for i := range k.links {
		if k.links[i].Name == l.Name {
			k.links[i] = l
			return
		}
	}
	k.links = append(k.links, l)
}

func (k *fakeKernel) dropLink(name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.links = slices.DeleteFunc(k.links, func(l Link) bool { return l.Name == name })
}

func TestWatchLinks(t *testing.T) {
	old := linkCoalesce
	linkCoalesce = 20 * time.Millisecond
	t.Cleanup(func() { linkCoalesce = old })

	k := testKernel()
	other := Link{Index: 9, Name: "eth1", MAC: macB, MTU: 1500}
	k.links = append(k.links, other)
	ev := newFakeEvents()
	got := make(chan Link, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- watchLinks(ctx, k, ev, []string{"eth0", "vipd1"}, func(l Link) { got <- l }) }()
	next := func() Link {
		t.Helper()
		select {
		case l := <-got:
			return l
		case <-time.After(wait):
			t.Fatalf("fn not called within %v", wait)
			return Link{}
		}
	}
	none := func() {
		t.Helper()
		select {
		case l := <-got:
			t.Fatalf("unexpected report %+v", l)
		case <-time.After(5 * linkCoalesce):
		}
	}

	// The current state first; a watched link that does not exist is not
	// reported.
	if l := next(); !l.equal(hostLink) {
		t.Fatalf("first report %+v, want %+v", l, hostLink)
	}
	none()

	// A burst of MTU notifications is one report, with the final state.
	for _, mtu := range []int{1400, 1300, 1280} {
		l := hostLink
		l.MTU = mtu
		k.setLink(l)
		ev.refs <- []linkRef{{Index: eth0, Name: "eth0"}}
	}
	if l := next(); l.MTU != 1280 {
		t.Errorf("MTU %d after burst, want 1280", l.MTU)
	}
	none()

	// Changes on other links, and notifications without a change, report
	// nothing.
	other.MTU = 9000
	k.setLink(other)
	ev.refs <- []linkRef{{Index: 9, Name: "eth1"}}
	ev.refs <- []linkRef{{Index: eth0}}
	none()

	// An address change (address messages carry only the index).
	l := hostLink
	l.MTU = 1280
	l.Addrs = append(slices.Clone(l.Addrs), netip.MustParsePrefix("198.18.0.9/24"))
	sortPrefixes(l.Addrs)
	k.setLink(l)
	ev.refs <- []linkRef{{Index: eth0}}
	if r := next(); !r.equal(l) {
		t.Errorf("after address change %+v, want %+v", r, l)
	}

	// A watched link appears, by name, with an index never seen before.
	vipd1 := Link{Index: 12, Name: "vipd1", MAC: macC, MTU: 1500}
	k.setLink(vipd1)
	ev.refs <- []linkRef{{Index: 12, Name: "vipd1"}}
	if r := next(); !r.equal(vipd1) {
		t.Errorf("new link %+v, want %+v", r, vipd1)
	}

	// ... and disappears: reported once as Index 0.
	k.dropLink("vipd1")
	ev.refs <- []linkRef{{Index: 12, Name: "vipd1"}}
	if r := next(); r.Index != 0 || r.Name != "vipd1" {
		t.Errorf("removed link reported as %+v", r)
	}

	// Lost notifications (ENOBUFS) mean re-read.
	l.MTU = 1500
	k.setLink(l)
	ev.refs <- []linkRef{{}}
	if r := next(); r.MTU != 1500 {
		t.Errorf("after overflow MTU %d, want 1500", r.MTU)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("watchLinks: %v", err)
		}
	case <-time.After(wait):
		t.Fatal("watchLinks did not return after cancel")
	}
}

func TestWatchLinksErrors(t *testing.T) {
	k := testKernel()
	ev := newFakeEvents()
	ev.refs <- nil // a receive error
	err := watchLinks(context.Background(), k, ev, []string{"eth0"}, func(Link) {})
	if err == nil {
		t.Error("watchLinks returned nil after a receive error")
	}

	k.failNext = errors.New("netlink dump interrupted")
	if err := watchLinks(context.Background(), k, newFakeEvents(), []string{"eth0"}, func(Link) {}); err == nil {
		t.Error("watchLinks returned nil when the first read fails")
	}
}
