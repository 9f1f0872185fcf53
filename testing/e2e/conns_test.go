package e2e

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/testing/testbed"
)

// TestConns: vipd conns, as an operator runs it on the box, lists the
// long-lived connections streaming through a NAT and a DSR VIP: each one
// once, with its client port, the backend that answered it, Established,
// an age that grows and an idle time that does not; the filters and the
// limit select what they say.
func TestConns(t *testing.T) {
	e := setup(t, testbed.Options{}, testbed.ConfigOptions{Echo: true})
	e.waitBackends("echo-nat", "none")
	e.waitBackends("echo-dsr", "none")
	addrOf := map[string]netip.Addr{}
	for _, be := range e.bed.Backends {
		addrOf[be.Name] = be.Addr
	}
	vipd := func(args ...string) string {
		return e.bed.Box.Must(t, append([]string{e.bed.Bin.VIPD, "conns", "-admin", testbed.AdminAddr}, args...)...)
	}
	list := func(args ...string) *api.Conns {
		t.Helper()
		var c api.Conns
		out := vipd(append([]string{"-json"}, args...)...)
		if err := json.Unmarshal([]byte(out), &c); err != nil {
			t.Fatalf("vipd conns -json %v: %v\n%s", args, err, out)
		}
		return &c
	}
	const n = 8
	for _, vip := range []struct {
		name string
		addr netip.Addr
	}{{"echo-nat", testbed.VIPNAT}, {"echo-dsr", testbed.VIPDSR}} {
		t.Run(vip.name, func(t *testing.T) {
			ef, err := e.bed.StartEchoFlows(vip.addr, n)
			if err != nil {
				t.Fatal(err)
			}
			defer ef.Finish()
			flows := ef.Flows()
			// They become Established (proven: packets in three distinct
			// seconds) and their ages reach 2 s while they stream, a round
			// every 100 ms: the age counts from the first packet, the idle
			// time from the last.
			var c *api.Conns
			waitFor(t, patience, "every flow of "+vip.name+" listed, Established, 2 s old", func() bool {
				c = list(vip.name)
				if len(c.Conns) < n {
					return false
				}
				for _, x := range c.Conns {
					if x.AgeSeconds < 2 || x.State != "Established" {
						return false
					}
				}
				return true
			})
			byClient := map[string]api.Conn{}
			for _, x := range c.Conns {
				if _, dup := byClient[x.Client]; dup {
					t.Errorf("%s listed twice", x.Client)
				}
				byClient[x.Client] = x
			}
			if len(c.Conns) != n || c.Truncated {
				t.Errorf("listed %d flows (truncated %v), want the %d echo flows: %+v", len(c.Conns), c.Truncated, n, c.Conns)
			}
			perBackend := map[string]int{}
			for _, f := range flows {
				x, ok := byClient[f.Local.String()]
				if !ok {
					t.Errorf("echo flow %s (backend %s) not listed", f.Local, f.Backend)
					continue
				}
				want := addrOf[f.Backend].String()
				if x.Backend != want && !strings.HasPrefix(x.Backend, want+":") {
					t.Errorf("flow %s: backend %q, but %s (%s) answered it", f.Local, x.Backend, f.Backend, want)
				}
				if x.Protocol != "tcp" || x.VIP != vip.name || x.VIPAddress != netip.AddrPortFrom(vip.addr, testbed.EchoPort).String() ||
					x.State != "Established" || x.IdleSeconds > 1 || x.AgeSeconds < x.IdleSeconds || x.FastPath != "off" {
					t.Errorf("flow %s: %+v", f.Local, x)
				}
				perBackend[x.Backend]++
			}

			for _, tc := range []struct {
				name string
				args []string
				want int
			}{
				{"client:port", []string{"-client", flows[0].Local.String(), vip.name}, 1},
				{"client", []string{"-client", flows[0].Local.Addr().String(), vip.name}, n},
				{"backend", []string{"-backend", addrOf[flows[0].Backend].String(), vip.name}, perBackend[byClient[flows[0].Local.String()].Backend]},
				{"limit", []string{"-limit", "3", vip.name}, 3},
			} {
				c := list(tc.args...)
				if len(c.Conns) != tc.want || c.Truncated != (tc.name == "limit") {
					t.Errorf("%s %v: %d flows (truncated %v), want %d", tc.name, tc.args, len(c.Conns), c.Truncated, tc.want)
				}
			}
			// The table an operator reads.
			out := vipd("-client", flows[0].Local.String(), vip.name)
			row := fmt.Sprintf("tcp    %s  %s %s", flows[0].Local, vip.name, netip.AddrPortFrom(vip.addr, testbed.EchoPort))
			if !strings.Contains(out, "PROTO  CLIENT") || !strings.Contains(out, "AGE") || !strings.Contains(out, row) || !strings.Contains(out, "(1 flows)") {
				t.Errorf("vipd conns prints:\n%s\nwant a header, the row %q and (1 flows)", out, row)
			}
			if broken := ef.Settle(10 * time.Second); len(broken) > 0 {
				t.Errorf("%d flows broke while listed: %s", len(broken), testbed.FirstN(broken, 5))
			}
		})
	}
}
