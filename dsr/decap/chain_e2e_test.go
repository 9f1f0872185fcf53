//go:build linux

package decap

import (
	"bytes"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vipd/vipd/testing/nstest"
)

// chainRig is two backends behind lb, which plays vipd and routes
// between them (and drops what the backends send to the clients):
//
//	a 198.18.1.11/24 ──veth── 198.18.1.1 lb 198.18.3.1 ──veth── 198.18.3.12/24 b
//	  2001:2:0:1::11/64       2001:2:0:1::1  2001:2:0:3::1       2001:2:0:3::12/64
//	  lo 198.18.0.101/32      route blackhole 198.18.2.0/24      lo 198.18.0.101/32
//	     2001:2::101/128                      2001:2:0:2::/64       2001:2::101/128
//
// Both run a Decap with chaining on, each with the other as its chain
// peer: a chains to b's addresses only, b accepts a's as the source of
// chained packets only.
type chainRig struct {
	lb, a, b   *nstest.NS
	lbA, lbB   *rig // views for the rig helpers: lb's side toward a, toward b
	da, db     *Decap
	sa, sb     *nstest.RawSender
	capA, capB *capture
	lnA, lnB   net.Listener
}

var (
	lbAddrB  = netip.MustParseAddr("198.18.3.1") // lb on b's link
	lbAddrB6 = netip.MustParseAddr("2001:2:0:3::1")
	bAddr4   = prevOwner4 // b: 198.18.3.12
	bAddr6   = prevOwner6 // b: 2001:2:0:3::12
	aAddr4   = beAddr4    // a: 198.18.1.11
	aAddr6   = beAddr6    // a: 2001:2:0:1::11
)

// newChainRig builds the rig; with runA false, a's Decap is not run, so
// that a test can drive its receive loop by hand.
func newChainRig(t *testing.T, runA bool) *chainRig {
	t.Helper()
	nstest.RequireRoot(t)
	// lb and a are nstest's Pair; b is on a second link of lb's.
	p := nstest.NewPair(t, "lb", "ba")
	c := &chainRig{lb: p.LB, a: p.BE, b: nstest.New(t, "bb")}
	// No duplicate address detection on the links to come (NewPair turned
	// it off in lb and a): until the link-local addresses have passed it,
	// the first IPv6 packets wait (measured: 2 s for a's first packet to
	// b with it).
	c.b.NoDAD(t)
	ifLA, ifLB, ifB := p.LBIf, nstest.Name("vl"), nstest.Name("vb")
	nstest.Veth(t, c.lb, ifLB, c.b, ifB)
	c.lb.AddAddrs(t, ifLB, netip.PrefixFrom(lbAddrB, 24), netip.PrefixFrom(lbAddrB6, 64))
	c.b.AddAddrs(t, ifB, netip.PrefixFrom(bAddr4, 24), netip.PrefixFrom(bAddr6, 64))
	c.lb.Must(t, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
	c.lb.Must(t, "ip", "route", "add", "blackhole", "198.18.2.0/24")
	c.lb.Must(t, "ip", "-6", "route", "add", "blackhole", "2001:2:0:2::/64")
	for _, be := range []struct {
		ns      *nstest.NS
		gw, gw6 netip.Addr
	}{{c.a, lbAddr4, lbAddr6}, {c.b, lbAddrB, lbAddrB6}} {
		be.ns.DSRBackend(t, vip4, vip6)
		be.ns.Must(t, "ip", "route", "add", "198.18.0.0/15", "via", be.gw.String())
		be.ns.Must(t, "ip", "-6", "route", "add", "2001:2::/48", "via", be.gw6.String())
	}
	// Neighbour discovery on the path a→lb→b done before the test's
	// packets, so that their timing is the decapsulators' alone.
	warm(t, c.a, c.b, bAddr4)
	warm(t, c.a, c.b, bAddr6)
	c.lbA = &rig{&nstest.Pair{LB: c.lb, LBIf: ifLA, BE: c.a}}
	c.lbB = &rig{&nstest.Pair{LB: c.lb, LBIf: ifLB, BE: c.b}}
	// A TTL far beyond the test, so that cache hits are certain.
	c.da = c.lbA.newDecap(t, Options{GUEPort: DefaultGUEPort, IPv6: true, Chain: true, CheckLocal: true, ChainCacheTTL: time.Minute,
		AllowedSources: []netip.Prefix{netip.PrefixFrom(lbAddr4, 32), netip.PrefixFrom(lbAddr6, 128)},
		ChainPeers:     []netip.Prefix{netip.PrefixFrom(bAddr4, 32), netip.PrefixFrom(bAddr6, 128)}})
	c.db = c.lbB.newDecap(t, Options{GUEPort: DefaultGUEPort, IPv6: true, Chain: true, CheckLocal: true,
		AllowedSources: []netip.Prefix{netip.PrefixFrom(lbAddrB, 32), netip.PrefixFrom(lbAddrB6, 128)},
		ChainPeers:     []netip.Prefix{netip.PrefixFrom(aAddr4, 32), netip.PrefixFrom(aAddr6, 128)}})
	// TestChainEndToEnd counts cache hits of flows 40100 and 40200 exactly.
	apart(t, c.da.chain.cache, toVIP(client4, vip4, 40100), toVIP(client4, vip4, 40200))
	if runA {
		run(t, c.da)
	}
	run(t, c.db)
	c.sa, c.sb = c.lbA.sender(t), c.lbB.sender(t)
	c.capA, c.capB = c.lbA.capture(t), c.lbB.capture(t)
	c.lnA, c.lnB = listenIn(t, c.a), listenIn(t, c.b)
	return c
}

// warm sends UDP datagrams from namespace from to addr:9 in namespace
// to until one arrives: at most 100, 100 ms apart (a loaded machine
// resolves neighbours late).
func warm(t *testing.T, from, to *nstest.NS, addr netip.Addr) {
	t.Helper()
	dst := netip.AddrPortFrom(addr, 9)
	var rx, tx *net.UDPConn
	err := to.Do(func() (err error) {
		rx, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(dst))
		return err
	})
	if err != nil {
		t.Fatalf("warm: listen in %s: %v", to.Name, err)
	}
	defer rx.Close()
	if err := from.Do(func() (err error) {
		tx, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dst))
		return err
	}); err != nil {
		t.Fatalf("warm: dial from %s: %v", from.Name, err)
	}
	defer tx.Close()
	buf := make([]byte, 16)
	for range 100 {
		tx.Write([]byte("warm"))
		rx.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := rx.Read(buf); err == nil {
			return
		}
	}
	t.Fatalf("warm: nothing from %s reached %v in %s within 10 s", from.Name, dst, to.Name)
}

// listenIn listens on vip4:80 in ns; closed at cleanup.
func listenIn(t *testing.T, ns *nstest.NS) net.Listener {
	t.Helper()
	var ln net.Listener
	if err := ns.Do(func() (err error) {
		ln, err = net.Listen("tcp4", netip.AddrPortFrom(vip4, 80).String())
		return err
	}); err != nil {
		t.Fatalf("listen in %s: %v", ns.Name, err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// tcpSeg4 returns an IPv4 TCP segment client4:sport → vip4:80 with ACK
// set (and PSH with a payload), seq and ack as given.
func tcpSeg4(tb testing.TB, sport uint16, seq, ack uint32, payload []byte) []byte {
	tb.Helper()
	l3 := &layers.IPv4{Version: 4, TTL: 63, Id: 9, Flags: layers.IPv4DontFragment, Protocol: layers.IPProtocolTCP, SrcIP: ip(client4), DstIP: ip(vip4)}
	l4 := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: 80, Seq: seq, Ack: ack, ACK: true, PSH: len(payload) > 0, Window: 64240}
	l4.SetNetworkLayerForChecksum(l3)
	return serialize(tb, l3, l4, gopacket.Payload(payload))
}

// connect opens a TCP connection from client4:sport to the VIP on the
// backend behind lbSide, as vipd would deliver it (GUE variant 1 from
// outer), and returns the server's end, accepted from ln, and the next
// sequence and acknowledgment numbers of the client.
func connect(t *testing.T, lbSide *rig, s *nstest.RawSender, c *capture, ln net.Listener, outer, be netip.Addr, sport uint16) (conn net.Conn, seq, ack uint32) {
	t.Helper()
	const isn = 1000
	s.Send(t, gue4(t, outer, be, 49152, DefaultGUEPort, tcp4(t, client4, vip4, sport, 80, true, false, isn, nil)))
	p := c.waitTCP(t, synAckFrom(vip4, client4, sport))
	serverISN := p.Layer(layers.LayerTypeTCP).(*layers.TCP).Seq
	s.Send(t, gue4(t, outer, be, 49152, DefaultGUEPort, tcpSeg4(t, sport, isn+1, serverISN+1, nil)))
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(replyTimeout))
	conn, err := ln.Accept()
	if err != nil {
		t.Fatalf("accept in %s: %v", lbSide.BE.Name, err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, isn + 1, serverISN + 1
}

// readWant reads len(want) bytes from conn within replyTimeout and
// compares them with want.
func readWant(t *testing.T, conn net.Conn, want []byte) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(replyTimeout))
	got := make([]byte, len(want))
	for n := 0; n < len(got); {
		m, err := conn.Read(got[n:])
		if err != nil {
			t.Fatalf("read %d of %d bytes: %v", n, len(want), err)
		}
		n += m
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %q, want %q", got, want)
	}
}

// TestChainEndToEnd: a hinted packet that is not a connection start,
// sent by vipd to backend a for a connection that exists only on b (the
// previous owner), is chained by a to b and read by b's socket, and is
// never bounced back to a; one for a connection a has is delivered at a
// and never leaves it.
func TestChainEndToEnd(t *testing.T) {
	c := newChainRig(t, true)

	// A connection on b, the previous owner; its next data arrives at a.
	connB, seq, ack := connect(t, c.lbB, c.sb, c.capB, c.lnB, lbAddrB, bAddr4, 40100)
	msg := []byte("chained from a to b")
	c.sa.Send(t, gue4(t, lbAddr4, aAddr4, 49153, DefaultGUEPort, hinted(bAddr4, 0, tcpSeg4(t, 40100, seq, ack, msg))))
	readWant(t, connB, msg)
	sa := waitStats(t, c.da, "a chained out", func(s Stats) bool { return s.Hints[HintChainedOut] == 1 })
	sb := waitStats(t, c.db, "b chained in", func(s Stats) bool { return s.Hints[HintChainedIn] == 1 })
	if sa.Received != 1 || sa.Hinted != 1 || sa.Lookups != 1 || sa.Decapsulated != 0 || sa.TotalDropped() != 0 {
		t.Errorf("a: %+v, want one hinted packet, looked up once, chained out", sa)
	}
	if sb.Hinted != 1 || sb.Lookups != 0 || sb.TotalDropped() != 0 {
		t.Errorf("b: %+v, want the chained packet delivered without a lookup", sb)
	}

	// A connection on a itself: a hinted packet for it stays on a.
	connA, seqA, ackA := connect(t, c.lbA, c.sa, c.capA, c.lnA, lbAddr4, aAddr4, 40200)
	msgA := []byte("stays on a")
	c.sa.Send(t, gue4(t, lbAddr4, aAddr4, 49154, DefaultGUEPort, hinted(bAddr4, 0, tcpSeg4(t, 40200, seqA, ackA, msgA))))
	readWant(t, connA, msgA)
	waitStats(t, c.da, "a local match", func(s Stats) bool { return s.Hints[HintMatch] == 1 })

	// A second packet of the chained flow: decided from the cache, and
	// read on b.
	msg2 := []byte(" and again")
	c.sa.Send(t, gue4(t, lbAddr4, aAddr4, 49153, DefaultGUEPort, hinted(bAddr4, 0, tcpSeg4(t, 40100, seq+uint32(len(msg)), ack, msg2))))
	readWant(t, connB, msg2)
	sa = waitStats(t, c.da, "a chained out twice", func(s Stats) bool { return s.Hints[HintChainedOut] == 2 })
	if sa.CacheHits != 1 || sa.Lookups != 2 {
		t.Errorf("a: %d cache hits, %d lookups; want 1 and 2 (one per flow)", sa.CacheHits, sa.Lookups)
	}

	// Nothing came back to a: it received the 2 handshake packets of its
	// own connection and the 3 hinted ones, and b, once it has handled
	// all it received (2 handshake packets, 2 chained in), chained none
	// on.
	sb = waitStats(t, c.db, "b has handled its 4 packets", func(s Stats) bool {
		return s.Received == 4 && s.Decapsulated+s.TotalDropped()+s.Hints[HintChainedOut] == 4
	})
	sa = c.da.Stats()
	if sa.Received != 5 || sa.Hints[HintChainedIn] != 0 {
		t.Errorf("a received %d packets (%d chained in), want 5 and 0: %+v", sa.Received, sa.Hints[HintChainedIn], sa)
	}
	if sb.Hints[HintChainedOut] != 0 || sb.Hints[HintChainedIn] != 2 || sb.Received != 4 {
		t.Errorf("b: %+v, want 4 packets received (2 handshake, 2 chained in), none chained out", sb)
	}
}

// TestChainDoesNotAllocate holds the per-packet claim on the real chain
// path: a GUE read, the checks, a cached decision, the send to the
// previous owner. The first packet's kernel lookup (which allocates) is
// AllocsPerRun's warm-up.
func TestChainDoesNotAllocate(t *testing.T) {
	c := newChainRig(t, false)
	var rx *receiver // a's IPv4 GUE socket, the first one New opens
	for _, r := range c.da.rx {
		if r.kind == kindGUE && rx == nil {
			rx = r
		}
	}
	const runs = 50
	for i := range runs + 1 {
		c.sa.Send(t, gue4(t, lbAddr4, aAddr4, 49160, DefaultGUEPort, hinted(bAddr4, 0, tcpSeg4(t, 40300, 5000+uint32(i), 1, []byte("x")))))
	}
	rx.f.SetReadDeadline(time.Now().Add(replyTimeout))
	var err error
	allocs := testing.AllocsPerRun(runs, func() {
		if e := c.da.receive(rx); e != nil && err == nil {
			err = e
		}
	})
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	if allocs != 0 {
		t.Errorf("%v allocations per chained packet", allocs)
	}
	if s := c.da.Stats(); s.Hints[HintChainedOut] != runs+1 || s.Lookups != 1 {
		t.Errorf("a: %d chained out, %d lookups; want %d and 1: %+v", s.Hints[HintChainedOut], s.Lookups, runs+1, s)
	}
	// b delivers them all (its kernel answers the unknown connection
	// with resets, which lb drops).
	waitStats(t, c.db, "b chained in", func(s Stats) bool { return s.Hints[HintChainedIn] == runs+1 })
}

// TestChainIPv6: the IPv6 path of chaining, a hinted segment of a flow
// a does not have is chained over IPv6 to b (whose kernel has no
// connection either and answers with a reset, which lb drops); b counts
// it chained in and delivers it, and an unchained packet from a is
// refused by b.
func TestChainIPv6(t *testing.T) {
	c := newChainRig(t, true)
	seg := tcp6(t, client6, vip6, 40400, 80, false, true, 7, []byte("six"))
	c.sa.Send(t, gue6(t, lbAddr6, aAddr6, 49170, DefaultGUEPort, hinted(bAddr6, 0, seg)))
	waitStats(t, c.da, "a chained out", func(s Stats) bool { return s.Hints[HintChainedOut] == 1 })
	sb := waitStats(t, c.db, "b chained in", func(s Stats) bool { return s.Hints[HintChainedIn] == 1 && s.Decapsulated == 1 })
	if sb.TotalDropped() != 0 {
		t.Errorf("b dropped: %v", sb.Dropped)
	}
	// From a's address without HintChained, b refuses it: chain peers
	// are trusted for chained packets only.
	err := c.a.Do(func() error {
		conn, err := net.DialUDP("udp6", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(bAddr6, DefaultGUEPort)))
		if err != nil {
			return err
		}
		defer conn.Close()
		_, err = conn.Write(hinted(bAddr6, 0, seg))
		return err
	})
	if err != nil {
		t.Fatalf("send from a: %v", err)
	}
	waitStats(t, c.db, "b refuses", func(s Stats) bool { return s.Dropped[DropSource] == 1 })
}

// TestChainToNonPeer: a hinted packet for a flow a does not have, whose
// hint names an address outside a's chain peers (lb's, which lb could
// answer), is dropped and counted, not sent there: the hint is the
// packet's word, and -chain must not send datagrams wherever it says.
func TestChainToNonPeer(t *testing.T) {
	c := newChainRig(t, true)
	for _, tc := range []struct {
		name string
		pkt  []byte
	}{
		{"IPv4", gue4(t, lbAddr4, aAddr4, 49180, DefaultGUEPort, hinted(lbAddrB, 0, tcpSeg4(t, 40500, 7, 1, []byte("not for lb"))))},
		{"IPv6", gue6(t, lbAddr6, aAddr6, 49181, DefaultGUEPort, hinted(lbAddrB6, 0, tcp6(t, client6, vip6, 40501, 80, false, true, 7, []byte("not for lb"))))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := c.da.Stats()
			c.sa.Send(t, tc.pkt)
			s := waitStats(t, c.da, "a's verdict", func(s Stats) bool {
				return s.Hinted == before.Hinted+1 && s.Dropped[DropChainTarget]+s.Hints[HintChainedOut]+s.Decapsulated > before.Dropped[DropChainTarget]+before.Hints[HintChainedOut]+before.Decapsulated
			})
			if s.Dropped[DropChainTarget] != before.Dropped[DropChainTarget]+1 || s.Hints[HintChainedOut] != before.Hints[HintChainedOut] {
				t.Errorf("a: %d chain_target drops, %d chained out; want %d and %d (not sent to the hint's non-peer)",
					s.Dropped[DropChainTarget], s.Hints[HintChainedOut], before.Dropped[DropChainTarget]+1, before.Hints[HintChainedOut])
			}
			if s.Decapsulated != before.Decapsulated {
				t.Errorf("a delivered the packet here (%d decapsulated, was %d), want it dropped", s.Decapsulated, before.Decapsulated)
			}
		})
	}
}
