package decap

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/vipd/vipd/dsr"
	"github.com/vipd/vipd/packet"
)

// hinted returns a GUE variant 0 payload as vipd builds it for a packet
// with a previous-owner hint, written byte by byte from the wire format
// (not from the parser's constants): the 4-byte GUE header (version 00,
// C 0, Hlen 2 or 5, Proto/ctype 4 or 41, flags 0), the private data
// ("vp", kind 1, hint flags, the owner's 4 or 16 bytes), then inner.
func hinted(prev netip.Addr, flags byte, inner []byte) []byte {
	var b []byte
	if prev.Is4() {
		b = []byte{0x02, 4, 0, 0, 0x76, 0x70, 1, flags}
	} else {
		b = []byte{0x05, 41, 0, 0, 0x76, 0x70, 1, flags}
	}
	b = append(b, prev.AsSlice()...)
	return append(b, inner...)
}

// Backends of the chaining tests: the previous owner, and a peer backend
// that chains packets here.
var (
	prevOwner4 = netip.MustParseAddr("198.18.3.12")
	prevOwner6 = netip.MustParseAddr("2001:2:0:3::12")
	peer4      = netip.MustParseAddr("198.18.1.11")
	peer6      = netip.MustParseAddr("2001:2:0:1::11")
)

func TestParseHint(t *testing.T) {
	data4 := tcp4(t, client4, vip4, 40000, 80, false, true, 2, []byte("data"))
	data6 := tcp6(t, client6, vip6, 40000, 80, false, true, 2, []byte("data"))
	ok4 := hinted(prevOwner4, 0, data4)
	ok6 := hinted(prevOwner6, 0, data6)
	for _, tc := range []struct {
		name    string
		payload []byte
		want    Reason // noDrop: accepted
		prev    netip.Addr
		chained bool
	}{
		{"IPv4", ok4, noDrop, prevOwner4, false},
		{"IPv6", ok6, noDrop, prevOwner6, false},
		{"IPv4 chained", hinted(prevOwner4, 0x01, data4), noDrop, prevOwner4, true},
		{"IPv6 chained", hinted(prevOwner6, 0x01, data6), noDrop, prevOwner6, true},
		{"control bit", mutate(ok4, func(b []byte) { b[0] |= 0x20 }), DropGUEHeader, netip.Addr{}, false},
		{"GUE flags", mutate(ok4, func(b []byte) { b[3] = 0x80 }), DropGUEHeader, netip.Addr{}, false},
		{"GUE flags, high byte", mutate(ok4, func(b []byte) { b[2] = 0x01 }), DropGUEHeader, netip.Addr{}, false},
		{"Hlen 5 with IPv4", mutate(ok4, func(b []byte) { b[0] = 0x05 }), DropGUEHeader, netip.Addr{}, false},
		{"Hlen 2 with IPv6", mutate(ok6, func(b []byte) { b[0] = 0x02 }), DropGUEHeader, netip.Addr{}, false},
		{"Hlen 0", append([]byte{0x00, 4, 0, 0}, data4...), DropGUEHeader, netip.Addr{}, false},
		{"Hlen 3 with IPv4", mutate(ok4, func(b []byte) { b[0] = 0x03 }), DropGUEHeader, netip.Addr{}, false},
		{"proto 17", mutate(ok4, func(b []byte) { b[1] = 17 }), DropGUEHeader, netip.Addr{}, false},
		{"proto 4, inner IPv6", hinted(prevOwner4, 0, data6), DropGUEHeader, netip.Addr{}, false},
		{"proto 41, inner IPv4", hinted(prevOwner6, 0, data4), DropGUEHeader, netip.Addr{}, false},
		{"header only", ok4[:4], DropGUEHeader, netip.Addr{}, false},
		{"three bytes", ok4[:3], DropGUEHeader, netip.Addr{}, false},
		{"private data cut", ok4[:10], DropGUEHeader, netip.Addr{}, false},
		{"no inner packet", ok4[:12], DropGUEHeader, netip.Addr{}, false},
		{"magic", mutate(ok4, func(b []byte) { b[4] = 'V' }), DropHint, netip.Addr{}, false},
		{"magic, second byte", mutate(ok6, func(b []byte) { b[5] = 0 }), DropHint, netip.Addr{}, false},
		{"kind 0", mutate(ok4, func(b []byte) { b[6] = 0 }), DropHint, netip.Addr{}, false},
		{"kind 2", mutate(ok6, func(b []byte) { b[6] = 2 }), DropHint, netip.Addr{}, false},
		{"unknown hint flag 0x02", hinted(prevOwner4, 0x02, data4), DropHint, netip.Addr{}, false},
		{"unknown hint flag 0x80 with chained", hinted(prevOwner4, 0x81, data4), DropHint, netip.Addr{}, false},
		{"owner 0.0.0.0", hinted(netip.MustParseAddr("0.0.0.0"), 0, data4), DropHint, netip.Addr{}, false},
		{"owner loopback", hinted(netip.MustParseAddr("127.0.0.1"), 0, data4), DropHint, netip.Addr{}, false},
		{"owner broadcast", hinted(netip.MustParseAddr("255.255.255.255"), 0, data4), DropHint, netip.Addr{}, false},
		{"owner multicast", hinted(netip.MustParseAddr("224.0.0.5"), 0, data4), DropHint, netip.Addr{}, false},
		{"owner ::", hinted(netip.MustParseAddr("::"), 0, data6), DropHint, netip.Addr{}, false},
		{"owner link-local", hinted(netip.MustParseAddr("fe80::1"), 0, data6), DropHint, netip.Addr{}, false},
		{"owner IPv4-mapped", hinted(netip.MustParseAddr("::ffff:198.18.3.12"), 0, data6), DropHint, netip.Addr{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, n, r := parseHint(tc.payload)
			if r != tc.want {
				t.Fatalf("parseHint: %v, want %v", r, tc.want)
			}
			if r != noDrop {
				return
			}
			if h.prev != tc.prev || h.chained != tc.chained {
				t.Errorf("hint %+v, want owner %v chained %v", h, tc.prev, tc.chained)
			}
			inner := data4
			if tc.prev.Is6() {
				inner = data6
			}
			if !bytes.Equal(tc.payload[n:], inner) {
				t.Errorf("inner packet at offset %d is not the one sent", n)
			}
		})
	}
}

// TestSetChained: the chained copy differs from the received datagram in
// the CHAINED bit only, and parses as chained.
func TestSetChained(t *testing.T) {
	for _, prev := range []netip.Addr{prevOwner4, prevOwner6} {
		inner := tcp4(t, client4, vip4, 40000, 80, false, true, 2, nil)
		if prev.Is6() {
			inner = tcp6(t, client6, vip6, 40000, 80, false, true, 2, nil)
		}
		b := hinted(prev, 0, inner)
		setChained(b)
		if want := hinted(prev, 0x01, inner); !bytes.Equal(b, want) {
			t.Errorf("%v: chained datagram\n got %x\nwant %x", prev, b, want)
		}
	}
}

// TestStripGUEHint: hinted datagrams pass the GUE checks with their hint;
// chain peers are accepted as outer sources for chained packets only.
func TestStripGUEHint(t *testing.T) {
	data4 := tcp4(t, client4, vip4, 40000, 80, false, true, 2, []byte("data"))
	data6 := tcp6(t, client6, vip6, 40000, 80, false, true, 2, []byte("data"))
	allow := []netip.Prefix{netip.MustParsePrefix("198.18.1.0/30"), netip.MustParsePrefix("2001:2:0:1::/126")} // lbAddr4, lbAddr6
	peers := []netip.Prefix{netip.PrefixFrom(peer4, 32), netip.PrefixFrom(peer6, 128)}
	for _, tc := range []struct {
		name    string
		payload []byte
		src     netip.Addr
		allowed []netip.Prefix
		want    Reason
		hint    hint
	}{
		{"IPv4 from vipd", hinted(prevOwner4, 0, data4), lbAddr4, allow, pass, hint{prevOwner4, false}},
		{"IPv6 from vipd", hinted(prevOwner6, 0, data6), lbAddr6, allow, pass, hint{prevOwner6, false}},
		{"chained IPv4 from a peer", hinted(prevOwner4, 1, data4), peer4, allow, pass, hint{prevOwner4, true}},
		{"chained IPv6 from a peer", hinted(prevOwner6, 1, data6), peer6, allow, pass, hint{prevOwner6, true}},
		{"not chained, from a peer", hinted(prevOwner4, 0, data4), peer4, allow, DropSource, hint{}},
		{"variant 1 from a peer", data4, peer4, allow, DropSource, hint{}},
		{"chained, from a stranger", hinted(prevOwner4, 1, data4), stranger, allow, DropSource, hint{}},
		{"malformed from a peer", append([]byte{0x00, 4, 0, 0}, data4...), peer4, allow, DropGUEHeader, hint{}},
		{"any source without an allow-list", hinted(prevOwner4, 0, data4), stranger, nil, pass, hint{prevOwner4, false}},
		{"IPv4 inner, hint and owner, over IPv6", hinted(prevOwner4, 0, data4), lbAddr6, allow, DropInnerVersion, hint{}},
		{"inner length", hinted(prevOwner4, 0, data4[:len(data4)-1]), lbAddr4, allow, DropInnerLength, hint{}},
		{"inner checksum", hinted(prevOwner4, 0, mutate(data4, func(b []byte) { b[8]-- })), lbAddr4, allow, DropInnerChecksum, hint{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFilter(tc.allowed, false)
			f.chainPeers = peers
			got, h := f.stripGUE(bytes.Clone(tc.payload), tc.src)
			checkOne(t, f, tc.want)
			if tc.want != pass {
				if got != nil {
					t.Errorf("passed %d bytes, want a drop", len(got))
				}
				return
			}
			if h != tc.hint {
				t.Errorf("hint %+v, want %+v", h, tc.hint)
			}
			inner := data4
			if tc.hint.prev.Is6() {
				inner = data6
			}
			if !bytes.Equal(got, inner) {
				t.Errorf("inner packet\n got %x\nwant %x", got, inner)
			}
		})
	}
}

// fakeLookup is a SocketLookup over a set of connected flows.
type fakeLookup struct {
	conns map[flowKey]bool
	err   error
	calls int
}

func (l *fakeLookup) Lookup(proto uint8, local, remote netip.AddrPort) (bool, error) {
	l.calls++
	if l.err != nil {
		return false, l.err
	}
	return l.conns[flowKey{proto, local, remote}], nil
}

// connected returns a fakeLookup that knows the flows of the given
// inner packets.
func connected(pkts ...[]byte) *fakeLookup {
	l := &fakeLookup{conns: map[flowKey]bool{}}
	for _, p := range pkts {
		k, _, _ := flowOf(p)
		l.conns[k] = true
	}
	return l
}

// newChainer returns a chainer whose chain peers are the previous owners
// of the tests, prevOwner4 and prevOwner6.
func newChainer(on bool, l SocketLookup, cache *flowCache) *chainer {
	peers := []netip.Prefix{netip.PrefixFrom(prevOwner4, 32), netip.PrefixFrom(prevOwner6, 128)}
	return &chainer{on: on, peers: peers, lookup: l, cache: cache, stats: &counters{}}
}

// checkHints checks that exactly the outcome want moved (none for
// HintChainedOut, which the sender counts), Hinted by one, and
// Dropped[DropChainTarget] by one when drop is set, else none.
func checkHints(t *testing.T, c *chainer, want HintOutcome, drop bool) {
	t.Helper()
	s := c.stats.snapshot()
	if s.Hinted != 1 {
		t.Errorf("Hinted = %d, want 1", s.Hinted)
	}
	for o := range NumHintOutcomes {
		n := uint64(0)
		if o == want && o != HintChainedOut && !drop {
			n = 1
		}
		if s.Hints[o] != n {
			t.Errorf("Hints[%v] = %d, want %d", o, s.Hints[o], n)
		}
	}
	want1 := uint64(0)
	if drop {
		want1 = 1
	}
	if s.Dropped[DropChainTarget] != want1 || s.TotalDropped() != want1 {
		t.Errorf("drops %v, want %d chain_target", s.Dropped, want1)
	}
}

func TestChainDecide(t *testing.T) {
	here4 := tcp4(t, client4, vip4, 40001, 80, false, true, 2, []byte("data"))      // a connection of this host
	there4 := tcp4(t, client4, vip4, 40002, 80, false, true, 2, []byte("data"))     // one of the previous owner
	here6 := tcp6(t, client6, vip6, 40001, 80, false, true, 2, []byte("data"))      // IPv6, here
	there6 := tcp6(t, client6, vip6, 40002, 80, false, true, 2, []byte("data"))     // IPv6, there
	syn4 := tcp4(t, client4, vip4, 40002, 80, true, false, 1, nil)                  // a new connection
	synAck4 := tcp4(t, client4, vip4, 40002, 80, true, true, 1, nil)                // not a start
	rst4 := tcp4(t, client4, vip4, 40002, 80, false, false, 2, nil)                 // a bare RST-less segment
	udpHere := udpFrom(t, client4, vip4, 5353, 53, []byte("query"))                 // a connected UDP socket here
	udpThere := udpFrom(t, client4, vip4, 5354, 53, []byte("query"))                // none: only a connected one counts
	frag := mutate(here4, func(b []byte) { b[6] |= 0x20; fixIPv4Checksum(b[:20]) }) // MF set
	icmp := icmpEcho4(t, client4, vip4)
	local := connected(here4, here6, udpHere)
	prev := hint{prev: prevOwner4}
	prev6 := hint{prev: prevOwner6}
	stranger := hint{prev: netip.MustParseAddr("198.18.3.99")}     // not a chain peer
	stranger6 := hint{prev: netip.MustParseAddr("2001:2:0:3::99")} // nor this
	for _, tc := range []struct {
		name  string
		on    bool
		inner []byte
		h     hint
		l     *fakeLookup
		want  HintOutcome // HintChainedOut: decide says chain, or drop
		drop  bool        // dropped: the owner is not a chain peer
		calls int         // lookups expected
	}{
		{"local connection", true, here4, prev, local, HintMatch, false, 1},
		{"local IPv6 connection", true, here6, prev6, local, HintMatch, false, 1},
		{"no local connection", true, there4, prev, local, HintChainedOut, false, 1},
		{"no local IPv6 connection", true, there6, prev6, local, HintChainedOut, false, 1},
		{"SYN", true, syn4, prev, local, HintSYN, false, 0},
		{"SYN-ACK is not a start", true, synAck4, prev, local, HintChainedOut, false, 1},
		{"segment without flags", true, rst4, prev, local, HintChainedOut, false, 1},
		{"chained in", true, there4, hint{prev: prevOwner4, chained: true}, local, HintChainedIn, false, 0},
		{"lookup error", true, there4, prev, &fakeLookup{err: errors.New("netlink down")}, HintLookupError, false, 1},
		{"chaining off", false, there4, prev, local, HintOff, false, 0},
		{"chaining off, chained in", false, there4, hint{prev: prevOwner4, chained: true}, local, HintOff, false, 0},
		{"connected UDP socket", true, udpHere, prev, local, HintMatch, false, 1},
		{"UDP without a connected socket", true, udpThere, prev, local, HintChainedOut, false, 1},
		{"fragment", true, frag, prev, local, HintNoPorts, false, 0},
		{"ICMP", true, icmp, prev, local, HintNoPorts, false, 0},
		{"owner not a chain peer", true, there4, stranger, local, HintChainedOut, true, 1},
		{"IPv6 owner not a chain peer", true, there6, stranger6, local, HintChainedOut, true, 1},
		{"owner not a chain peer, local connection", true, here4, stranger, local, HintMatch, false, 1},
		{"owner not a chain peer, SYN", true, syn4, stranger, local, HintSYN, false, 0},
		{"owner not a chain peer, chained in", true, there4, hint{prev: stranger.prev, chained: true}, local, HintChainedIn, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.l.calls = 0
			c := newChainer(tc.on, tc.l, newFlowCache(64, time.Minute))
			want := deliverHere
			switch {
			case tc.drop:
				want = dropTarget
			case tc.want == HintChainedOut:
				want = chainOn
			}
			if got := c.decide(tc.inner, tc.h); got != want {
				t.Errorf("decide = %v, want %v", got, want)
			}
			checkHints(t, c, tc.want, tc.drop)
			if tc.l.calls != tc.calls {
				t.Errorf("%d lookups, want %d", tc.l.calls, tc.calls)
			}
		})
	}
}

// apart changes c's seed, if need be, until the flows have slots of their
// own: the seed is random, and flows that share a slot evict each other,
// which would change the exact counts the tests hold (two flows in 64
// slots collide once in 64 seeds).
func apart(tb testing.TB, c *flowCache, flows ...flowKey) *flowCache {
	tb.Helper()
	for tries := 0; ; tries++ {
		seen := map[uint64]bool{}
		for _, k := range flows {
			seen[c.index(k)] = true
		}
		if len(seen) == len(flows) {
			return c
		}
		if tries == 1000 {
			tb.Fatalf("no seed keeps %d flows apart in %d slots", len(flows), len(c.slots))
		}
		c.seed++
	}
}

// toVIP is the cache key of TCP flow client:port -> vip:80.
func toVIP(client, vip netip.Addr, port uint16) flowKey {
	return flowKey{packet.ProtoTCP, netip.AddrPortFrom(vip, 80), netip.AddrPortFrom(client, port)}
}

// TestChainCache: a flow is looked up once per TTL; a SYN for it, hinted
// or not, forgets the decision; lookup errors are not remembered.
func TestChainCache(t *testing.T) {
	there := tcp4(t, client4, vip4, 40002, 80, false, true, 2, []byte("data"))
	here := tcp4(t, client4, vip4, 40001, 80, false, true, 2, []byte("data"))
	syn := tcp4(t, client4, vip4, 40002, 80, true, false, 1, nil)
	prev := hint{prev: prevOwner4}
	l := connected(here)
	c := newChainer(true, l, apart(t, newFlowCache(64, time.Minute), toVIP(client4, vip4, 40001), toVIP(client4, vip4, 40002)))
	for i := range 3 {
		if c.decide(there, prev) != chainOn || c.decide(here, prev) != deliverHere {
			t.Fatalf("packet pair %d: wrong decision", i)
		}
	}
	if s := c.stats.snapshot(); l.calls != 2 || s.Lookups != 2 || s.CacheHits != 4 || s.Hints[HintMatch] != 3 {
		t.Errorf("%d lookups (%d counted), %d cache hits, %d matches; want 2, 2, 4, 3", l.calls, s.Lookups, s.CacheHits, s.Hints[HintMatch])
	}
	// A SYN with a hint forgets the flow; so does one without.
	c.decide(syn, prev)
	c.decide(there, prev)
	c.observe(syn)
	c.decide(there, prev)
	if l.calls != 4 {
		t.Errorf("%d lookups after two SYNs, want 4", l.calls)
	}
	// The connection now exists here: once forgotten, the flow is local.
	l.conns[flowKey{packet.ProtoTCP, netip.AddrPortFrom(vip4, 80), netip.AddrPortFrom(client4, 40002)}] = true
	c.observe(syn)
	if c.decide(there, prev) != deliverHere {
		t.Errorf("chained a flow that has a local connection now")
	}
	// Lookup errors are not cached.
	l.err = errors.New("netlink down")
	c.observe(syn)
	c.decide(there, prev)
	c.decide(there, prev)
	if s := c.stats.snapshot(); s.Hints[HintLookupError] != 2 {
		t.Errorf("%d lookup errors, want 2 (not cached)", s.Hints[HintLookupError])
	}
	// Entries expire.
	l.err = nil
	short := newChainer(true, l, newFlowCache(64, time.Nanosecond))
	l.calls = 0
	short.decide(here, prev)
	// The entry lived 1 ns from the decision: wait for the clock to
	// move past it, not for a time.
	for t0 := nanotime(); nanotime() <= t0+1; {
	}
	short.decide(here, prev)
	if l.calls != 2 {
		t.Errorf("%d lookups with an expired entry, want 2", l.calls)
	}
	// A decision from the cache chains only to a peer, too.
	peered := newChainer(true, connected(), newFlowCache(64, time.Minute))
	peered.decide(there, prev)
	if v := peered.decide(there, hint{prev: netip.MustParseAddr("198.18.3.99")}); v != dropTarget {
		t.Errorf("cached flow hinted toward a non-peer: %v, want dropped", v)
	}
	if s := peered.stats.snapshot(); s.CacheHits != 1 || s.Dropped[DropChainTarget] != 1 {
		t.Errorf("%d cache hits, drops %v; want 1 and one chain_target", s.CacheHits, s.Dropped)
	}
	// No cache: every packet is looked up.
	none := newChainer(true, l, nil)
	l.calls = 0
	none.decide(here, prev)
	none.decide(here, prev)
	none.observe(syn)
	if l.calls != 2 {
		t.Errorf("%d lookups without a cache, want 2", l.calls)
	}
}

// TestFlowCacheBounded: the cache never holds more than its slots, and a
// flow hashed to a taken slot replaces the older one.
func TestFlowCacheBounded(t *testing.T) {
	c := newFlowCache(100, time.Minute)
	if len(c.slots) != 128 {
		t.Fatalf("%d slots for 100, want 128", len(c.slots))
	}
	now := nanotime()
	for i := range 10000 {
		c.put(flowKey{packet.ProtoTCP, netip.AddrPortFrom(vip4, 80), netip.AddrPortFrom(client4, uint16(i))}, i%2 == 0, now)
	}
	found := 0
	for i := range 10000 {
		if _, ok := c.get(flowKey{packet.ProtoTCP, netip.AddrPortFrom(vip4, 80), netip.AddrPortFrom(client4, uint16(i))}, now); ok {
			found++
		}
	}
	if found == 0 || found > len(c.slots) {
		t.Errorf("%d of 10000 flows cached in %d slots", found, len(c.slots))
	}
}

// TestHintedDoesNotAllocate: the hinted path — GUE checks, hint, a cached
// decision either way, marking a packet chained — allocates nothing.
func TestHintedDoesNotAllocate(t *testing.T) {
	here := tcp4(t, client4, vip4, 40001, 80, false, true, 2, bytes.Repeat([]byte("y"), 1400))
	there := tcp4(t, client4, vip4, 40002, 80, false, true, 2, bytes.Repeat([]byte("y"), 1400))
	there6 := tcp6(t, client6, vip6, 40002, 80, false, true, 2, bytes.Repeat([]byte("y"), 1400))
	pkts := [][]byte{hinted(prevOwner4, 0, here), hinted(prevOwner4, 0, there), hinted(prevOwner6, 0, there6)}
	srcs := []netip.Addr{lbAddr4, lbAddr4, lbAddr6}
	bufs := make([][]byte, len(pkts))
	for i := range pkts {
		bufs[i] = bytes.Clone(pkts[i])
	}
	f := newFilter([]netip.Prefix{netip.MustParsePrefix("198.18.1.0/28"), netip.MustParsePrefix("2001:2:0:1::/124")}, true, vip4, vip6)
	cache := apart(t, newFlowCache(DefaultChainCache, time.Hour),
		toVIP(client4, vip4, 40001), toVIP(client4, vip4, 40002), toVIP(client6, vip6, 40002))
	c := newChainer(true, connected(here), cache)
	c.stats = f.stats
	allocs := testing.AllocsPerRun(100, func() {
		for i, p := range pkts {
			copy(bufs[i], p)
			inner, h := f.stripGUE(bufs[i], srcs[i])
			if inner == nil || !h.present() {
				t.Fatal("dropped")
			}
			if c.decide(inner, h) == chainOn {
				setChained(bufs[i])
			}
			c.observe(inner)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per 3 hinted packets", allocs)
	}
	if s := f.stats.snapshot(); s.Lookups != 3 || s.TotalDropped() != 0 {
		t.Errorf("%d lookups (want 3, then cached), drops %v", s.Lookups, s.Dropped)
	}
}

// BenchmarkHinted is the cost of a hinted packet's decision: GUE checks
// and hint, then a lookup every packet (fake, so the cost of the kernel
// query is left out: see BenchmarkSockDiag) or the decision cache.
func BenchmarkHinted(b *testing.B) {
	there := tcp4(b, client4, vip4, 40002, 80, false, true, 2, bytes.Repeat([]byte("y"), 1400))
	pkt := hinted(prevOwner4, 0, there)
	for _, bc := range []struct {
		name  string
		cache *flowCache
	}{{"lookup", nil}, {"cached", newFlowCache(DefaultChainCache, time.Hour)}} {
		b.Run(bc.name, func(b *testing.B) {
			f := newFilter([]netip.Prefix{netip.MustParsePrefix("198.18.1.0/28")}, true, vip4)
			c := newChainer(true, connected(), bc.cache)
			buf := bytes.Clone(pkt)
			b.ReportAllocs()
			b.SetBytes(int64(len(pkt)))
			for b.Loop() {
				inner, h := f.stripGUE(buf, lbAddr4)
				if inner == nil || c.decide(inner, h) != chainOn {
					b.Fatal("not chained")
				}
			}
		})
	}
}

// TestChainOptions: what Validate refuses of the chaining options.
func TestChainOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		ok   bool
	}{
		{"chain over GUE", Options{GUEPort: DefaultGUEPort, Chain: true, ChainPeers: []netip.Prefix{netip.PrefixFrom(peer4, 32)}}, true},
		{"chain without GUE", Options{Chain: true, ChainPeers: []netip.Prefix{netip.PrefixFrom(peer4, 32)}}, false},
		{"chain without peers", Options{GUEPort: DefaultGUEPort, Chain: true}, false},
		{"invalid peer prefix", Options{GUEPort: DefaultGUEPort, Chain: true, ChainPeers: []netip.Prefix{{}}}, false},
		{"negative cache", Options{GUEPort: DefaultGUEPort, Chain: true, ChainCache: -1}, false},
		{"huge cache", Options{GUEPort: DefaultGUEPort, Chain: true, ChainCache: MaxChainCache + 1}, false},
		{"negative TTL", Options{GUEPort: DefaultGUEPort, Chain: true, ChainCacheTTL: -time.Second}, false},
	} {
		if err := tc.o.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
	o, err := Options{GUEPort: DefaultGUEPort, Chain: true, ChainPeers: []netip.Prefix{netip.PrefixFrom(peer4, 32)}}.withDefaults()
	if err != nil || o.ChainCache != DefaultChainCache || o.ChainCacheTTL != DefaultChainCacheTTL {
		t.Errorf("defaults: cache %d, TTL %v, %v", o.ChainCache, o.ChainCacheTTL, err)
	}
}

// TestHintFromEncap runs hinted packets built by vipd's own encoder
// (dsr.GUEHint4, GUEHint6) through stripGUE: each parses to the owner
// and flags given, the inner packet untouched, and marking one chained
// here gives what the encoder writes for HintChained.
func TestHintFromEncap(t *testing.T) {
	inner4 := tcp4(t, client4, vip4, 40000, 80, false, true, 2, []byte("data"))
	inner6 := tcp6(t, client6, vip6, 40000, 80, false, true, 2, []byte("data"))
	build := func(inner []byte, prev netip.Addr, flags uint8) []byte {
		buf := make([]byte, dsr.OverheadHint6+len(inner))
		var at, o int
		if prev.Is4() {
			at = dsr.OverheadHint4
			copy(buf[at:], inner)
			o = dsr.GUEHint4(buf, at, len(inner), lbAddr4.As4(), beAddr4.As4(), 50000, DefaultGUEPort, prev.As4(), flags)
		} else {
			at = dsr.OverheadHint6
			copy(buf[at:], inner)
			src, dst, p := lbAddr6.As16(), beAddr6.As16(), prev.As16()
			o = dsr.GUEHint6(buf, at, len(inner), &src, &dst, 7, 50000, DefaultGUEPort, &p, flags)
		}
		return guePayload(t, buf[o:at+len(inner)]) // checked by gopacket as a datagram to the GUE port
	}
	for _, tc := range []struct {
		name  string
		inner []byte
		prev  netip.Addr
		src   netip.Addr
	}{
		{"IPv4", inner4, prevOwner4, lbAddr4},
		{"IPv6", inner6, prevOwner6, lbAddr6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, flags := range []uint8{0, dsr.HintChained} {
				payload := build(tc.inner, tc.prev, flags)
				if want := hinted(tc.prev, flags, tc.inner); !bytes.Equal(payload, want) {
					t.Errorf("flags %#x: encoder wrote\n %x\nthe wire format says\n %x", flags, payload, want)
				}
				f := newFilter(nil, false)
				got, h := f.stripGUE(bytes.Clone(payload), tc.src)
				checkOne(t, f, pass)
				if !bytes.Equal(got, tc.inner) || h.prev != tc.prev || h.chained != (flags == dsr.HintChained) {
					t.Errorf("flags %#x: hint %+v, inner equal %v", flags, h, bytes.Equal(got, tc.inner))
				}
			}
			mine := build(tc.inner, tc.prev, 0)
			setChained(mine)
			if theirs := build(tc.inner, tc.prev, dsr.HintChained); !bytes.Equal(mine, theirs) {
				t.Errorf("chained here\n %x\nby the encoder\n %x", mine, theirs)
			}
		})
	}
}

// FuzzHintRoundTrip: whatever owner, flags and inner bytes vipd's encoder
// is given, parseHint returns that owner and the chained flag and points
// at the inner bytes, or refuses exactly what the format refuses (unknown
// flags, an owner that cannot be a backend, an inner packet of another
// version).
func FuzzHintRoundTrip(f *testing.F) {
	f.Add([]byte{198, 18, 3, 12}, uint8(0), tcp4(f, client4, vip4, 1, 80, false, true, 1, nil))
	f.Add(prevOwner6.AsSlice(), uint8(1), tcp6(f, client6, vip6, 1, 80, false, true, 1, nil))
	f.Add([]byte{127, 0, 0, 1}, uint8(2), tcp4(f, client4, vip4, 1, 80, false, true, 1, nil))
	f.Fuzz(func(t *testing.T, addr []byte, flags uint8, inner []byte) {
		prev, ok := netip.AddrFromSlice(addr)
		if !ok || len(inner) < packet.IPv6Size {
			return // the encoder reads the inner header: give it one's length
		}
		buf := make([]byte, dsr.OverheadHint6+len(inner))
		var at, o int
		if prev.Is4() {
			at = dsr.OverheadHint4
			copy(buf[at:], inner)
			o = dsr.GUEHint4(buf, at, len(inner), lbAddr4.As4(), beAddr4.As4(), 50000, DefaultGUEPort, prev.As4(), flags) + 20 + 8
		} else {
			at = dsr.OverheadHint6
			copy(buf[at:], inner)
			src, dst, p := lbAddr6.As16(), beAddr6.As16(), prev.As16()
			o = dsr.GUEHint6(buf, at, len(inner), &src, &dst, 0, 50000, DefaultGUEPort, &p, flags) + 40 + 8
		}
		payload := buf[o : at+len(inner)]
		h, n, r := parseHint(payload)
		version := byte(4)
		if prev.Is6() {
			version = 6
		}
		valid := flags&^HintChained == 0 && prev.IsGlobalUnicast() && !prev.Is4In6() && inner[0]>>4 == version
		if (r == noDrop) != valid {
			t.Fatalf("owner %v, flags %#x, inner %x: %v, want accepted %v", prev, flags, inner, r, valid)
		}
		if r != noDrop {
			return
		}
		if h.prev != prev || h.chained != (flags == HintChained) || !bytes.Equal(payload[n:], inner) {
			t.Fatalf("owner %v, flags %#x: parsed %+v, inner at %d", prev, flags, h, n)
		}
	})
}
