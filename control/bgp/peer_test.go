package bgp

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/testing/testkit"
)

// router is a plain GoBGP server on loopback playing the upstream router:
// it listens on a free port and accepts the speaker at 127.0.0.1.
type router struct {
	srv  *server.BgpServer
	port uint16
}

func freePort(t *testing.T) uint16 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

func startRouter(t *testing.T, asn, speakerASN uint32) *router {
	t.Helper()
	r := &router{srv: server.NewBgpServer(server.LoggerOption(slog.New(slog.DiscardHandler), &slog.LevelVar{})), port: freePort(t)}
	go r.srv.Serve()
	ctx := context.Background()
	if err := r.srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn: asn, RouterId: "198.18.0.254", ListenPort: int32(r.port), ListenAddresses: []string{"127.0.0.1"},
	}}); err != nil {
		t.Fatal(err)
	}
	if err := r.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: &api.Peer{
		Conf:      &api.PeerConf{NeighborAddress: "127.0.0.1", PeerAsn: speakerASN},
		Transport: &api.Transport{PassiveMode: true},
	}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.srv.StopBgp(context.Background(), &api.StopBgpRequest{})
		r.srv.Stop()
	})
	return r
}

// prefixes returns the prefixes in the router's global table.
func (r *router) prefixes(t *testing.T) []netip.Prefix {
	t.Helper()
	var out []netip.Prefix
	err := r.srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: bgppkt.RF_IPv4_UC},
		func(n bgppkt.NLRI, _ []*apiutil.Path) {
			if p, err := netip.ParsePrefix(n.String()); err == nil {
				out = append(out, p)
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return out
}

func speakerFor(t *testing.T, r *router, peerASN uint32) *Speaker {
	t.Helper()
	s := New(Config{
		ASN: 65010, RouterID: netip.MustParseAddr("198.18.1.1"), HoldTime: 9 * time.Second, Keepalive: 3 * time.Second,
		Peers: []config.Peer{{Address: netip.MustParseAddr("127.0.0.1"), ASN: peerASN, Port: r.port, Families: []config.Family{config.FamilyIPv4}}},
	}, slog.New(slog.DiscardHandler))
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(false) })
	return s
}

// TestSpeakerAgainstGoBGP: the speaker's routes reach a router over a
// real session on loopback, Set withdraws what it no longer lists, and
// Stop withdraws everything; the router's own routes are not imported.
func TestSpeakerAgainstGoBGP(t *testing.T) {
	r := startRouter(t, 65000, 65010)
	// A route of the router's own, which the speaker must reject.
	nlri, _ := bgppkt.NewIPAddrPrefix(netip.MustParsePrefix("198.19.0.0/16"))
	nh, _ := bgppkt.NewPathAttributeNextHop(netip.MustParseAddr("198.18.0.254"))
	if _, err := r.srv.AddPath(apiutil.AddPathRequest{Paths: []*apiutil.Path{{Family: bgppkt.RF_IPv4_UC, Nlri: nlri,
		Attrs: []bgppkt.PathAttributeInterface{bgppkt.NewPathAttributeOrigin(0), nh}}}}); err != nil {
		t.Fatal(err)
	}
	s := speakerFor(t, r, 65000)
	vip1, vip2 := netip.MustParsePrefix("198.18.0.100/32"), netip.MustParsePrefix("198.18.0.101/32")
	hop := netip.MustParseAddr("198.18.0.2")
	s.Set([]Route{{Prefix: vip1, NextHop: hop}, {Prefix: vip2, NextHop: hop, MED: 10}})
	testkit.Eventually(t, testkit.Patience, "the session", func() bool { return s.Peers()[0].State == "established" })
	own := netip.MustParsePrefix("198.19.0.0/16")
	testkit.Eventually(t, testkit.Patience, "both routes at the router", func() bool {
		return slices.Equal(r.prefixes(t), []netip.Prefix{vip1, vip2, own})
	})

	s.Set([]Route{{Prefix: vip2, NextHop: hop, MED: 10}})
	testkit.Eventually(t, testkit.Patience, "vip1 withdrawn", func() bool { return slices.Equal(r.prefixes(t), []netip.Prefix{vip2, own}) })
	var imported int
	s.srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: bgppkt.RF_IPv4_UC},
		func(n bgppkt.NLRI, _ []*apiutil.Path) {
			if n.String() == own.String() {
				imported++
			}
		})
	if imported != 0 {
		t.Errorf("the speaker imported the router's route %s", own)
	}
	if st := s.Stats(); st.Announcements != 2 || st.Withdrawals != 1 || st.Announced != 1 {
		t.Errorf("stats %+v, want 2 announcements, 1 withdrawal, 1 announced", st)
	}
	s.Stop(false)
	testkit.Eventually(t, testkit.Patience, "everything withdrawn by Stop", func() bool { return slices.Equal(r.prefixes(t), []netip.Prefix{own}) })
}

// TestSpeakerWrongAS: a router of another AS than configured refuses the
// session; the speaker keeps running, the peer never comes up and its
// last error says why.
func TestSpeakerWrongAS(t *testing.T) {
	r := startRouter(t, 65000, 65010)
	s := speakerFor(t, r, 65099) // the router is AS 65000
	s.Set([]Route{{Prefix: netip.MustParsePrefix("198.18.0.100/32")}})
	testkit.Eventually(t, testkit.Patience, "a failed attempt", func() bool { return s.Peers()[0].LastError != "" })
	p := s.Peers()[0]
	if p.State == "established" || len(r.prefixes(t)) != 0 || p.Notifications == 0 || !strings.Contains(p.LastError, "bad peer AS") {
		t.Errorf("peer %+v, router table %v: the session must not come up", p, r.prefixes(t))
	}
	t.Logf("last error: %s", p.LastError)
}

// TestSpeakerPeersAfterFirstSet: no session before the first Set, so that
// a router never gets an empty table and End-of-RIB from a box that is
// still starting (after a graceful restart it would drop the routes it
// kept for it); once Set, the session comes up with the routes.
func TestSpeakerPeersAfterFirstSet(t *testing.T) {
	r := startRouter(t, 65000, 65010)
	s := speakerFor(t, r, 65000)
	time.Sleep(200 * time.Millisecond) // what Start would have set going
	n := 0
	if err := s.srv.ListPeer(context.Background(), &api.ListPeerRequest{}, func(*api.Peer) { n++ }); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d peers in GoBGP before the first Set", n)
	}
	vip := netip.MustParsePrefix("198.18.0.100/32")
	s.Set([]Route{{Prefix: vip, NextHop: netip.MustParseAddr("198.18.0.2")}})
	testkit.Eventually(t, testkit.Patience, "the route at the router", func() bool { return slices.Contains(r.prefixes(t), vip) })
}
