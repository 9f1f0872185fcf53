package arp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket/layers"
	"github.com/mdlayher/ndp"

	"github.com/vipd/vipd/testing/testkit"
)

const (
	testIfindex = 7
	// wait bounds every wait for something that should happen: it ends
	// early when it does, so it can be generous enough for a machine
	// whose CPUs are busy with other work.
	wait = 30 * time.Second
)

var (
	vip4   = netip.MustParseAddr("198.18.0.100")
	vip6   = netip.MustParseAddr("2001:2::100")
	other4 = netip.MustParseAddr("198.18.0.200")
	peer4  = netip.MustParseAddr("198.18.0.2")
	peer6  = netip.MustParseAddr("2001:2::2")
)

// responderHarness runs a Responder on a fakeNet and stops it at cleanup.
type responderHarness struct {
	r    *Responder
	net  *fakeNet
	done chan error
}

// testInterval replaces the RFC announcement intervals in most tests.
const testInterval = 100 * time.Millisecond

func startResponder(t *testing.T, vips ...netip.Addr) *responderHarness {
	t.Helper()
	return startResponderWith(t, nil, vips...)
}

// startResponderWith lets setup adjust the Responder before Run starts.
func startResponderWith(t *testing.T, setup func(*Responder), vips ...netip.Addr) *responderHarness {
	t.Helper()
	r, err := NewResponder(&net.Interface{Index: testIfindex, Name: "vipd0", HardwareAddr: macA[:]}, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := newFakeNet()
	r.listen = n.listen
	// One announcement per VIP unless a test asks for the schedule, so that
	// repeats never interleave with what a test waits for.
	r.interval4, r.interval6 = time.Hour, time.Hour
	if setup != nil {
		setup(r)
	}
	r.SetVIPs(vips)
	h := &responderHarness{r: r, net: n, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { h.done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-h.done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(wait):
			t.Errorf("Run did not return within %v of cancel", wait)
		}
		if open := n.openConns(); open != 0 {
			t.Errorf("%d sockets left open after Run", open)
		}
	})
	// Run has opened both sockets once the VIPs' first announcements went
	// out; drain them so that tests see only what they cause.
	for range vips {
		n.next(t, wait)
	}
	return h
}

// Markers for the barriers below: a host that asks, and VIPs that are set
// only to be asked for or announced.
var (
	askerMAC = mustMAC("02:00:5e:00:00:0d")
	asker4   = netip.MustParseAddr("198.18.0.3")
	asker6   = netip.MustParseAddr("2001:2::3")
	marker1  = netip.MustParseAddr("198.18.0.201")
	marker2  = netip.MustParseAddr("198.18.0.202")
)

// A test that something did not happen waits for a later event that
// could only come after it, never for time to pass: the Responder's
// goroutines (one reader per socket, one announcer) each send in order,
// so a frame one of them sends after the event proves the event's frames,
// if any, were sent before.

// until returns the frames sent before the first one that is reports true for,
// which it consumes.
func (h *responderHarness) until(t *testing.T, is func([]byte) bool) [][]byte {
	t.Helper()
	var before [][]byte
	for {
		f := h.net.next(t, wait).frame
		if is(f) {
			return before
		}
		before = append(before, f)
	}
}

// syncARP returns once the ARP reader has handled every frame delivered
// before the call, with the frames sent meanwhile: it asks for vip (which
// must be set) from askerMAC and waits for the answer. The reader answers a
// frame before it reads the next.
func (h *responderHarness) syncARP(t *testing.T, vip netip.Addr) [][]byte {
	t.Helper()
	h.net.deliver(testIfindex, arpFrame(broadcastMAC, arpRequest, askerMAC, asker4, [6]byte{}, vip))
	return h.until(t, func(f []byte) bool {
		m, err := parseARP(f)
		return err == nil && m.op == arpReply && m.targetMAC == askerMAC && m.senderIP == vip
	})
}

// syncNDP is syncARP for the NDP reader: a Neighbor Solicitation for vip,
// an IPv6 VIP that is set.
func (h *responderHarness) syncNDP(t *testing.T, vip netip.Addr) [][]byte {
	t.Helper()
	h.net.deliver(testIfindex, gopacketNS(t, askerMAC, asker6, solicitedNode(vip), vip, 255, askerMAC[:]))
	return h.until(t, func(f []byte) bool {
		m, err := parseNDP(f)
		if err != nil {
			return false
		}
		na, ok := m.msg.(*ndp.NeighborAdvertisement)
		return ok && na.Solicited && na.TargetAddress == vip && m.dst == asker6
	})
}

// sync returns once the ARP reader has handled every frame delivered
// before the call and the announcer has sent every announcement due up to
// testInterval after it (the Responder must run with shortIntervals), with
// the frames sent meanwhile other than the markers'. It sets the VIPs to
// vips plus marker1, asks for marker1, and waits for marker1's second
// announcement, which the announcer sends in a pass at least testInterval
// later together with whatever else is due by then; adding marker2 then
// makes a later pass, whose announcement of marker2 ends the wait. The
// VIPs are vips again when it returns.
func (h *responderHarness) sync(t *testing.T, vips ...netip.Addr) [][]byte {
	t.Helper()
	if h.r.interval4 != testInterval {
		t.Fatalf("sync needs shortIntervals")
	}
	announces := func(vip netip.Addr) func([]byte) bool {
		return func(f []byte) bool {
			m, err := parseARP(f)
			return err == nil && m.op == arpRequest && m.senderIP == vip && m.targetIP == vip
		}
	}
	h.r.SetVIPs(append(slices.Clone(vips), marker1))
	var other [][]byte
	n := 0
	keep := func(fs ...[]byte) {
		for _, f := range fs {
			if announces(marker1)(f) {
				n++
			} else {
				other = append(other, f)
			}
		}
	}
	keep(h.syncARP(t, marker1)...)
	for n < announceNum4 {
		keep(h.net.next(t, wait).frame)
	}
	h.r.SetVIPs(append(slices.Clone(vips), marker1, marker2))
	keep(h.until(t, announces(marker2))...)
	h.r.SetVIPs(vips)
	if n != announceNum4 {
		t.Errorf("marker1 announced %d times, want %d", n, announceNum4)
	}
	return other
}

// noFrames fails the test if frames is not empty.
func noFrames(t *testing.T, frames [][]byte, what string) {
	t.Helper()
	for _, f := range frames {
		t.Errorf("%s: unexpected frame % x", what, f)
	}
}

// wantStats waits until the Responder's counters are want. A counter is
// bumped after its frame is written, so it may lag what a test saw; it
// never goes back, so a count that overshoots fails.
func wantStats(t *testing.T, r *Responder, want ResponderStats) {
	t.Helper()
	if !testkit.Poll(wait, func() bool { return r.Stats() == want }) {
		t.Errorf("Stats = %+v, want %+v", r.Stats(), want)
	}
}

func isAnnouncement(f []byte) bool {
	if m, err := parseARP(f); err == nil {
		return m.op == arpRequest && m.senderIP == m.targetIP
	}
	if m, err := parseNDP(f); err == nil {
		return m.dst == allNodes
	}
	return false
}

func TestResponderAnswersARPForVIPOnly(t *testing.T) {
	h := startResponder(t, vip4)
	// A request for another address, then one for the VIP: the single reader
	// handles them in order, so the first reply proves the first was ignored.
	h.net.deliver(testIfindex, arpFrame(broadcastMAC, arpRequest, macB, peer4, [6]byte{}, other4))
	h.net.deliver(testIfindex, arpFrame(broadcastMAC, arpRequest, macB, peer4, [6]byte{}, vip4))
	f := h.net.nextWhere(t, wait, func(f []byte) bool { return !isAnnouncement(f) })
	// RFC 826: to the requester, from us, sender = (our MAC, VIP), target = requester.
	checkARP(t, f, macB, arpReply, macA, vip4, macB, peer4)
	noFrames(t, h.syncARP(t, vip4), "after the reply")
	// The two requests, one reply, and syncARP's.
	wantStats(t, h.r, ResponderStats{Requests: 3, Replies: 2, Announcements: 1})
}

func TestResponderIgnores(t *testing.T) {
	h := startResponder(t, vip4)
	for name, f := range map[string][]byte{
		"our own request (looped back)": arpFrame(broadcastMAC, arpRequest, macA, peer4, [6]byte{}, vip4),
		"reply for a non-VIP":           arpFrame(macA, arpReply, macB, peer4, macA, other4),
		"request from a broadcast MAC":  arpFrame(broadcastMAC, arpRequest, broadcastMAC, peer4, [6]byte{}, vip4),
		"request from a multicast MAC":  arpFrame(broadcastMAC, arpRequest, mustMAC("01:00:5e:00:00:01"), peer4, [6]byte{}, vip4),
		"truncated":                     arpFrame(broadcastMAC, arpRequest, macB, peer4, [6]byte{}, vip4)[:30],
		"non-ARP EtherType on ARP socket": func() []byte {
			f := arpFrame(broadcastMAC, arpRequest, macB, peer4, [6]byte{}, vip4)
			binary.BigEndian.PutUint16(f[12:], 0x0800)
			return f
		}(),
	} {
		// Deliver straight to the ARP conn: the fake net routes by EtherType.
		t.Log("delivering:", name)
		h.net.mu.Lock()
		for _, c := range h.net.conns {
			if c.etherType == etherTypeARP {
				c.in <- f
			}
		}
		h.net.mu.Unlock()
	}
	noFrames(t, h.syncARP(t, vip4), "answered")
	// Nothing counted but syncARP's request and reply.
	wantStats(t, h.r, ResponderStats{Requests: 1, Replies: 1, Announcements: 1})
}

func TestResponderAnswersARPProbe(t *testing.T) {
	h := startResponder(t, vip4)
	// RFC 5227 §2.1.1: a host probing for our VIP asks from 0.0.0.0; the
	// answer tells it the address is taken.
	h.net.deliver(testIfindex, arpFrame(broadcastMAC, arpRequest, macB, netip.IPv4Unspecified(), [6]byte{}, vip4))
	f := h.net.nextWhere(t, wait, func(f []byte) bool { return !isAnnouncement(f) })
	checkARP(t, f, macB, arpReply, macA, vip4, macB, netip.IPv4Unspecified())
}

func TestResponderAnnouncesNewVIPs(t *testing.T) {
	h := startResponder(t)
	h.r.SetVIPs([]netip.Addr{vip4})
	f := h.net.next(t, wait).frame
	checkARP(t, f, broadcastMAC, arpRequest, macA, vip4, [6]byte{}, vip4)

	// Setting the same VIP again, or adding a second, does not re-announce
	// the first.
	h.r.SetVIPs([]netip.Addr{vip4, netip.MustParseAddr("::ffff:198.18.0.101")})
	f = h.net.next(t, wait).frame
	checkARP(t, f, broadcastMAC, arpRequest, macA, netip.MustParseAddr("198.18.0.101"), [6]byte{}, netip.MustParseAddr("198.18.0.101"))

	h.r.SetVIPs([]netip.Addr{vip6})
	f = h.net.nextWhere(t, wait, func(f []byte) bool { _, err := parseNDP(f); return err == nil })
	eth, ip, p := decodeNDP(t, f)
	na := p.Layer(layers.LayerTypeICMPv6NeighborAdvertisement).(*layers.ICMPv6NeighborAdvertisement)
	if !bytes.Equal(eth.DstMAC, []byte{0x33, 0x33, 0, 0, 0, 1}) || !ip.DstIP.Equal(net.ParseIP("ff02::1")) ||
		!na.TargetAddress.Equal(vip6.AsSlice()) || na.Solicited() || !na.Override() {
		t.Errorf("unsolicited NA: %v → %v target %v S=%v O=%v", eth.DstMAC, ip.DstIP, na.TargetAddress, na.Solicited(), na.Override())
	}
	wantStats(t, h.r, ResponderStats{Announcements: 3})
}

func TestResponderAnnouncementSchedule(t *testing.T) {
	// The RFC values (RFC 5227 §1.1; RFC 4861 §10 and §7.2.6).
	if announceNum4 != 2 || announceInterval4 != 2*time.Second || announceNum6 != 3 || announceInterval6 != time.Second || defendInterval != 10*time.Second {
		t.Error("announcement constants differ from RFC 5227 / RFC 4861")
	}
	h := startResponderWith(t, shortIntervals)
	for _, c := range []struct {
		vip netip.Addr
		n   int
	}{{vip4, announceNum4}, {vip6, announceNum6}} {
		start := time.Now()
		h.r.SetVIPs([]netip.Addr{c.vip})
		for i := range c.n {
			f := h.net.next(t, wait).frame
			if !isAnnouncement(f) {
				t.Fatalf("%v: frame %d is not an announcement", c.vip, i)
			}
			if min := time.Duration(i) * testInterval; time.Since(start) < min-10*time.Millisecond {
				t.Errorf("%v: announcement %d after %v, want ≥ %v", c.vip, i, time.Since(start), min)
			}
		}
		noFrames(t, h.sync(t, c.vip), fmt.Sprintf("%v after its %d announcements", c.vip, c.n))
	}
}

func TestResponderAnnouncesVIPsSetBeforeRun(t *testing.T) {
	// startResponder sets the VIPs before Run and waits for one frame per
	// VIP; check they are the announcements.
	r, err := NewResponder(&net.Interface{Index: testIfindex, Name: "vipd0", HardwareAddr: macA[:]}, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := newFakeNet()
	r.listen = n.listen
	r.SetVIPs([]netip.Addr{vip4, vip6})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	got := map[bool]bool{}
	for range 2 {
		f := n.next(t, wait).frame
		if !isAnnouncement(f) {
			t.Fatalf("first frames should be announcements: % x", f)
		}
		_, err := parseARP(f)
		got[err == nil] = true
	}
	if !got[true] || !got[false] {
		t.Errorf("announced families %v, want both", got)
	}
}

func shortIntervals(r *Responder) { r.interval4, r.interval6 = testInterval, testInterval }

func TestResponderRemovedVIPIsNotAnnouncedOrAnswered(t *testing.T) {
	h := startResponderWith(t, shortIntervals, vip4)
	h.r.SetVIPs(nil)
	h.net.deliver(testIfindex, arpFrame(broadcastMAC, arpRequest, macB, peer4, [6]byte{}, vip4))
	// Neither a reply nor the second announcement, due testInterval after
	// the first.
	noFrames(t, h.sync(t), "a removed VIP")
}

func TestResponderAnswersNeighborSolicitation(t *testing.T) {
	h := startResponder(t, vip6)
	// With a source link-layer option the answer goes to that MAC, which
	// may differ from the Ethernet source (a proxy, a bridge).
	ns := gopacketNS(t, macC, peer6, solicitedNode(vip6), vip6, 255, macB[:])
	h.net.deliver(testIfindex, ns)
	f := h.net.nextWhere(t, wait, func(f []byte) bool { return !isAnnouncement(f) })
	eth, ip, p := decodeNDP(t, f)
	na := p.Layer(layers.LayerTypeICMPv6NeighborAdvertisement).(*layers.ICMPv6NeighborAdvertisement)
	if !bytes.Equal(eth.DstMAC, macB[:]) || !bytes.Equal(eth.SrcMAC, macA[:]) {
		t.Errorf("Ethernet %v → %v, want %v → %v", eth.SrcMAC, eth.DstMAC, net.HardwareAddr(macA[:]), net.HardwareAddr(macB[:]))
	}
	if !ip.SrcIP.Equal(vip6.AsSlice()) || !ip.DstIP.Equal(peer6.AsSlice()) {
		t.Errorf("IPv6 %v → %v, want %v → %v", ip.SrcIP, ip.DstIP, vip6, peer6)
	}
	if !na.TargetAddress.Equal(vip6.AsSlice()) || !na.Solicited() || !na.Override() || na.Router() {
		t.Errorf("NA target %v S=%v O=%v R=%v", na.TargetAddress, na.Solicited(), na.Override(), na.Router())
	}
	if got := optionMAC(na.Options, layers.ICMPv6OptTargetAddress); !bytes.Equal(got, macA[:]) {
		t.Errorf("target link-layer option %x, want %x", got, macA)
	}

	// Without the option (unicast NUD probe), to the Ethernet source.
	h.net.deliver(testIfindex, gopacketNS(t, macC, peer6, vip6, vip6, 255, nil))
	f = h.net.nextWhere(t, wait, func(f []byte) bool { return !isAnnouncement(f) })
	if eth, _, _ := decodeNDP(t, f); !bytes.Equal(eth.DstMAC, macC[:]) {
		t.Errorf("NUD answer to %v, want %v", eth.DstMAC, net.HardwareAddr(macC[:]))
	}

	// For an address that is not a VIP, nothing.
	h.net.deliver(testIfindex, gopacketNS(t, macB, peer6, solicitedNode(peer6), netip.MustParseAddr("2001:2::200"), 255, macB[:]))
	noFrames(t, h.syncNDP(t, vip6), "a non-VIP solicited")
	// Three solicitations, two answered, and syncNDP's.
	wantStats(t, h.r, ResponderStats{Requests: 4, Replies: 3, Announcements: 1})
}

func TestResponderDefendsAgainstDAD(t *testing.T) {
	h := startResponder(t, vip6)
	// Another node runs duplicate address detection for our VIP: answer to
	// all nodes, unsolicited (RFC 4861 §7.2.4).
	h.net.deliver(testIfindex, gopacketNS(t, macB, netip.IPv6Unspecified(), solicitedNode(vip6), vip6, 255, nil))
	f := h.net.next(t, wait).frame
	eth, ip, p := decodeNDP(t, f)
	na := p.Layer(layers.LayerTypeICMPv6NeighborAdvertisement).(*layers.ICMPv6NeighborAdvertisement)
	if !ip.DstIP.Equal(net.ParseIP("ff02::1")) || !bytes.Equal(eth.DstMAC, []byte{0x33, 0x33, 0, 0, 0, 1}) || na.Solicited() {
		t.Errorf("DAD answer %v → %v S=%v, want all-nodes, unsolicited", eth.DstMAC, ip.DstIP, na.Solicited())
	}
	if s := h.r.Stats(); s.Conflicts != 1 {
		t.Errorf("Stats = %+v, want 1 conflict", s)
	}
}

func TestResponderDefendsVIPOncePerInterval(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	h := startResponderWith(t, func(r *Responder) {
		r.clock = clock
	}, vip4)

	// Another host announces our VIP: defend with one announcement
	// (RFC 5227 §2.4 (b)) ...
	h.net.deliver(testIfindex, arpAnnouncement(macB, vip4))
	checkARP(t, h.net.next(t, wait).frame, broadcastMAC, arpRequest, macA, vip4, [6]byte{}, vip4)
	// ... but not again within DEFEND_INTERVAL, even to a reply claiming it.
	h.net.deliver(testIfindex, arpFrame(macA, arpReply, macB, vip4, macA, peer4))
	noFrames(t, h.syncARP(t, vip4), "a second defence within DEFEND_INTERVAL")
	advance(defendInterval)
	h.net.deliver(testIfindex, arpFrame(macA, arpReply, macB, vip4, macA, peer4))
	checkARP(t, h.net.next(t, wait).frame, broadcastMAC, arpRequest, macA, vip4, [6]byte{}, vip4)
	// The announcement claiming the VIP and syncARP's request; three
	// conflicts, two defences after the first announcement; syncARP's reply.
	wantStats(t, h.r, ResponderStats{Requests: 2, Replies: 1, Announcements: 3, Conflicts: 3})
}

// TestResponderForgetsRemovedVIPs: the time of a VIP's last defence goes
// with the VIP, so that the record does not grow with every VIP a box
// ever defended over its reloads.
func TestResponderForgetsRemovedVIPs(t *testing.T) {
	h := startResponder(t, vip4, vip6)
	h.net.deliver(testIfindex, arpAnnouncement(macB, vip4))
	checkARP(t, h.net.next(t, wait).frame, broadcastMAC, arpRequest, macA, vip4, [6]byte{}, vip4)
	guarded := func() int {
		h.r.mu.Lock()
		defer h.r.mu.Unlock()
		return len(h.r.lastGuard)
	}
	if n := guarded(); n != 1 {
		t.Fatalf("after one defence, %d VIPs have a last defence, want 1", n)
	}
	h.r.SetVIPs([]netip.Addr{vip6})
	if n := guarded(); n != 0 {
		t.Errorf("after its VIP was removed, %d VIPs have a last defence, want 0", n)
	}
}

func TestResponderMulticastMembership(t *testing.T) {
	h := startResponder(t, vip6)
	ndpConn := func() *fakeConn {
		h.net.mu.Lock()
		defer h.net.mu.Unlock()
		for _, c := range h.net.conns {
			if c.etherType == etherTypeIPv6 {
				return c
			}
		}
		t.Fatal("no NDP socket")
		return nil
	}()
	snmMAC := multicastMAC(solicitedNode(vip6))
	testkit.Eventually(t, wait, "join of the VIP's solicited-node group", func() bool { return ndpConn.groups()[snmMAC] == 1 })

	// A second VIP with the same low 24 bits shares the group: one join.
	twin := netip.MustParseAddr("2001:2:0:1::100")
	h.r.SetVIPs([]netip.Addr{vip6, twin})
	h.net.next(t, wait) // twin's announcement
	if g := ndpConn.groups(); g[snmMAC] != 1 || len(g) != 1 {
		t.Errorf("groups = %v, want one membership", g)
	}
	h.r.SetVIPs([]netip.Addr{vip4})
	testkit.Eventually(t, wait, "leave of the group when no IPv6 VIP is left", func() bool { return len(ndpConn.groups()) == 0 })
}

func TestResponderRunErrors(t *testing.T) {
	r, err := NewResponder(&net.Interface{Index: testIfindex, Name: "vipd0", HardwareAddr: macA[:]}, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := newFakeNet()
	n.failOn = map[int]error{testIfindex: errors.New("operation not permitted")}
	r.listen = n.listen
	if err := r.Run(context.Background()); err == nil {
		t.Error("Run with a failing socket returned nil")
	}

	if _, err := NewResponder(&net.Interface{Index: 1, Name: "tun0"}, nil); err == nil {
		t.Error("NewResponder accepted an interface without a MAC")
	}
	if _, err := NewResponder(nil, nil); err == nil {
		t.Error("NewResponder accepted nil")
	}
}

func TestResponderRunTwice(t *testing.T) {
	h := startResponder(t, vip4)
	if err := h.r.Run(context.Background()); err == nil {
		t.Error("second concurrent Run returned nil")
	}
}

func TestResponderReannouncesOnRestart(t *testing.T) {
	r, err := NewResponder(&net.Interface{Index: testIfindex, Name: "vipd0", HardwareAddr: macA[:]}, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := newFakeNet()
	r.listen = n.listen
	r.interval4 = time.Hour
	r.SetVIPs([]netip.Addr{vip4})
	for run := range 2 {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		if f := n.next(t, wait).frame; !isAnnouncement(f) {
			t.Errorf("run %d: first frame is not an announcement", run)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
	}
	if open := n.openConns(); open != 0 {
		t.Errorf("%d sockets left open", open)
	}
}

// TestResponderNewMAC: when the interface's MAC changes, every VIP is
// announced again with the new one, and requests are answered with it; it
// used to answer with the MAC it was made with, which the NIC no longer
// accepts.
func TestResponderNewMAC(t *testing.T) {
	h := startResponder(t, vip4) // which takes the announcement at Run
	h.r.SetMAC(macC)
	checkARP(t, h.net.next(t, wait).frame, broadcastMAC, arpRequest, macC, vip4, [6]byte{}, vip4)
	h.net.deliver(testIfindex, arpFrame(broadcastMAC, arpRequest, macB, peer4, [6]byte{}, vip4))
	f := h.net.nextWhere(t, wait, func(f []byte) bool { return !isAnnouncement(f) })
	checkARP(t, f, macB, arpReply, macC, vip4, macB, peer4)
	h.r.SetMAC(macC) // the same again: nothing to announce
	noFrames(t, h.syncARP(t, vip4), "after setting the same MAC")
}
