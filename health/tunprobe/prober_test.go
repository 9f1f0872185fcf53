//go:build linux

package tunprobe

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/testing/nstest"
	"github.com/vipd/vipd/testing/testkit"
)

// TestProbeThroughTunnel: a probe of VIP:port through a backend's tunnel
// succeeds while the backend decapsulates and holds the VIP on loopback,
// and fails when the VIP is removed from loopback, though the listener
// and the backend's own address are still there; then succeeds again once
// the VIP is back.
func TestProbeThroughTunnel(t *testing.T) {
	tests := []struct {
		name  string
		vip   netip.Addr
		path  Path
		setup func(*rig, *testing.T)
	}{
		{"IPIP over IPv4", vip4, Path{Backend: beAddr, Source: boxAddr, Encap: IPIP}, func(r *rig, t *testing.T) { r.decap(t) }},
		{"IPIP over IPv6", vip6, Path{Backend: beAddr6, Source: boxAddr6, Encap: IPIP}, func(r *rig, t *testing.T) { r.decap(t) }},
		{"GUE over IPv4", vip4, Path{Backend: beAddr, Source: boxAddr, Encap: GUE, GUEPort: 6080}, func(r *rig, t *testing.T) { r.decapGUE(t, 6080) }},
		{"GUE over IPv6 to another port", vip6, Path{Backend: beAddr6, Source: boxAddr6, Encap: GUE, GUEPort: 7777}, func(r *rig, t *testing.T) { r.decapGUE(t, 7777) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			r.LB.Sysctl(t, "net.ipv4.conf.all.rp_filter", "2")
			tt.setup(r, t)
			// The default Linger: the TUN reader may take the handshake's
			// last ACK well after Dial returned and the probe closed, and
			// counts it as sent only within the Linger.
			p := r.prober(t, Options{TUN: nstest.Name("pt"), Source4: boxAddr, Source6: boxAddr6, Egress: r.LBIf})
			// The VIP appears on loopback in the decapsulator's address
			// list within its refresh: poll.
			waitProbe(t, p, tt.vip, tt.path, true)
			before := p.Stats().Sent
			if err := probeUp(p, tt.vip, tt.path); err != nil {
				t.Fatalf("second probe: %v", err)
			}
			// The handshake's last ACK reaches the TUN reader after
			// Dial returns: wait for it (bounded).
			var s Stats
			testkit.Poll(testkit.Patience, func() bool { s = p.Stats(); return s.Sent >= before+2 })
			if s.Sent < before+2 || s.SendErrors != 0 {
				t.Errorf("a probe sent its SYN and ACK through the tunnel: %+v (before: %d sent)", s, before)
			}
			r.delVIPs(t)
			waitProbe(t, p, tt.vip, tt.path, false)
			r.addVIPs(t)
			waitProbe(t, p, tt.vip, tt.path, true)
			// A backend that does not decapsulate this tunnel: the
			// other family's path fails as the VIP's family.
			wrong := tt.path
			wrong.Backend = netip.MustParseAddr("198.18.1.99") // no such host on the link
			if !tt.vip.Is4() {
				wrong.Backend = netip.MustParseAddr("2001:2:0:1::99")
			}
			if err := probe(p, tt.vip, wrong); err == nil {
				t.Errorf("a probe through a tunnel to no backend succeeded")
			}
		})
	}
}

// waitProbe probes until the result is up (success) or not, for at most
// 30 s. A probe expected to succeed may take upTimeout (a busy machine can
// hold the handshake past probeTimeout); one expected to fail takes
// probeTimeout.
func waitProbe(t *testing.T, p *Prober, vip netip.Addr, path Path, up bool) {
	t.Helper()
	var err error
	if !testkit.Poll(testkit.Patience, func() bool {
		if up {
			err = probeUp(p, vip, path)
		} else {
			err = probe(p, vip, path)
		}
		return (err == nil) == up
	}) {
		t.Fatalf("probe of %v through %v: still %v, want up=%v", vip, path.Backend, err, up)
	}
}

// TestNewChecksRPFilter: strict reverse-path filtering on all or on the
// egress interface would drop the answers, so New refuses it and names
// the sysctls; loose and off pass.
func TestNewChecksRPFilter(t *testing.T) {
	tests := []struct {
		all, dev string
		ok       bool
	}{
		{"0", "0", true},
		{"2", "0", true},
		{"0", "2", true},
		{"1", "0", false},
		{"0", "1", false},
		{"2", "1", true}, // the kernel takes the larger: 2
	}
	r := newRig(t)
	for _, tt := range tests {
		t.Run("all="+tt.all+",dev="+tt.dev, func(t *testing.T) {
			r.LB.Sysctl(t, "net.ipv4.conf.all.rp_filter", tt.all)
			r.LB.Sysctl(t, "net.ipv4.conf."+r.LBIf+".rp_filter", tt.dev)
			var p *Prober
			err := r.LB.Do(func() (err error) {
				p, err = New(Options{TUN: nstest.Name("pt"), Source4: boxAddr, Egress: r.LBIf})
				return err
			})
			if p != nil {
				p.Close()
			}
			if tt.ok != (err == nil) {
				t.Fatalf("New: %v, want ok=%v", err, tt.ok)
			}
			if err != nil && (!errors.Is(err, ErrRPFilter) || !strings.Contains(err.Error(), "net.ipv4.conf.all.rp_filter")) {
				t.Errorf("error does not name the sysctl: %v", err)
			}
		})
	}
}

// TestRPFilterAndAnswers is why New checks rp_filter, measured: the
// backend's answer comes from the VIP, which the box routes toward its
// clients, and arrives on the egress interface. Strict filtering drops it
// (a healthy backend would fail its probe); loose filtering passes it
// when the box has any route to the VIP (its default route) and drops it
// without one; 0 passes it always. (New's own check is skipped here:
// Egress is unset.)
func TestRPFilterAndAnswers(t *testing.T) {
	tests := []struct {
		name     string
		all, dev string
		route    bool // the box has a default route (toward the clients)
		up       bool
	}{
		{"off", "0", "0", true, true},
		{"off, no route to the VIP", "0", "0", false, true},
		{"loose", "2", "0", true, true},
		{"loose, no route to the VIP", "2", "0", false, false},
		{"strict on all", "1", "0", true, false},
		{"strict on the egress interface", "0", "1", true, false},
	}
	r := newRig(t)
	r.decap(t)
	p := r.prober(t, Options{TUN: nstest.Name("pt"), Source4: boxAddr, Linger: 200 * time.Millisecond})
	path := Path{Backend: beAddr, Source: boxAddr, Encap: IPIP}
	waitProbe(t, p, vip4, path, true) // the decapsulator knows the VIP
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r.LB.Sysctl(t, "net.ipv4.conf.all.rp_filter", tt.all)
			r.LB.Sysctl(t, "net.ipv4.conf."+r.LBIf+".rp_filter", tt.dev)
			if !tt.route {
				r.LB.Must(t, "ip", "route", "del", "default")
				t.Cleanup(func() { r.LB.Must(t, "ip", "route", "add", "default", "via", "198.18.2.254") })
			}
			probe := probe
			if tt.up {
				probe = probeUp
			}
			err := probe(p, vip4, path)
			if (err == nil) != tt.up {
				t.Errorf("probe: %v, want up=%v", err, tt.up)
			}
		})
	}
}

// TestSetupAndTeardown: New replaces a rule a crashed run left (same
// mark, table and priority) rather than adding a second, installs the
// routes into its TUN, and Close leaves nothing behind: no rule, no
// route, no TUN.
func TestSetupAndTeardown(t *testing.T) {
	r := newRig(t)
	tun := nstest.Name("pt")
	mark, table := fmt.Sprint(DefaultMark), fmt.Sprint(DefaultTable)
	r.LB.Must(t, "ip", "rule", "add", "fwmark", mark, "lookup", table, "pref", fmt.Sprint(DefaultPriority))
	r.LB.Must(t, "ip", "-6", "rule", "add", "fwmark", mark, "lookup", table, "pref", fmt.Sprint(DefaultPriority))
	// Another rule of the table, at another priority, is not vipd's.
	r.LB.Must(t, "ip", "rule", "add", "fwmark", mark, "lookup", table, "pref", "2000")
	var p *Prober
	if err := r.LB.Do(func() (err error) {
		p, err = New(Options{TUN: tun, Source4: boxAddr, Source6: boxAddr6})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	count := func(args ...string) int {
		return strings.Count(r.LB.Must(t, args...), "lookup "+table)
	}
	routes := func(v string) string { return r.LB.Must(t, "ip", v, "route", "show", "table", table) }
	for _, c := range []struct {
		what string
		got  int
		want int
	}{
		{"IPv4 rules at 1000", count("ip", "rule", "list", "pref", "1000"), 1},
		{"IPv6 rules at 1000", count("ip", "-6", "rule", "list", "pref", "1000"), 1},
		{"IPv4 rules at 2000", count("ip", "rule", "list", "pref", "2000"), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", c.what, c.got, c.want)
		}
	}
	for _, v := range []string{"-4", "-6"} {
		if got := routes(v); !strings.Contains(got, "default dev "+tun) {
			t.Errorf("table %s (%s): %q, want a default route into %s", table, v, got, tun)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if n := count("ip", "rule", "list", "pref", "1000") + count("ip", "-6", "rule", "list", "pref", "1000"); n != 0 {
		t.Errorf("%d rules left after Close", n)
	}
	if n := count("ip", "rule", "list", "pref", "2000"); n != 1 {
		t.Errorf("Close removed a rule that was not its own")
	}
	for _, v := range []string{"-4", "-6"} {
		if got := routes(v); strings.TrimSpace(got) != "" {
			t.Errorf("table %s (%s) after Close: %q", table, v, got)
		}
	}
	if out, err := r.LB.Cmd("ip", "link", "show", tun).CombinedOutput(); err == nil {
		t.Errorf("TUN %s still there after Close: %s", tun, out)
	}
}

// TestNewFailsCleanly: when New fails after it created the TUN device and
// a rule (here: IPv6 is disabled, so the IPv6 route cannot be added), it
// returns the error and leaves nothing behind.
func TestNewFailsCleanly(t *testing.T) {
	r := newRig(t)
	r.LB.Sysctl(t, "net.ipv6.conf.all.disable_ipv6", "1")
	r.LB.Sysctl(t, "net.ipv6.conf.default.disable_ipv6", "1")
	tun := nstest.Name("pt")
	done := r.LB.Go(func() error {
		p, err := New(Options{TUN: tun, Source4: boxAddr, Source6: boxAddr6})
		if err == nil {
			p.Close()
		}
		return err
	})
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "IPv6") {
			t.Fatalf("New with IPv6 disabled: %v, want an IPv6 route error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("New hung on its failure path")
	}
	if out := r.LB.Must(t, "ip", "rule", "list"); strings.Contains(out, fmt.Sprint(DefaultTable)) {
		t.Errorf("a rule is left after the failed New:\n%s", out)
	}
	if out, err := r.LB.Cmd("ip", "link", "show", tun).CombinedOutput(); err == nil {
		t.Errorf("TUN %s is left after the failed New: %s", tun, out)
	}
}
