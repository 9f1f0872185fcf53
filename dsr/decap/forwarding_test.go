//go:build linux

package decap

import (
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/testing/nstest"
	"github.com/vipd/vipd/testing/testkit"
)

// farAddr is an address that exists only in the far namespace, behind be.
var farAddr = nstest.PairFar4

// far puts a namespace behind BE and makes BE a router (nstest's
// Pair.AddFar). It returns a UDP socket on farAddr:9 in far, closed at
// cleanup: what reaches far on that port is read there.
func (r *rig) far(t *testing.T) *net.UDPConn {
	t.Helper()
	return r.AddFar(t).ListenUDP(t, netip.AddrPortFrom(farAddr, 9))
}

// waitSysctl polls sysctl name in ns until it reads want, for at most
// replyTimeout.
func waitSysctl(t *testing.T, ns *nstest.NS, name, want string) {
	t.Helper()
	var got string
	if !testkit.Poll(replyTimeout, func() bool {
		got = strings.TrimSpace(ns.Must(t, "sysctl", "-n", name))
		return got == want
	}) {
		t.Fatalf("%s = %s after %v, want %s", name, got, replyTimeout, want)
	}
}

// TestTUNForwarding: on a backend that forwards, an inner packet for
// another host, decapsulated without CheckLocal, must not be routed on:
// New turns forwarding off on the TUN, Run turns it off again when a
// host-wide write (ip_forward from 0 to 1, as Docker's start does; any
// write of IPv6's all.forwarding) copied 1 onto it, and the kernel drops
// the packet (Ip InAddrErrors) instead of sending it to far. With
// Options.Forwarding the TUN keeps the host's setting, and the packet
// reaches far: the behaviour before.
func TestTUNForwarding(t *testing.T) {
	for _, tc := range []struct {
		name       string
		forwarding bool
	}{{"off by default", false}, {"Forwarding keeps the host's", true}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			farConn := r.far(t)
			tun := nstest.Name("tf")
			d := r.newDecap(t, Options{TUN: tun, IPv6: true, Forwarding: tc.forwarding, LocalRefresh: 50 * time.Millisecond})
			v4, v6 := "net.ipv4.conf."+tun+".forwarding", "net.ipv6.conf."+tun+".forwarding"
			force := "net.ipv6.conf." + tun + ".force_forwarding"
			_, err := os.Stat("/proc/sys/net/ipv6/conf/all/force_forwarding")
			hasForce := err == nil
			if tc.forwarding {
				// The kernel's, from default (1: be forwards).
				if got := sysctl(t, r, v4); got != "1" {
					t.Errorf("%s = %s with Forwarding, want the host's 1", v4, got)
				}
			} else {
				want := map[string]string{v4: "0", v6: "0"}
				if hasForce {
					want[force] = "0"
				}
				for name, v := range want {
					if got := sysctl(t, r, name); got != v {
						t.Errorf("after New: %s = %s, want %s", name, got, v)
					}
				}
				// Host-wide writes turn the TUN's forwarding on again;
				// Run is not running yet, so nothing turns it off.
				r.BE.Must(t, "sysctl", "-qw", "net.ipv4.ip_forward=0")
				r.BE.Must(t, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
				if got4, got6 := sysctl(t, r, v4), sysctl(t, r, v6); got4 != "1" || got6 != "1" {
					t.Fatalf("after host-wide writes: %s = %s, %s = %s; want both 1, as the kernel copies them", v4, got4, v6, got6)
				}
			}
			run(t, d)
			if !tc.forwarding {
				waitSysctl(t, r.BE, v4, "0")
				waitSysctl(t, r.BE, v6, "0")
			}

			addrErrors := r.BE.SNMP(t, "Ip", "InAddrErrors")
			r.sender(t).Send(t, ipip(t, lbAddr4, beAddr4, udpFrom(t, client4, farAddr, 40000, 9, []byte("relay"))))
			waitStats(t, d, "decapsulated", func(s Stats) bool { return s.Decapsulated == 1 })
			if tc.forwarding {
				if got := nstest.ReadUDP(t, farConn, replyTimeout); got != "relay" {
					t.Errorf("far received %q first, want the relayed packet", got)
				}
				return
			}
			// The kernel's verdict on the packet written to the TUN.
			if !testkit.Poll(replyTimeout, func() bool { return r.BE.SNMP(t, "Ip", "InAddrErrors") != addrErrors }) {
				t.Fatalf("be's Ip InAddrErrors still %d after %v: the kernel did not refuse to route the packet", addrErrors, replyTimeout)
			}
			// be does route lb's own datagrams to far: the first to
			// arrive must be this one.
			r.LB.SendUDP(t, netip.AddrPortFrom(farAddr, 9), []byte("control"))
			if got := nstest.ReadUDP(t, farConn, replyTimeout); got != "control" {
				t.Errorf("far received %q first, want only the control datagram: be relayed the decapsulated packet", got)
			}
			if n := r.BE.SNMP(t, "Ip", "ForwDatagrams"); n != 1 {
				t.Errorf("be forwarded %d datagrams, want 1 (the control)", n)
			}
		})
	}
}
