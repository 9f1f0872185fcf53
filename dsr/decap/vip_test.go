//go:build linux

package decap

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/vipd/vipd/testing/nstest"
)

// loAddrs returns the addresses on ns's loopback as "addr/len".
func loAddrs(t *testing.T, ns *nstest.NS) map[string]bool {
	t.Helper()
	m := map[string]bool{}
	for line := range strings.SplitSeq(ns.Must(t, "ip", "-o", "addr", "show", "dev", "lo"), "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "inet" || f[i] == "inet6" {
				m[f[i+1]] = true
			}
		}
	}
	return m
}

// loLine returns the line of `ip -o addr show dev lo` in ns that holds
// addr ("addr/len"), flags included; "" when there is none.
func loLine(t *testing.T, ns *nstest.NS, addr string) string {
	t.Helper()
	for line := range strings.SplitSeq(ns.Must(t, "ip", "-o", "addr", "show", "dev", "lo"), "\n") {
		if strings.Contains(line, " "+addr+" ") {
			return line
		}
	}
	return ""
}

// TestVIPs: New puts the VIPs on loopback and raises the ARP sysctls;
// Close takes away exactly what New added and changed — a VIP that was
// there before, a sysctl that was already high enough, stay as they were.
func TestVIPs(t *testing.T) {
	nstest.RequireRoot(t)
	v4, v6 := netip.MustParseAddr("198.18.0.103"), netip.MustParseAddr("2001:2::103")
	const ignore, announce = "net.ipv4.conf.all.arp_ignore", "net.ipv4.conf.all.arp_announce"
	for _, tc := range []struct {
		name    string
		present []string          // on lo before New
		sysctls map[string]string // set before New
		// While running and after Close.
		running, after map[string]string
		loAfter        []string // on lo after Close
	}{
		{
			name:    "nothing there before",
			sysctls: map[string]string{ignore: "0", announce: "0"},
			running: map[string]string{ignore: "1", announce: "2"},
			after:   map[string]string{ignore: "0", announce: "0"},
		},
		{
			name:    "IPv4 VIP there before, stricter arp_ignore",
			present: []string{"198.18.0.103/32"},
			sysctls: map[string]string{ignore: "2", announce: "1"},
			running: map[string]string{ignore: "2", announce: "2"},
			after:   map[string]string{ignore: "2", announce: "1"},
			loAfter: []string{"198.18.0.103/32"},
		},
		{
			name:    "both there before, sysctls already set",
			present: []string{"198.18.0.103/32", "2001:2::103/128"},
			sysctls: map[string]string{ignore: "1", announce: "2"},
			running: map[string]string{ignore: "1", announce: "2"},
			after:   map[string]string{ignore: "1", announce: "2"},
			loAfter: []string{"198.18.0.103/32", "2001:2::103/128"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := nstest.New(t, "vip")
			for _, a := range tc.present {
				args := []string{"ip", "addr", "add", a, "dev", "lo"}
				if strings.Contains(a, ":") {
					args = append(args, "nodad") // else tentative until DAD's work runs
				}
				ns.Must(t, args...)
			}
			for k, v := range tc.sysctls {
				ns.Must(t, "sysctl", "-qw", k+"="+v)
			}
			var d *Decap
			if err := ns.Do(func() (err error) {
				d, err = New(Options{TUN: "vtun-vip", IPv6: true, VIPs: []netip.Addr{v4, v6}})
				return err
			}); err != nil {
				t.Fatalf("New: %v", err)
			}
			t.Cleanup(func() { d.Close() })
			lo := loAddrs(t, ns)
			if !lo["198.18.0.103/32"] || !lo["2001:2::103/128"] {
				t.Errorf("while running: lo has %v, want both VIPs", lo)
			}
			// Usable at once: a tentative address cannot be bound
			// until the kernel's DAD work runs, late on a busy host.
			if line := loLine(t, ns, "2001:2::103/128"); !strings.Contains(line, " nodad") || strings.Contains(line, "tentative") {
				t.Errorf("while running: lo has %q, want the IPv6 VIP with nodad, not tentative", line)
			}
			for k, want := range tc.running {
				if got := strings.TrimSpace(ns.Must(t, "sysctl", "-n", k)); got != want {
					t.Errorf("while running: %s = %s, want %s", k, got, want)
				}
			}
			if err := d.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			lo = loAddrs(t, ns)
			for _, a := range []string{"198.18.0.103/32", "2001:2::103/128"} {
				if want := strings.Contains(strings.Join(tc.loAfter, " "), a); lo[a] != want {
					t.Errorf("after Close: %s on lo = %v, want %v (lo: %v)", a, lo[a], want, lo)
				}
			}
			for k, want := range tc.after {
				if got := strings.TrimSpace(ns.Must(t, "sysctl", "-n", k)); got != want {
					t.Errorf("after Close: %s = %s, want %s", k, got, want)
				}
			}
		})
	}
}

// TestVIPsChangedMeanwhile: what someone else changes while Decap runs is
// theirs — a VIP removed by hand is no error at Close, a sysctl set by
// hand to another value is not put back.
func TestVIPsChangedMeanwhile(t *testing.T) {
	nstest.RequireRoot(t)
	ns := nstest.New(t, "vip")
	ns.Must(t, "sysctl", "-qw", "net.ipv4.conf.all.arp_ignore=0", "net.ipv4.conf.all.arp_announce=0")
	var d *Decap
	if err := ns.Do(func() (err error) {
		d, err = New(Options{TUN: "vtun-vip", VIPs: []netip.Addr{netip.MustParseAddr("198.18.0.103")}})
		return err
	}); err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	ns.Must(t, "ip", "addr", "del", "198.18.0.103/32", "dev", "lo")
	ns.Must(t, "sysctl", "-qw", "net.ipv4.conf.all.arp_ignore=8")
	if err := d.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if got := strings.TrimSpace(ns.Must(t, "sysctl", "-n", "net.ipv4.conf.all.arp_ignore")); got != "8" {
		t.Errorf("arp_ignore = %s after Close, want 8 (set by hand meanwhile)", got)
	}
	if got := strings.TrimSpace(ns.Must(t, "sysctl", "-n", "net.ipv4.conf.all.arp_announce")); got != "0" {
		t.Errorf("arp_announce = %s after Close, want 0 (restored)", got)
	}
}

// TestVIPDelivery: a VIP that New put on loopback is accepted under
// CheckLocal from the first packet, and answered through the TUN.
func TestVIPDelivery(t *testing.T) {
	r := newRig(t)
	vip := netip.MustParseAddr("198.18.0.103")
	d := r.newDecap(t, Options{CheckLocal: true, GUEPort: DefaultGUEPort, VIPs: []netip.Addr{vip}})
	run(t, d)
	r.echo(t, netip.AddrPortFrom(vip, 80))
	s, c := r.sender(t), r.capture(t)
	s.Send(t, gue4(t, lbAddr4, beAddr4, 49999, DefaultGUEPort, tcp4(t, client4, vip, 40001, 80, true, false, 1000, nil)))
	c.waitTCP(t, synAckFrom(vip, client4, 40001))
}

// TestBadVIPs: New refuses addresses that cannot be a VIP on loopback,
// before it creates anything.
func TestBadVIPs(t *testing.T) {
	for _, a := range []netip.Addr{{}, netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("::"), netip.MustParseAddr("::ffff:198.18.0.1"),
		netip.MustParseAddr("fe80::1%eth0"), netip.MustParseAddr("224.0.0.1")} {
		if _, err := (Options{VIPs: []netip.Addr{a}}).withDefaults(); err == nil || !strings.Contains(err.Error(), "bad VIP") {
			t.Errorf("VIP %v: %v, want a bad VIP error", a, err)
		}
	}
}

// TestVIPsUndoneOnFailure: when New fails after it added the VIPs (here:
// the GUE port is taken), it takes them away and restores the sysctls.
func TestVIPsUndoneOnFailure(t *testing.T) {
	nstest.RequireRoot(t)
	ns := nstest.New(t, "vip")
	ns.Must(t, "sysctl", "-qw", "net.ipv4.conf.all.arp_ignore=0", "net.ipv4.conf.all.arp_announce=0")
	var first *Decap
	if err := ns.Do(func() (err error) {
		first, err = New(Options{TUN: "vtun-gue1", GUEPort: 6082})
		return err
	}); err != nil {
		t.Fatalf("first New: %v", err)
	}
	t.Cleanup(func() { first.Close() })
	err := ns.Do(func() error {
		d, err := New(Options{TUN: "vtun-gue2", GUEPort: 6082, VIPs: []netip.Addr{netip.MustParseAddr("198.18.0.103")}})
		if err == nil {
			d.Close()
		}
		return err
	})
	if err == nil {
		t.Fatal("second New on a taken GUE port succeeded")
	}
	if lo := loAddrs(t, ns); lo["198.18.0.103/32"] {
		t.Errorf("failed New left its VIP on lo: %v", lo)
	}
	for _, k := range []string{"net.ipv4.conf.all.arp_ignore", "net.ipv4.conf.all.arp_announce"} {
		if got := strings.TrimSpace(ns.Must(t, "sysctl", "-n", k)); got != "0" {
			t.Errorf("failed New left %s = %s, want 0", k, got)
		}
	}
}
