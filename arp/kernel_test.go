package arp

import (
	"errors"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/jsimonetti/rtnetlink/v2"
	"golang.org/x/sys/unix"

	"github.com/vipd/vipd/internal/linkwatch"
)

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
	if _, err := onLinkPrefixes(k, "nope0"); !errors.Is(err, linkwatch.ErrNotFound) {
		t.Errorf("unknown link: %v, want linkwatch.ErrNotFound", err)
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
