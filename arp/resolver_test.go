package arp

import (
	"context"
	"errors"
	"golang.org/x/net/bpf"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mdlayher/ndp"
	"golang.org/x/sys/unix"

	"github.com/vipd/vipd/internal/linkwatch"
	"github.com/vipd/vipd/testing/testkit"
)

const eth0 = 2

var (
	hostLink = linkwatch.Link{Index: eth0, Name: "eth0", MAC: macA, MTU: 1500, Addrs: []netip.Prefix{
		netip.MustParsePrefix("198.18.0.1/24"),
		netip.MustParsePrefix("2001:2::1/64"),
		netip.MustParsePrefix("fe80::a/64"),
	}}
	src4     = netip.MustParseAddr("198.18.0.1")
	src6     = netip.MustParseAddr("2001:2::1")
	gwRouted = netip.MustParseAddr("198.18.0.254")
	gwV4     = netip.MustParseAddr("198.18.0.2")
	gwV6     = netip.MustParseAddr("fe80::fe")
)

// testKernel is a host with one Ethernet link, its connected subnets, a
// routed backend prefix through gwRouted, and default routes.
func testKernel() *fakeKernel {
	return &fakeKernel{
		links: []linkwatch.Link{hostLink},
		local: []netip.Addr{src4, src6},
		routes: []route{
			{Dst: netip.MustParsePrefix("198.18.0.0/24"), Type: unix.RTN_UNICAST, Ifindex: eth0, Src: src4},
			{Dst: netip.MustParsePrefix("198.19.0.0/16"), Type: unix.RTN_UNICAST, Ifindex: eth0, Gateway: gwRouted, Src: src4, MTU: 1400},
			{Dst: netip.MustParsePrefix("0.0.0.0/0"), Type: unix.RTN_UNICAST, Ifindex: eth0, Gateway: gwV4, Priority: 100},
			{Dst: netip.MustParsePrefix("0.0.0.0/0"), Type: unix.RTN_UNICAST, Ifindex: eth0, Gateway: netip.MustParseAddr("198.18.0.3"), Priority: 200},
			{Dst: netip.MustParsePrefix("2001:2::/64"), Type: unix.RTN_UNICAST, Ifindex: eth0},
			{Dst: netip.MustParsePrefix("fe80::/64"), Type: unix.RTN_UNICAST, Ifindex: eth0},
			{Dst: netip.MustParsePrefix("::/0"), Type: unix.RTN_UNICAST, Ifindex: eth0, Gateway: gwV6},
		},
	}
}

// peers answers ARP requests and Neighbor Solicitations for the addresses in
// its table, as hosts on the fake link would.
type peers struct {
	mu    sync.Mutex
	macs  map[netip.Addr][6]byte
	asked map[netip.Addr]int
}

func newPeers() *peers { return &peers{macs: map[netip.Addr][6]byte{}, asked: map[netip.Addr]int{}} }

func (p *peers) set(a netip.Addr, mac [6]byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.macs[a] = mac
}

func (p *peers) count(a netip.Addr) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.asked[a]
}

func (p *peers) answer(_ int, f []byte) [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m, err := parseARP(f); err == nil && m.op == arpRequest {
		p.asked[m.targetIP]++
		if mac, ok := p.macs[m.targetIP]; ok {
			return [][]byte{arpFrame(m.senderMAC, arpReply, mac, m.targetIP, m.senderMAC, m.senderIP)}
		}
		return nil
	}
	m, err := parseNDP(f)
	if err != nil {
		return nil
	}
	ns, ok := m.msg.(*ndp.NeighborSolicitation)
	if !ok {
		return nil
	}
	p.asked[ns.TargetAddress]++
	mac, ok := p.macs[ns.TargetAddress]
	if !ok {
		return nil
	}
	a, err := ndpFrame(mac, m.ethSrc, ns.TargetAddress, m.src, &ndp.NeighborAdvertisement{
		Solicited: true, Override: true, TargetAddress: ns.TargetAddress,
		Options: []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Target, Addr: mac[:]}},
	})
	if err != nil {
		panic(err)
	}
	return [][]byte{a}
}

type resolverHarness struct {
	r       *Resolver
	k       *fakeKernel
	net     *fakeNet
	peers   *peers
	changes chan struct{}
	nChange atomic.Int64
	markers int // addresses settle used
}

// newResolverHarness returns a Resolver wired to a fake kernel and link;
// start runs it.
func newResolverHarness(t *testing.T, refresh time.Duration) *resolverHarness {
	t.Helper()
	h := &resolverHarness{k: testKernel(), net: newFakeNet(), peers: newPeers(), changes: make(chan struct{}, 100)}
	h.net.peer = h.peers.answer
	h.r = NewResolver(nil, refresh)
	h.r.dial = func() (kernel, error) { return h.k, nil }
	h.r.listen = h.net.listen
	h.r.wait = silentWait
	return h
}

// silentWait is the harness's probe wait: a round that asks a silent peer
// lasts its tries' waits, which a short wait keeps short.
const silentWait = 30 * time.Millisecond

// answeredRounds makes every round end on its answers rather than on its
// waits: the default gateways, which each round asks for besides the
// targets, answer too, and a try waits up to wait. A test that counts the
// tries of a peer that answers needs it: an answer counts once the round's
// reader has taken it, which a busy machine can delay past silentWait,
// and the round would ask again.
func (h *resolverHarness) answeredRounds() {
	h.peers.set(gwV4, macC)
	h.peers.set(gwV6, macC)
	h.r.wait = wait
}

func (h *resolverHarness) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- h.r.Run(ctx, func() {
			h.nChange.Add(1)
			h.changes <- struct{}{}
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(wait):
			t.Errorf("Run did not return within %v of cancel", wait)
		}
		if open := h.net.openConns(); open != 0 {
			t.Errorf("%d probe sockets left open", open)
		}
		if !h.k.closed {
			t.Error("rtnetlink conn not closed")
		}
	})
}

func (h *resolverHarness) changed(t *testing.T) {
	t.Helper()
	select {
	case <-h.changes:
	case <-time.After(wait):
		t.Fatalf("onChange not called within %v", wait)
	}
}

func (h *resolverHarness) lookup(t *testing.T, a netip.Addr, want [6]byte) {
	t.Helper()
	got, ok := h.r.Lookup(a)
	if !ok || got != want {
		t.Errorf("Lookup(%v) = %v, %v; want %v, true", a, macString(got), ok, macString(want))
	}
}

// settle makes the Resolver run a round with targets plus a fresh address
// the fake kernel knows, and waits until that round has published it: then
// that round and every one before it are over, their frames sent. The
// round in progress, if any, must have read its targets already (rounds()
// counts it), so that settle's round is the next one and the last.
func (h *resolverHarness) settle(t *testing.T, targets ...netip.Addr) {
	t.Helper()
	h.markers++
	marker := netip.AddrFrom4([4]byte{198, 18, 0, byte(200 + h.markers)})
	h.k.setNeighbor(neighbor{Ifindex: eth0, Addr: marker, MAC: macC, State: unix.NUD_REACHABLE})
	h.r.SetTargets(append(slices.Clone(targets), marker))
	testkit.Eventually(t, wait, "a round with a new target", func() bool { _, ok := h.r.Lookup(marker); return ok })
}

func macString(m [6]byte) string { return netHW(m).String() }

func TestResolverUsesKernelNeighbor(t *testing.T) {
	h := newResolverHarness(t, time.Hour)
	backend := netip.MustParseAddr("198.18.0.5")
	h.k.setNeighbor(neighbor{Ifindex: eth0, Addr: backend, MAC: macB, State: unix.NUD_REACHABLE})
	h.k.setNeighbor(neighbor{Ifindex: eth0, Addr: gwV4, MAC: macC, State: unix.NUD_PERMANENT})
	h.k.setNeighbor(neighbor{Ifindex: eth0, Addr: gwV6, MAC: macC, State: unix.NUD_DELAY})
	h.r.SetTargets([]netip.Addr{backend})
	h.start(t)
	h.changed(t)

	h.lookup(t, backend, macB)
	if hop, _ := h.r.NextHop(backend); hop.Ifindex != eth0 || hop.Via.IsValid() || hop.MTU != 0 {
		t.Errorf("NextHop = %+v, want on-link on ifindex %d", hop, eth0)
	}
	// The kernel knew everything: nothing asked on the wire in the round
	// that just ended, the only one (refresh is an hour).
	h.net.none(t)
}

func TestResolverRoutedTargetUsesGateway(t *testing.T) {
	h := newResolverHarness(t, time.Hour)
	backend := netip.MustParseAddr("198.19.1.10")
	h.k.setNeighbor(neighbor{Ifindex: eth0, Addr: gwRouted, MAC: macC, State: unix.NUD_REACHABLE})
	h.r.SetTargets([]netip.Addr{backend})
	h.start(t)
	h.changed(t)

	h.lookup(t, backend, macC)
	hop, _ := h.r.NextHop(backend)
	if hop.Via != gwRouted || hop.MTU != 1400 || hop.Ifindex != eth0 {
		t.Errorf("NextHop = %+v, want via %v, MTU 1400", hop, gwRouted)
	}
	if h.peers.count(backend) != 0 {
		t.Error("asked for a routed backend's own address on the wire")
	}
}

func TestResolverARPsWhenKernelDoesNotKnow(t *testing.T) {
	h := newResolverHarness(t, time.Hour)
	h.answeredRounds()
	backend := netip.MustParseAddr("198.18.0.6")
	h.peers.set(backend, macB)
	h.r.SetTargets([]netip.Addr{backend})
	h.start(t)
	// The request: broadcast, from our MAC and the route's source address,
	// target MAC zero (RFC 826 leaves it unknown), target the backend.
	f := h.net.nextWhere(t, wait, func(f []byte) bool {
		m, err := parseARP(f)
		return err == nil && m.targetIP == backend
	})
	checkARP(t, f, broadcastMAC, arpRequest, macA, src4, [6]byte{}, backend)
	h.changed(t)
	h.lookup(t, backend, macB)
	if n := h.peers.count(backend); n != 1 {
		t.Errorf("asked %d times, want once (answered at once)", n)
	}
}

func TestResolverStaleAndFailedEntries(t *testing.T) {
	for _, tc := range []struct {
		name     string
		state    uint16
		answer   bool
		want     [6]byte
		resolved bool
	}{
		{"stale, answers with a new MAC", unix.NUD_STALE, true, macB, true},
		{"stale, silent: keep the stale MAC", unix.NUD_STALE, false, macC, true},
		{"failed, answers", unix.NUD_FAILED, true, macB, true},
		{"failed, silent", unix.NUD_FAILED, false, [6]byte{}, false},
		{"incomplete, silent", unix.NUD_INCOMPLETE, false, [6]byte{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newResolverHarness(t, time.Hour)
			backend := netip.MustParseAddr("198.18.0.7")
			mac := macC
			if tc.state != unix.NUD_STALE {
				mac = [6]byte{}
			}
			h.k.setNeighbor(neighbor{Ifindex: eth0, Addr: backend, MAC: mac, State: tc.state})
			if tc.answer {
				h.peers.set(backend, macB)
				h.answeredRounds()
			}
			h.r.SetTargets([]netip.Addr{backend})
			h.start(t)
			if tc.resolved {
				h.changed(t)
				h.lookup(t, backend, tc.want)
			} else {
				// An unanswered round publishes no change; a round
				// after it does, and asks for the backend again.
				testkit.Eventually(t, wait, "a probe", func() bool { return h.peers.count(backend) > 0 })
				h.settle(t, backend)
				if _, ok := h.r.Lookup(backend); ok {
					t.Error("Lookup found an address nobody answered for")
				}
			}
			if want := 1; tc.answer && h.peers.count(backend) != want {
				t.Errorf("asked %d times, want %d", h.peers.count(backend), want)
			}
			if want := probeTries * h.k.rounds(); !tc.answer && h.peers.count(backend) != want {
				t.Errorf("asked %d times in %d rounds, want %d", h.peers.count(backend), h.k.rounds(), want)
			}
		})
	}
}

func TestResolverIPv6NeighborSolicitation(t *testing.T) {
	h := newResolverHarness(t, time.Hour)
	h.answeredRounds()
	backend := netip.MustParseAddr("2001:2::2")
	h.peers.set(backend, macB)
	h.peers.set(gwV6, macC)
	h.r.SetTargets([]netip.Addr{backend})
	h.start(t)

	seen := map[netip.Addr]ndpMessage{}
	for len(seen) < 2 {
		f := h.net.next(t, wait).frame
		m, err := parseNDP(f)
		if err != nil {
			continue
		}
		seen[m.msg.(*ndp.NeighborSolicitation).TargetAddress] = m
	}
	// A global target is asked from the global address, a link-local one
	// (the default gateway) from the link-local address.
	for target, wantSrc := range map[netip.Addr]netip.Addr{backend: src6, gwV6: netip.MustParseAddr("fe80::a")} {
		m := seen[target]
		if m.src != wantSrc || m.dst != solicitedNode(target) {
			t.Errorf("NS for %v: %v → %v, want %v → %v", target, m.src, m.dst, wantSrc, solicitedNode(target))
		}
		if lla := linkLayerOption(m.msg.(*ndp.NeighborSolicitation).Options, ndp.Source); netHW(macA).String() != lla.String() {
			t.Errorf("NS for %v: source link-layer option %v", target, lla)
		}
	}
	h.changed(t)
	h.lookup(t, backend, macB)
	mac, ifindex, ok := h.r.Gateway(true)
	if !ok || mac != macC || ifindex != eth0 {
		t.Errorf("Gateway(v6) = %v, %d, %v; want %v, %d, true", macString(mac), ifindex, ok, macString(macC), eth0)
	}
}

func TestResolverGateway(t *testing.T) {
	h := newResolverHarness(t, time.Hour)
	if _, _, ok := h.r.Gateway(false); ok {
		t.Error("Gateway before any round reports ok")
	}
	// Two default routes: the one with the lower metric wins. The IPv6
	// gateway stays silent, so the round lasts all its tries: a second
	// each leaves the IPv4 answers time to be read.
	h.r.wait = time.Second
	h.peers.set(gwV4, macB)
	h.peers.set(netip.MustParseAddr("198.18.0.3"), macC)
	h.start(t)
	h.changed(t)
	mac, ifindex, ok := h.r.Gateway(false)
	if !ok || mac != macB || ifindex != eth0 {
		t.Errorf("Gateway(v4) = %v, %d, %v; want %v, %d, true", macString(mac), ifindex, ok, macString(macB), eth0)
	}
	if _, _, ok := h.r.Gateway(true); ok {
		t.Error("Gateway(v6) ok though fe80::fe never answered")
	}
}

func TestResolverUnreachableTargets(t *testing.T) {
	h := newResolverHarness(t, time.Hour)
	h.k.routes = h.k.routes[:2] // no default routes
	unroutable := netip.MustParseAddr("198.51.100.1")
	h.r.SetTargets([]netip.Addr{unroutable, src4})
	h.start(t)
	testkit.Eventually(t, wait, "a round", func() bool { return h.k.rounds() > 0 })
	h.settle(t, unroutable, src4)
	h.net.none(t)
	for _, a := range []netip.Addr{unroutable, src4} {
		if _, ok := h.r.Lookup(a); ok {
			t.Errorf("Lookup(%v) ok", a)
		}
	}
	if n := h.nChange.Load(); n != 1 {
		t.Errorf("onChange called %d times, want once (for settle's target)", n)
	}
}

func TestResolverRefreshReportsChanges(t *testing.T) {
	h := newResolverHarness(t, 20*time.Millisecond)
	backend := netip.MustParseAddr("198.18.0.5")
	h.k.setNeighbor(neighbor{Ifindex: eth0, Addr: backend, MAC: macB, State: unix.NUD_REACHABLE})
	h.r.SetTargets([]netip.Addr{backend})
	h.start(t)
	h.changed(t)
	h.lookup(t, backend, macB)

	// Several refreshes with nothing new: no call. A round that starts
	// proves the one before it over.
	r0 := h.k.rounds()
	testkit.Eventually(t, wait, "five more rounds", func() bool { return h.k.rounds() >= r0+5 })
	if n := h.nChange.Load(); n != 1 {
		t.Errorf("onChange called %d times without a change, want 1", n)
	}

	// The backend moves to another MAC (failover); a refresh reports it.
	h.k.setNeighbor(neighbor{Ifindex: eth0, Addr: backend, MAC: macC, State: unix.NUD_REACHABLE})
	h.changed(t)
	h.lookup(t, backend, macC)

	// It stops answering and the kernel marks it failed: it disappears.
	h.k.setNeighbor(neighbor{Ifindex: eth0, Addr: backend, State: unix.NUD_FAILED})
	h.changed(t)
	if _, ok := h.r.Lookup(backend); ok {
		t.Error("Lookup still answers for a failed neighbor")
	}
}

func TestResolverSetTargetsStartsARound(t *testing.T) {
	h := newResolverHarness(t, time.Hour)
	h.start(t)
	backend := netip.MustParseAddr("198.18.0.5")
	h.k.setNeighbor(neighbor{Ifindex: eth0, Addr: backend, MAC: macB, State: unix.NUD_REACHABLE})
	h.r.SetTargets([]netip.Addr{netip.MustParseAddr("::ffff:198.18.0.5")}) // mapped form counts as IPv4
	h.changed(t)
	h.lookup(t, backend, macB)

	h.r.SetTargets(nil)
	h.changed(t)
	if _, ok := h.r.Lookup(backend); ok {
		t.Error("Lookup answers for a removed target")
	}
}

func TestResolverKeepsAnswersWhenARoundFails(t *testing.T) {
	h := newResolverHarness(t, 20*time.Millisecond)
	backend := netip.MustParseAddr("198.18.0.5")
	h.k.setNeighbor(neighbor{Ifindex: eth0, Addr: backend, MAC: macB, State: unix.NUD_REACHABLE})
	h.r.SetTargets([]netip.Addr{backend})
	h.start(t)
	h.changed(t)
	h.k.mu.Lock()
	h.k.failNext = errors.New("netlink: no buffer space available")
	r0 := h.k.linkCalls
	h.k.mu.Unlock()
	// The failing round, and one after it, are over when a third starts.
	testkit.Eventually(t, wait, "three more rounds", func() bool { return h.k.rounds() >= r0+3 })
	h.lookup(t, backend, macB)
	if n := h.nChange.Load(); n != 1 {
		t.Errorf("onChange called %d times, want 1", n)
	}
}

func TestResolverProbeSocketFailure(t *testing.T) {
	h := newResolverHarness(t, time.Hour)
	h.net.failOn = map[int]error{eth0: errors.New("operation not permitted")}
	backend := netip.MustParseAddr("198.18.0.6")
	h.peers.set(backend, macB)
	h.r.SetTargets([]netip.Addr{backend})
	h.start(t)
	testkit.Eventually(t, wait,

		"a listen attempt", func() bool {
			h.net.mu.Lock()
			defer h.net.mu.Unlock()
			return h.net.listens > 0
		})

	h.settle(t, backend)
	h.net.none(t)
	if _, ok := h.r.Lookup(backend); ok {
		t.Error("resolved without a socket")
	}
}

func TestResolverRunTwiceAndDialError(t *testing.T) {
	h := newResolverHarness(t, time.Hour)
	h.start(t)
	testkit.Eventually(t, wait,

		"Run to start", func() bool {
			h.r.mu.Lock()
			defer h.r.mu.Unlock()
			return h.r.running
		})

	if err := h.r.Run(context.Background(), nil); err == nil {
		t.Error("second concurrent Run returned nil")
	}
	r := NewResolver(nil, 0)
	if r.refresh != DefaultRefresh {
		t.Errorf("refresh = %v, want %v", r.refresh, DefaultRefresh)
	}
	r.dial = func() (kernel, error) { return nil, errors.New("socket: permission denied") }
	if err := r.Run(context.Background(), nil); err == nil {
		t.Error("Run without rtnetlink returned nil")
	}
}

func TestProbeSource(t *testing.T) {
	noAddrs := linkwatch.Link{Index: 3, MAC: macA}
	twoNets := linkwatch.Link{Index: 4, MAC: macA, Addrs: []netip.Prefix{
		netip.MustParsePrefix("198.18.1.1/24"),
		netip.MustParsePrefix("198.18.2.1/24"),
		netip.MustParsePrefix("2001:2:1::1/64"),
		netip.MustParsePrefix("fe80::1/64"),
	}}
	llOnly := linkwatch.Link{Index: 5, MAC: macA, Addrs: []netip.Prefix{netip.MustParsePrefix("fe80::5/64")}}
	a := netip.MustParseAddr
	for _, c := range []struct {
		name             string
		link             linkwatch.Link
		target, routeSrc netip.Addr
		want             netip.Addr
	}{
		{"route source wins", twoNets, a("198.18.2.9"), a("198.18.1.1"), a("198.18.1.1")},
		{"matching subnet", twoNets, a("198.18.2.9"), netip.Addr{}, a("198.18.2.1")},
		{"first IPv4 otherwise", twoNets, a("198.19.0.1"), netip.Addr{}, a("198.18.1.1")},
		{"ARP probe from 0.0.0.0", noAddrs, a("198.18.2.9"), netip.Addr{}, a("0.0.0.0")},
		{"v6 route source", twoNets, a("2001:2:9::9"), a("2001:2:1::1"), a("2001:2:1::1")},
		{"v6 link-local target", twoNets, a("fe80::9"), a("2001:2:1::1"), a("fe80::1")},
		{"v6 global", twoNets, a("2001:2:1::9"), netip.Addr{}, a("2001:2:1::1")},
		{"v6 only link-local", llOnly, a("2001:2:1::9"), netip.Addr{}, a("fe80::5")},
		{"v6 unspecified", noAddrs, a("2001:2:1::9"), netip.Addr{}, a("::")},
	} {
		if got := probeSource(c.link, c.target, c.routeSrc); got != c.want {
			t.Errorf("%s: probeSource = %v, want %v", c.name, got, c.want)
		}
	}
}

// Lookup may be called from anywhere, a packet worker included: one atomic
// load and a map read, no allocation.
func TestLookupDoesNotAllocate(t *testing.T) {
	r := NewResolver(nil, time.Hour)
	backend := netip.MustParseAddr("198.18.0.5")
	r.state.Store(&resolution{hops: map[netip.Addr]NextHop{backend: {MAC: macB, Ifindex: eth0}}})
	if n := testing.AllocsPerRun(100, func() {
		if _, ok := r.Lookup(backend); !ok {
			t.Fatal("not found")
		}
		r.Gateway(false)
	}); n != 0 {
		t.Errorf("Lookup allocates %v times per call", n)
	}
}

func BenchmarkLookup(b *testing.B) {
	r := NewResolver(nil, time.Hour)
	hops := map[netip.Addr]NextHop{}
	for i := range 1000 {
		hops[netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)})] = NextHop{MAC: macB, Ifindex: eth0}
	}
	r.state.Store(&resolution{hops: hops})
	addr := netip.MustParseAddr("198.18.1.7")
	b.ReportAllocs()
	for b.Loop() {
		r.Lookup(addr)
	}
}

// TestResolverAnswerBeforeRequest: an answer that a reader takes before
// any request goes out (the reply to the kernel's own request, a
// gratuitous ARP reply) must not crash the round: both that answer and
// the step that gives up hops no request can go to may find nothing left
// pending, and each closed the round's done channel.
func TestResolverAnswerBeforeRequest(t *testing.T) {
	target := netip.MustParseAddr("198.18.0.7")
	peer := mustMAC("02:00:00:00:00:07")
	for i := 0; i < 2000; i++ { // the reader must win a race: not every round hits it
		n := newFakeNet()
		r := NewResolver(nil, time.Second)
		r.wait = time.Millisecond
		r.listen = func(ifindex int, et uint16, f []bpf.RawInstruction) (frameConn, error) {
			c, err := n.listen(ifindex, et, f)
			if err == nil {
				c.(*fakeConn).in <- arpFrame(macA, arpReply, peer, target, macA, src4)
				time.Sleep(time.Millisecond) // the reader takes it before the round goes on
			}
			return c, err
		}
		go func() {
			for range n.sent {
			}
		}()
		r.probe(context.Background(), testKernel().links, []want{{hopKey{eth0, target}, src4}})
		close(n.sent)
	}
}
