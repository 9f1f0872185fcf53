package bgp

import (
	"bytes"
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/config"
)

// TestRoutePath checks the GoBGP path each kind of route becomes: the
// family, the next hop (in NEXT_HOP for IPv4, in MP_REACH_NLRI for IPv6)
// and the attributes.
func TestRoutePath(t *testing.T) {
	tests := []struct {
		name    string
		r       Route
		family  bgppkt.Family
		nextHop string
		attrs   []bgppkt.BGPAttrType
	}{
		{"IPv4 with next hop", Route{Prefix: netip.MustParsePrefix("198.18.0.100/32"), NextHop: netip.MustParseAddr("198.18.0.2"), MED: 5},
			bgppkt.RF_IPv4_UC, "198.18.0.2", []bgppkt.BGPAttrType{bgppkt.BGP_ATTR_TYPE_ORIGIN, bgppkt.BGP_ATTR_TYPE_NEXT_HOP, bgppkt.BGP_ATTR_TYPE_MULTI_EXIT_DISC}},
		{"IPv4 without: the session's address", Route{Prefix: netip.MustParsePrefix("198.18.0.100/32")},
			bgppkt.RF_IPv4_UC, "0.0.0.0", []bgppkt.BGPAttrType{bgppkt.BGP_ATTR_TYPE_ORIGIN, bgppkt.BGP_ATTR_TYPE_NEXT_HOP, bgppkt.BGP_ATTR_TYPE_MULTI_EXIT_DISC}},
		{"IPv6 through MP-BGP, with communities", Route{Prefix: netip.MustParsePrefix("2001:2::100/128"), NextHop: netip.MustParseAddr("2001:2::2"), Communities: []uint32{65010<<16 | 7}},
			bgppkt.RF_IPv6_UC, "2001:2::2", []bgppkt.BGPAttrType{bgppkt.BGP_ATTR_TYPE_ORIGIN, bgppkt.BGP_ATTR_TYPE_MP_REACH_NLRI, bgppkt.BGP_ATTR_TYPE_MULTI_EXIT_DISC, bgppkt.BGP_ATTR_TYPE_COMMUNITIES}},
		{"IPv6 with an IPv4 next hop: unspecified", Route{Prefix: netip.MustParsePrefix("2001:2::100/128"), NextHop: netip.MustParseAddr("198.18.0.2")},
			bgppkt.RF_IPv6_UC, "::", []bgppkt.BGPAttrType{bgppkt.BGP_ATTR_TYPE_ORIGIN, bgppkt.BGP_ATTR_TYPE_MP_REACH_NLRI, bgppkt.BGP_ATTR_TYPE_MULTI_EXIT_DISC}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.r.path(false)
			if p.Family != tt.family || p.Withdrawal {
				t.Errorf("family %v, withdrawal %v; want %v, false", p.Family, p.Withdrawal, tt.family)
			}
			if got := p.Nlri.String(); got != tt.r.Prefix.String() {
				t.Errorf("NLRI %s, want %s", got, tt.r.Prefix)
			}
			var types []bgppkt.BGPAttrType
			nh := ""
			for _, a := range p.Attrs {
				types = append(types, a.GetType())
				switch a := a.(type) {
				case *bgppkt.PathAttributeNextHop:
					nh = a.Value.String()
				case *bgppkt.PathAttributeMpReachNLRI:
					nh = a.Nexthop.String()
				case *bgppkt.PathAttributeMultiExitDisc:
					if a.Value != tt.r.MED {
						t.Errorf("MED %d, want %d", a.Value, tt.r.MED)
					}
				}
			}
			if nh != tt.nextHop {
				t.Errorf("next hop %q, want %q", nh, tt.nextHop)
			}
			if len(types) != len(tt.attrs) {
				t.Fatalf("attributes %v, want %v", types, tt.attrs)
			}
			for i := range types {
				if types[i] != tt.attrs[i] {
					t.Errorf("attributes %v, want %v", types, tt.attrs)
					break
				}
			}
			if w := tt.r.path(true); !w.Withdrawal || w.Family != tt.family {
				t.Errorf("withdrawal path: %+v", w)
			}
		})
	}
}

func TestConfigFrom(t *testing.T) {
	b := &config.BGP{ASN: 65010, HoldTime: config.Duration(9 * time.Second), Keepalive: config.Duration(3 * time.Second),
		GracefulRestart: config.Duration(120 * time.Second), ListenPort: 1790,
		Peers: []config.Peer{{Address: netip.MustParseAddr("198.18.0.254"), ASN: 65000}}}
	egress := netip.MustParseAddr("198.18.1.1")
	c := ConfigFrom(b, egress)
	if c.RouterID != egress || c.ListenPort != 0 || c.HoldTime != 9*time.Second || c.RestartTime != 120*time.Second {
		t.Errorf("active peers: %+v", c)
	}
	b.RouterID = netip.MustParseAddr("10.0.0.1")
	b.Peers[0].Passive = true
	if c := ConfigFrom(b, egress); c.RouterID != b.RouterID || c.ListenPort != 1790 {
		t.Errorf("passive peer, router ID set: %+v", c)
	}
}

// TestGoBGPLog: GoBGP's debug and info records do not reach vipd's log,
// its warnings do, and its NOTIFICATION records become peer events.
func TestGoBGPLog(t *testing.T) {
	var buf bytes.Buffer
	base := slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})
	type note struct {
		peer          string
		sent          bool
		code, subcode int
	}
	var got []note
	h := gobgpLog{next: base, notify: func(p string, sent bool, c, sc int) { got = append(got, note{p, sent, c, sc}) }}
	log := slog.New(h).With("component", "gobgp")
	log.Debug("chatty")
	log.Info("retrying")
	log.Warn("notable")
	peer := log.With("Topic", "Peer", "Key", "198.18.0.254")
	peer.Info("sent notification", "State", "BGP_FSM_ACTIVE", "Code", 2, "Subcode", 2, "Data", "")
	peer.Info("received notification", "Code", 6, "Subcode", 2)
	if out := buf.String(); strings.Contains(out, "chatty") || strings.Contains(out, "retrying") || !strings.Contains(out, "notable") || strings.Contains(out, "notification") {
		t.Errorf("log: %s", out)
	}
	want := []note{{"198.18.0.254", true, 2, 2}, {"198.18.0.254", false, 6, 2}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("notifications %+v, want %+v", got, want)
	}
	if s := notificationText(2, 2); s != "OPEN message error: bad peer AS (2/2)" {
		t.Errorf("notificationText(2, 2) = %q", s)
	}
}

// TestStartNeedsIPv4RouterID: without a router ID the speaker refuses to
// start, with a message that says what to set.
func TestStartNeedsIPv4RouterID(t *testing.T) {
	s := New(Config{ASN: 65010}, slog.New(slog.DiscardHandler))
	err := s.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "router_id") {
		t.Fatalf("Start without a router ID: %v", err)
	}
	s.Stop(false) // a speaker that never started stops quietly
}

// TestStateNames: the speaker names the states as the metric labels do.
func TestStateNames(t *testing.T) {
	if !slices.Equal(stateNames, api.BGPStates) {
		t.Errorf("bgp %v, admin %v", stateNames, api.BGPStates)
	}
}

// TestCheckFamilies: a session whose router enabled fewer families than
// the peer's configuration lists is logged, naming what is missing; one
// that enabled them all, or more, is not. A router with no multiprotocol
// capability enables IPv4 unicast alone.
func TestCheckFamilies(t *testing.T) {
	v4 := bgppkt.NewCapMultiProtocol(bgppkt.RF_IPv4_UC)
	v6 := bgppkt.NewCapMultiProtocol(bgppkt.RF_IPv6_UC)
	both := []config.Family{config.FamilyIPv4, config.FamilyIPv6}
	for _, tc := range []struct {
		name    string
		conf    []config.Family
		caps    []bgppkt.ParameterCapabilityInterface
		missing string // in the warning; "" for none
	}{
		{"both enabled", both, []bgppkt.ParameterCapabilityInterface{v4, v6}, ""},
		{"IPv4-only router", both, []bgppkt.ParameterCapabilityInterface{v4}, "not_enabled=[ipv6]"},
		{"IPv6-only router", both, []bgppkt.ParameterCapabilityInterface{v6}, "not_enabled=[ipv4]"},
		{"no multiprotocol: IPv4", both, nil, "not_enabled=[ipv6]"},
		{"no multiprotocol, IPv4 configured", []config.Family{config.FamilyIPv4}, nil, ""},
		{"router enables more", []config.Family{config.FamilyIPv4}, []bgppkt.ParameterCapabilityInterface{v4, v6}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			peer := netip.MustParseAddr("198.18.0.254")
			s := New(Config{ASN: 65010, Peers: []config.Peer{{Address: peer, ASN: 65000, Families: tc.conf}}}, slog.New(slog.NewTextHandler(&buf, nil)))
			s.checkFamilies(peer, tc.caps)
			out := buf.String()
			switch {
			case tc.missing == "" && out != "":
				t.Errorf("logged %q, want nothing", out)
			case tc.missing != "" && !strings.Contains(out, tc.missing):
				t.Errorf("logged %q, want a warning with %s", out, tc.missing)
			}
		})
	}
}
