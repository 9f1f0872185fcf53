package daemon

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/health"
	"github.com/vipd/vipd/testing/testkit"
)

// closedLoopbackPort returns a loopback TCP port nothing listens on: the
// speaker's connection attempts to it are refused, and nothing leaves the
// box.
func closedLoopbackPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return strconv.Itoa(port)
}

// bgpConfig is healthConfig with a speaker peering with a loopback port
// that refuses, min_healthy 2 on "web", and a second VIP left to ARP; and
// the same without "web".
func bgpConfig(t *testing.T) (withWeb, withoutWeb string) {
	web := strings.NewReplacer("SLOW", "0s", "ALLDOWN", "drop", "port = 80\n", "port = 80\nmin_healthy = 2\ncommunities = [\"65010:7\"]\nmed = 20\n").Replace(healthConfig)
	header, _, _ := strings.Cut(web, "[[vip]]")
	rest := `
[[vip]]
name = "arp"
address = "198.18.0.101"
port = 80
announce = false
[vip.healthcheck]
type = "none"
[[vip.backend]]
address = "198.18.1.21"
[bgp]
asn = 65010
router_id = "198.18.1.1"
linger = "300ms"
[[bgp.peer]]
address = "127.0.0.1"
asn = 65000
port = ` + closedLoopbackPort(t) + "\n"
	return web + rest, header + rest
}

func (td *testDaemon) announced() []netip.Prefix {
	td.d.mu.Lock()
	sp := td.d.box.speaker
	td.d.mu.Unlock()
	if sp == nil {
		return nil
	}
	var out []netip.Prefix
	for p := range sp.Announced() {
		out = append(out, p)
	}
	return out
}

func (td *testDaemon) vipAnnounce(name string) string {
	st, err := td.d.State(context.Background())
	if err != nil {
		td.t.Fatal(err)
	}
	for _, v := range st.VIPs {
		if v.Name == name {
			return v.Announce
		}
	}
	td.t.Fatalf("no VIP %q in the state", name)
	return ""
}

// TestBGPAnnounce: a VIP is announced while the box runs, withdrawn below
// min_healthy and while the box is drained, announced again after; a peer
// that refuses is no error; the VIP left to ARP is the only one answered.
func TestBGPAnnounce(t *testing.T) {
	fp := newFakeProbes()
	cfg, withoutWeb := bgpConfig(t)
	td := newTestDaemon(t, cfg, fp.probe)
	td.run()
	td.waitRunning()
	web := netip.MustParsePrefix("198.18.0.100/32")
	isAnnounced := func() bool { return slices.Equal(td.announced(), []netip.Prefix{web}) }
	isWithdrawn := func() bool { return len(td.announced()) == 0 }

	testkit.Eventually(t, testkit.Patience, "web announced", isAnnounced)
	if got := td.plat.lastNeighborVIPs(); !slices.Equal(got, []netip.Addr{netip.MustParseAddr("198.18.0.101")}) {
		t.Errorf("ARP/NDP answered for %v, want only the VIP not announced over BGP", got)
	}
	if got := td.vipAnnounce("arp"); got != "off" {
		t.Errorf("the VIP with announce = false: announce %q, want off", got)
	}

	steps := []struct {
		name   string
		act    func()
		cond   func() bool
		status string // the VIP's announce in State, by prefix
	}{
		{"one of two backends down: below min_healthy 2", func() { fp.set("198.18.1.11", health.Result{}) }, isWithdrawn, "withdrawn: 1 of 2 backends up"},
		{"back up", func() { fp.set("198.18.1.11", health.Result{OK: true}) }, isAnnounced, "announced"},
		{"drain-box", func() {
			ans, err := td.d.DrainBox(false)
			if err != nil || ans.Box != api.BoxDraining {
				t.Fatalf("DrainBox: %+v, %v; want draining", ans, err)
			}
		}, isWithdrawn, "withdrawn: the box is drained"},
		{"drained after the linger", func() {}, func() bool {
			ans, _ := td.d.DrainBox(false) // idempotent
			return ans.Box == api.BoxDrained
		}, "withdrawn: the box is drained"},
		{"drain-box undone", func() {
			if _, err := td.d.DrainBox(true); err != nil {
				t.Fatal(err)
			}
		}, isAnnounced, "announced"},
		{"standby", func() {
			if ans, err := td.d.SetRole(api.RoleStandby); err != nil || ans.Routes != "every VIP withdrawn (standby)" {
				t.Fatalf("SetRole(standby): %+v, %v", ans, err)
			}
		}, func() bool { return isWithdrawn() && len(td.plat.lastNeighborVIPs()) == 0 }, "withdrawn: the box is standby"},
		{"active", func() {
			if _, err := td.d.SetRole(api.RoleActive); err != nil {
				t.Fatal(err)
			}
		}, func() bool { return isAnnounced() && len(td.plat.lastNeighborVIPs()) == 1 }, "announced"},
	}
	for _, s := range steps {
		s.act()
		testkit.Eventually(t, testkit.Patience, s.name, s.cond)
		if got := td.vipAnnounce("web"); !strings.HasPrefix(got, s.status) {
			t.Errorf("%s: announce %q, want %q…", s.name, got, s.status)
		}
	}

	m := td.d.Metrics()
	if m.BGP == nil || !m.BGP.VIPAnnounced["web"] || m.BGP.Announcements < 3 || m.BGP.Withdrawals < 2 || len(m.BGP.Peers) != 1 {
		t.Errorf("BGP metrics: %+v", m.BGP)
	}
	if p := m.BGP.Peers[0]; p.State == "established" {
		t.Errorf("the peer refuses, yet its session is %s", p.State)
	}
	st, err := td.d.State(context.Background())
	if err != nil || st.BGP == nil || st.BGP.RouterID != "198.18.1.1" || len(st.BGP.Peers) != 1 || st.BGP.Box != api.BoxAnnouncing {
		t.Fatalf("State's BGP: %+v, %v", st.BGP, err)
	}

	// A reload that removes the VIP withdraws it.
	td.rewrite(withoutWeb)
	if err := td.d.Reload(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, testkit.Patience, "web withdrawn by the reload", isWithdrawn)
	td.rewrite(cfg)
	if err := td.d.Reload(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, testkit.Patience, "web announced after the reload that brings it back", isAnnounced)

	// SIGTERM's lame duck: withdrawn, then drained after the linger.
	ch := td.d.LameDuck()
	if ch == nil {
		t.Fatal("LameDuck with drain_on_stop: nothing to wait for")
	}
	testkit.Eventually(t, testkit.Patience, "withdrawn by the lame duck", isWithdrawn)
	// An admin's drain-box -undo meanwhile is refused: it would stop the
	// linger, and the stop waits for it.
	if _, err := td.d.DrainBox(true); !errors.Is(err, ErrStopping) {
		t.Errorf("undo during the stop's lame duck: %v, want ErrStopping", err)
	}
	select {
	case <-ch:
	case <-time.After(30 * time.Second): // a linger of 300 ms
		t.Fatal("the stop's lame duck never ended")
	}
	if err := td.stop(); err != nil {
		t.Fatal(err)
	}
}

// TestNoBGP: without [bgp], every VIP is answered by ARP/NDP and there is
// no speaker, no BGP state and no box drain — vipd as before.
func TestNoBGP(t *testing.T) {
	td := start(t, strings.NewReplacer("SLOW", "0s", "ALLDOWN", "drop").Replace(healthConfig))
	testkit.Eventually(t, testkit.Patience, "the neighbor set", func() bool { return len(td.plat.lastNeighborVIPs()) == 1 })
	st, err := td.d.State(context.Background())
	if err != nil || st.BGP != nil || st.VIPs[0].Announce != "" {
		t.Errorf("State without [bgp]: %+v, %v", st.BGP, err)
	}
	if _, err := td.d.DrainBox(false); err != api.ErrNoBGP {
		t.Errorf("DrainBox without [bgp]: %v, want ErrNoBGP", err)
	}
	if td.d.LameDuck() != nil || td.d.Metrics().BGP != nil {
		t.Error("a lame duck or BGP metrics without [bgp]")
	}
}

func TestNeighborVIPs(t *testing.T) {
	on, off := true, false
	vip := func(addr string, neigh *bool) config.VIP {
		return config.VIP{Address: netip.MustParseAddr(addr), NeighborAnnounce: neigh}
	}
	tests := []struct {
		name string
		vips []config.VIP
		want []string
	}{
		{"unset means on", []config.VIP{vip("198.18.0.1", nil)}, []string{"198.18.0.1"}},
		{"off is left out", []config.VIP{vip("198.18.0.1", &off), vip("198.18.0.2", &on)}, []string{"198.18.0.2"}},
		{"an address once", []config.VIP{vip("198.18.0.1", &on), vip("198.18.0.1", &on)}, []string{"198.18.0.1"}},
		{"an address answered if one of its VIPs wants it", []config.VIP{vip("198.18.0.1", &off), vip("198.18.0.1", &on)}, []string{"198.18.0.1"}},
		{"none", []config.VIP{vip("2001:2::1", &off)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want []netip.Addr
			for _, a := range tt.want {
				want = append(want, netip.MustParseAddr(a))
			}
			if got := neighborVIPs(&config.Config{VIPs: tt.vips}); !slices.Equal(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}
