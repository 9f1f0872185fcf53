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

	"github.com/mdlayher/ndp"

	"github.com/vipd/vipd/internal/linkwatch"
	"github.com/vipd/vipd/testing/nstest"
	"github.com/vipd/vipd/testing/testkit"
)

// These tests run the package against the kernel, in a throwaway pair of
// network namespaces (see netns_test.go). They skip when not root.

// runIn runs fn (a Run method) inside ns and stops it at cleanup,
// failing the test if it returns an error or does not stop.
func runIn(t *testing.T, ns *nstest.NS, fn func(ctx context.Context) error) {
	t.Helper()
	testkit.Go(t, "Run", 2*wait, func(ctx context.Context) error {
		return ns.Do(func() error { return fn(ctx) })
	})
}

// arpAsk sends one ARP request for each of targets from B's peer0, in
// order, as arping would, and waits at most d for a reply from the last.
// It returns the replies that arrived until then, that one last, and
// whether it came.
func arpAsk(t *testing.T, bed *testBed, d time.Duration, targets ...netip.Addr) (replies []arpMessage, ok bool) {
	t.Helper()
	last := targets[len(targets)-1]
	do(t, bed.b, func() {
		ifi, err := net.InterfaceByName(bed.ifB)
		if err != nil {
			t.Errorf("peer interface: %v", err)
			return
		}
		c, err := listenPacket(ifi.Index, etherTypeARP, arpFilter())
		if err != nil {
			t.Errorf("peer ARP socket: %v", err)
			return
		}
		defer c.Close()
		got := make(chan []arpMessage, 1)
		go func() {
			var seen []arpMessage
			b := make([]byte, maxFrameLen)
			for {
				n, err := c.ReadFrame(b)
				if err != nil {
					return
				}
				if m, err := parseARP(b[:n]); err == nil && m.op == arpReply {
					seen = append(seen, m)
					if m.senderIP == last {
						got <- seen
						return
					}
				}
			}
		}()
		for _, target := range targets {
			if err := c.WriteFrame(arpFrame(broadcastMAC, arpRequest, bed.macB, netip.MustParseAddr("198.18.0.2"), [6]byte{}, target)); err != nil {
				t.Errorf("send ARP request: %v", err)
				return
			}
		}
		select {
		case replies, ok = <-got:
		case <-time.After(d):
		}
	})
	return replies, ok
}

// udpPoke sends one UDP datagram from B to addr, which makes B's kernel
// resolve addr's MAC first (ARP or NDP). The datagram itself goes nowhere:
// A does not own addr and does not forward.
func udpPoke(t *testing.T, bed *testBed, addr netip.Addr) {
	t.Helper()
	do(t, bed.b, func() {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, 9)))
		if err != nil {
			t.Errorf("dial %v from B: %v", addr, err)
			return
		}
		defer c.Close()
		if _, err := c.Write([]byte("who has")); err != nil {
			t.Errorf("send to %v from B: %v", addr, err)
		}
	})
}

func TestPrivilegedResponder(t *testing.T) {
	bed := newTestBed(t)
	r, err := NewResponder(bed.a.Interface(t, bed.ifA), testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	vip4, vip6 := netip.MustParseAddr("198.18.0.100"), netip.MustParseAddr("2001:2::100")
	r.SetVIPs([]netip.Addr{vip4, vip6})
	runIn(t, bed.a, r.Run)
	// Run has its sockets once the first announcements are out.
	testkit.Eventually(t, wait, "first announcements", func() bool { return r.Stats().Announcements >= 2 })

	// The VIP is answered with A's MAC, every field right; another
	// address is not.
	replies, ok := arpAsk(t, bed, wait, vip4)
	if !ok {
		t.Fatalf("no ARP reply for VIP %v", vip4)
	}
	want := arpMessage{op: arpReply, ethSrc: bed.macA, senderMAC: bed.macA, senderIP: vip4,
		targetMAC: bed.macB, targetIP: netip.MustParseAddr("198.18.0.2")}
	if reply := replies[len(replies)-1]; reply != want {
		t.Errorf("ARP reply %+v, want %+v", reply, want)
	}
	// A request for another address, then one for the VIP: the Responder
	// handles them in order, so a reply to the first would come first.
	if replies, ok := arpAsk(t, bed, wait, netip.MustParseAddr("198.18.0.200"), vip4); !ok || len(replies) != 1 {
		t.Errorf("asked for a non-VIP, then the VIP: replies %+v (the VIP's came: %v), want the VIP's only", replies, ok)
	}

	// B's own kernel resolves both VIPs to A's MAC (ARP, and NDP through
	// the solicited-node group the Responder joined).
	for _, vip := range []netip.Addr{vip4, vip6} {
		waitNeigh(t, bed.b, bed.ifB, vip.String(), "lladdr "+bedMACA, func() { udpPoke(t, bed, vip) })
	}

	// Gratuitous ARP / unsolicited NA: B holds another MAC for two new
	// VIPs (a previous owner); once they are set, B's entries move to A.
	const oldMAC = "02:00:5e:0e:00:01"
	added := []netip.Addr{netip.MustParseAddr("198.18.0.101"), netip.MustParseAddr("2001:2::101")}
	for _, a := range added {
		nstest.Must(t, "ip", "-n", bed.b.Name, "neigh", "replace", a.String(), "lladdr", oldMAC, "dev", bed.ifB, "nud", "stale")
	}
	r.SetVIPs(append([]netip.Addr{vip4, vip6}, added...))
	for _, a := range added {
		waitNeigh(t, bed.b, bed.ifB, a.String(), "lladdr "+bedMACA, nil)
	}

	// Every announcement is out (two per IPv4 VIP, three per IPv6 one, the
	// last ones seconds after SetVIPs) before the link goes down: one due
	// while it is down fails and counts as a send error, as it should, and
	// a busy machine stretches the window between the two commands.
	testkit.Eventually(t, wait, "every VIP's announcements", func() bool { return r.Stats().Announcements >= 2*announceNum4+2*announceNum6 })

	// The link goes down and up: the sockets report it once and go on.
	// (Now B's end is the one whose carrier came back under it: wait
	// until it transmits again, see newTestBed.)
	nstest.Must(t, "ip", "-n", bed.a.Name, "link", "set", bed.ifA, "down")
	nstest.Must(t, "ip", "-n", bed.a.Name, "link", "set", bed.ifA, "up")
	bed.b.WaitRunning(t, bed.ifB)
	if _, ok := arpAsk(t, bed, wait, vip4); !ok {
		t.Error("VIP no longer answered after the link went down and up")
	}

	s := r.Stats()
	if s.Replies < 3 || s.Announcements < 4 || s.SendErrors != 0 {
		t.Errorf("Stats = %+v, want ≥ 3 replies, ≥ 4 announcements, no errors", s)
	}
}

func TestPrivilegedResolver(t *testing.T) {
	bed := newTestBed(t)
	const gwMAC, gwMAC2 = "02:00:5e:0f:00:fe", "02:00:5e:0f:00:ff"
	for _, args := range [][]string{
		// A routed prefix whose gateway only A's kernel knows (a static
		// entry), and one behind B, and default routes through B.
		{"neigh", "add", "198.18.0.254", "lladdr", gwMAC, "dev", bed.ifA, "nud", "permanent"},
		{"route", "add", "198.19.1.0/24", "via", "198.18.0.254", "dev", bed.ifA},
		{"route", "add", "198.19.2.0/24", "via", "198.18.0.2", "dev", bed.ifA, "mtu", "1400"},
		{"route", "add", "default", "via", "198.18.0.2", "dev", bed.ifA},
		{"-6", "route", "add", "default", "via", "2001:2::2", "dev", bed.ifA},
	} {
		nstest.Must(t, append([]string{"ip", "-n", bed.a.Name}, args...)...)
	}
	peerB := netip.MustParseAddr("198.18.0.2")
	if got := neigh(t, bed.a, bed.ifA, peerB.String()); got != "" {
		t.Fatalf("A's kernel already knows B: %q", got)
	}

	r := NewResolver(testLog(t), 200*time.Millisecond)
	onLink, viaStatic, viaB, peer6 := peerB, netip.MustParseAddr("198.19.1.10"), netip.MustParseAddr("198.19.2.10"), netip.MustParseAddr("2001:2::2")
	r.SetTargets([]netip.Addr{onLink, viaStatic, viaB, peer6})
	var (
		mu      sync.Mutex
		changes int
	)
	changed := make(chan struct{}, 100)
	runIn(t, bed.a, func(ctx context.Context) error {
		return r.Run(ctx, func() {
			mu.Lock()
			changes++
			mu.Unlock()
			changed <- struct{}{}
		})
	})
	waitResolved := func(addr netip.Addr, want string) NextHop {
		t.Helper()
		deadline := time.After(wait)
		for {
			if hop, ok := r.NextHop(addr); ok && netHW(hop.MAC).String() == want {
				return hop
			}
			select {
			case <-changed:
			case <-deadline:
				hop, ok := r.NextHop(addr)
				t.Fatalf("%v resolved to %+v (ok %v), want MAC %s", addr, hop, ok, want)
			}
		}
	}

	var vipd0 linkwatch.Link
	do(t, bed.a, func() {
		var err error
		if vipd0, err = linkwatch.Read(bed.ifA); err != nil {
			t.Errorf("linkwatch.Read: %v", err)
		}
	})
	// On-link, unknown to the kernel: the Resolver ARPed for it itself.
	if hop := waitResolved(onLink, bedMACB); hop.Via.IsValid() || hop.Ifindex != vipd0.Index {
		t.Errorf("NextHop(%v) = %+v, want on-link on %d", onLink, hop, vipd0.Index)
	}
	// Proof it was our ARP: B learned A from the request, while A's
	// kernel, which asked nothing, still has no entry for B.
	waitNeigh(t, bed.b, bed.ifB, "198.18.0.1", "lladdr "+bedMACA, nil)
	if got := neigh(t, bed.a, bed.ifA, peerB.String()); got != "" {
		t.Errorf("A's kernel learned B (%q): the answer may not be the Resolver's own", got)
	}
	// Routed: the gateway's MAC, from the kernel's table or the wire.
	if hop := waitResolved(viaStatic, gwMAC); hop.Via != netip.MustParseAddr("198.18.0.254") {
		t.Errorf("NextHop(%v) = %+v, want via 198.18.0.254", viaStatic, hop)
	}
	if hop := waitResolved(viaB, bedMACB); hop.Via != peerB || hop.MTU != 1400 {
		t.Errorf("NextHop(%v) = %+v, want via %v with route MTU 1400", viaB, hop, peerB)
	}
	waitResolved(peer6, bedMACB) // Neighbor Solicitation
	for _, v6 := range []bool{false, true} {
		mac, ifindex, ok := r.Gateway(v6)
		if !ok || netHW(mac).String() != bedMACB || ifindex != vipd0.Index {
			t.Errorf("Gateway(v6=%v) = %v, %d, %v; want %s, %d", v6, netHW(mac), ifindex, ok, bedMACB, vipd0.Index)
		}
	}

	// A refresh reports a change in the kernel's table.
	nstest.Must(t, "ip", "-n", bed.a.Name, "neigh", "replace", "198.18.0.254", "lladdr", gwMAC2, "dev", bed.ifA, "nud", "permanent")
	waitResolved(viaStatic, gwMAC2)
}

func TestPrivilegedLinks(t *testing.T) {
	bed := newTestBed(t)
	var (
		l        linkwatch.Link
		prefixes []netip.Prefix
		errs     [3]error
	)
	do(t, bed.a, func() {
		l, errs[0] = linkwatch.Read(bed.ifA)
		prefixes, errs[1] = OnLinkPrefixes(bed.ifA)
		_, errs[2] = linkwatch.Read("nope0")
	})
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("linkwatch.Read: %v; OnLinkPrefixes: %v", errs[0], errs[1])
	}
	if !errors.Is(errs[2], linkwatch.ErrNotFound) {
		t.Errorf("linkwatch.Read(nope0) = %v, want linkwatch.ErrNotFound", errs[2])
	}
	if l.Name != bed.ifA || l.Index == 0 || l.MTU != 1500 || l.MAC != bed.macA {
		t.Errorf("linkwatch.Read = %+v, want %s, MTU 1500, MAC %s", l, bed.ifA, bedMACA)
	}
	for _, p := range []string{"198.18.0.1/24", "2001:2::1/64"} {
		if !slices.Contains(l.Addrs, netip.MustParsePrefix(p)) {
			t.Errorf("Addrs %v lack %s", l.Addrs, p)
		}
	}
	for _, p := range []string{"198.18.0.0/24", "2001:2::/64"} {
		if !slices.Contains(prefixes, netip.MustParsePrefix(p)) {
			t.Errorf("OnLinkPrefixes %v lack %s", prefixes, p)
		}
	}

	// linkwatch.Watch, as the platform runs it next to the responder: the current state, then an MTU change and an address.
	got := make(chan linkwatch.Link, 100)
	runIn(t, bed.a, func(ctx context.Context) error {
		return linkwatch.Watch(ctx, []string{bed.ifA}, func(l linkwatch.Link) { got <- l })
	})
	next := func(what string, ok func(linkwatch.Link) bool) linkwatch.Link {
		t.Helper()
		deadline := time.After(wait)
		for {
			select {
			case l := <-got:
				if ok(l) {
					return l
				}
			case <-deadline:
				t.Fatalf("linkwatch.Watch did not report %s within %v", what, wait)
			}
		}
	}
	next("the initial state", func(l linkwatch.Link) bool { return l.MTU == 1500 })
	nstest.Must(t, "ip", "-n", bed.a.Name, "link", "set", bed.ifA, "mtu", "1400")
	if l := next("MTU 1400", func(l linkwatch.Link) bool { return l.MTU == 1400 }); l.MAC != bed.macA {
		t.Errorf("after the MTU change: %+v", l)
	}
	nstest.Must(t, "ip", "-n", bed.a.Name, "addr", "add", "198.18.0.9/24", "dev", bed.ifA)
	next("the new address", func(l linkwatch.Link) bool { return slices.Contains(l.Addrs, netip.MustParsePrefix("198.18.0.9/24")) })
}

// TestPrivilegedNDPSocket checks the NDP filter against the kernel's real
// frames: the socket sees B's kernel's solicitation for an address, with the
// group joined.
func TestPrivilegedNDPSocket(t *testing.T) {
	bed := newTestBed(t)
	target := netip.MustParseAddr("2001:2::77")
	seen := make(chan ndpMessage, 1)
	stop := make(chan struct{})
	var join func()
	ready := make(chan error, 1)
	join = start(t, bed.a, func() {
		ifi, err := net.InterfaceByName(bed.ifA)
		if err != nil {
			ready <- err
			return
		}
		c, err := listenPacket(ifi.Index, etherTypeIPv6, ndpFilter(icmpv6TypeNS))
		if err != nil {
			ready <- err
			return
		}
		defer c.Close()
		if err := c.JoinMulticast(multicastMAC(solicitedNode(target))); err != nil {
			ready <- err
			return
		}
		ready <- nil
		go func() { <-stop; c.Close() }()
		b := make([]byte, maxFrameLen)
		for {
			n, err := c.ReadFrame(b)
			if err != nil {
				return
			}
			m, err := parseNDP(b[:n])
			if err != nil {
				t.Errorf("the NS filter let through a frame parseNDP rejects: %v", err)
				continue
			}
			if ns, ok := m.msg.(*ndp.NeighborSolicitation); ok && ns.TargetAddress == target {
				seen <- m
				return
			}
		}
	})
	defer join()
	defer close(stop)
	if err := <-ready; err != nil {
		t.Fatal(err)
	}
	udpPoke(t, bed, target)
	select {
	case m := <-seen:
		if m.src != netip.MustParseAddr("2001:2::2") || m.dst != solicitedNode(target) || m.ethSrc != bed.macB {
			t.Errorf("NS %v → %v from %v", m.src, m.dst, netHW(m.ethSrc))
		}
	case <-time.After(wait):
		t.Fatal("B's kernel's solicitation never reached the socket")
	}
}
