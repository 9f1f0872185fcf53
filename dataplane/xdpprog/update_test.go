package xdpprog

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// keys reads every key of m from the kernel.
func keys[K comparable](t testing.TB, m *ebpf.Map) map[K]struct{} {
	t.Helper()
	got := make(map[K]struct{})
	var k K
	var v uint8
	it := m.Iterate()
	for it.Next(&k, &v) {
		if v != present {
			t.Errorf("%v: value %d, want %d", k, v, present)
		}
		got[k] = struct{}{}
	}
	if err := it.Err(); err != nil {
		t.Fatalf("iterate: %v", err)
	}
	return got
}

// checkMaps compares the kernel's maps, and the mirrors, with what Update
// was given.
func checkMaps(t testing.TB, p *Program, vips []netip.Addr, replies []ReplyKey, local []netip.Addr) {
	t.Helper()
	want, err := build(vips, replies, local)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	for _, c := range []struct {
		name       string
		got, wantK []string
		mirror     []string
	}{
		{mapVIPs, names(keys[addrKey](t, p.vips.m)), names(want.vips), names(p.vips.have)},
		{mapLocal, names(keys[addrKey](t, p.local.m)), names(want.local), names(p.local.have)},
		{mapReplies, names(keys[replyKey](t, p.reply.m)), names(want.replies), names(p.reply.have)},
		{mapReplyHosts, names(keys[replyKey](t, p.hosts.m)), names(want.hosts), names(p.hosts.have)},
	} {
		if !slices.Equal(c.got, c.wantK) {
			t.Errorf("%s holds %d keys %v,\nwant %d %v", c.name, len(c.got), head(c.got), len(c.wantK), head(c.wantK))
		}
		if !slices.Equal(c.mirror, c.got) {
			t.Errorf("%s: the mirror (%d keys) differs from the kernel (%d keys)", c.name, len(c.mirror), len(c.got))
		}
	}
}

// names renders keys, sorted, for comparison and messages.
func names[K addrKey | replyKey](s map[K]struct{}) []string {
	var out []string
	for k := range maps.Keys(s) {
		switch k := any(k).(type) {
		case addrKey:
			out = append(out, netip.AddrFrom16(k).Unmap().String())
		case replyKey:
			a := netip.AddrFrom16([16]byte(k[:16])).Unmap()
			out = append(out, fmt.Sprintf("%v/%d", netip.AddrPortFrom(a, uint16(k[18])<<8|uint16(k[19])), k[16]))
		}
	}
	slices.Sort(out)
	return out
}

func head(s []string) []string { return s[:min(len(s), 6)] }

// TestUpdateReplaces: a second Update leaves exactly the new sets, both in
// the kernel and in behaviour.
func TestUpdateReplaces(t *testing.T) {
	p := load(t, 1)
	withSocket(t, p)
	a := struct {
		vips, local []netip.Addr
		replies     []ReplyKey
	}{
		addrs("198.18.1.1", "198.18.1.2", "2001:2:0:1::1"),
		addrs("198.18.0.1"),
		[]ReplyKey{{netip.MustParseAddr("198.18.2.1"), 6, 8080}, {netip.MustParseAddr("198.18.2.1"), 6, 8443}, {netip.MustParseAddr("198.18.2.9"), 17, 0}},
	}
	b := a
	b.vips = addrs("198.18.1.2", "198.18.1.3", "::ffff:198.18.1.4") // keeps .2, drops the IPv6 VIP, a mapped address is IPv4
	b.local = addrs("198.18.0.1", "2001:2::1")
	b.replies = []ReplyKey{{netip.MustParseAddr("198.18.2.1"), 6, 8443}, {netip.MustParseAddr("198.18.2.3"), 6, 8080}}

	if err := p.Update(a.vips, a.replies, a.local); err != nil {
		t.Fatalf("Update(a): %v", err)
	}
	checkMaps(t, p, a.vips, a.replies, a.local)
	// The same again, with duplicates: nothing changes.
	if err := p.Update(append(a.vips, a.vips...), append(a.replies, a.replies...), a.local); err != nil {
		t.Fatalf("Update(a twice): %v", err)
	}
	checkMaps(t, p, a.vips, a.replies, a.local)

	if err := p.Update(b.vips, b.replies, b.local); err != nil {
		t.Fatalf("Update(b): %v", err)
	}
	checkMaps(t, p, b.vips, b.replies, b.local)
	for _, c := range []struct {
		name string
		p    pk
		want uint32
	}{
		{"dropped vip", pk{src: client4, dst: "198.18.1.1", proto: tcp, sport: client, dport: 80}, pass},
		{"dropped v6 vip", pk{src: client6, dst: "2001:2:0:1::1", proto: tcp, sport: client, dport: 80}, pass},
		{"kept vip", pk{src: client4, dst: "198.18.1.2", proto: tcp, sport: client, dport: 80}, redir},
		{"new vip", pk{src: client4, dst: "198.18.1.3", proto: tcp, sport: client, dport: 80}, redir},
		{"new vip given mapped", pk{src: client4, dst: "198.18.1.4", proto: tcp, sport: client, dport: 80}, redir},
		{"dropped reply port", pk{src: "198.18.2.1", dst: client4, proto: tcp, sport: 8080, dport: client}, pass},
		{"kept reply port", pk{src: "198.18.2.1", dst: client4, proto: tcp, sport: 8443, dport: client}, redir},
		{"dropped any-port backend", pk{src: "198.18.2.9", dst: client4, proto: udp, sport: 53, dport: client}, pass},
		{"dropped any-port backend fragment", pk{src: "198.18.2.9", dst: client4, proto: udp, fragOff: 10}, pass},
		{"new reply", pk{src: "198.18.2.3", dst: client4, proto: tcp, sport: 8080, dport: client}, redir},
		{"new reply to new local", pk{src: "198.18.2.3", dst: "198.18.0.1", proto: tcp, sport: 8080, dport: client}, pass},
	} {
		if got := run(t, p, c.p.frame(t)); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, verdictName(got), verdictName(c.want))
		}
	}

	if err := p.Update(nil, nil, nil); err != nil {
		t.Fatalf("Update(nothing): %v", err)
	}
	checkMaps(t, p, nil, nil, nil)
}

// TestUpdateRejects: invalid input and sets beyond capacity fail with a
// clear error and leave the maps as they were.
func TestUpdateRejects(t *testing.T) {
	p := load(t, 1)
	vips, local := addrs("198.18.1.1"), addrs("198.18.0.1")
	replies := []ReplyKey{{netip.MustParseAddr("198.18.2.1"), 6, 8080}}
	if err := p.Update(vips, replies, local); err != nil {
		t.Fatalf("Update: %v", err)
	}
	many := func(n int) []netip.Addr {
		out := make([]netip.Addr, n)
		for i := range out { // n ≤ 65536: all within 198.19.0.0/16
			out[i] = netip.AddrFrom4([4]byte{198, 19, byte(i >> 8), byte(i)})
		}
		return out
	}
	manyReplies := func(n int) []ReplyKey {
		out := make([]ReplyKey, n)
		for i := range out { // every port of one backend, then of a second
			out[i] = ReplyKey{netip.AddrFrom4([4]byte{198, 18, 2, byte(1 + i>>16)}), 6, uint16(i)}
		}
		return out
	}
	for _, c := range []struct {
		name     string
		vips     []netip.Addr
		replies  []ReplyKey
		local    []netip.Addr
		capacity bool
	}{
		{"too many vips", many(MaxVIPs + 1), replies, local, true},
		{"too many local", vips, replies, many(MaxLocal + 1), true},
		{"too many replies", vips, manyReplies(MaxReplies + 1), local, true},
		{"invalid vip", []netip.Addr{{}}, replies, local, false},
		{"invalid local", vips, replies, []netip.Addr{{}}, false},
		{"invalid reply addr", vips, []ReplyKey{{Proto: 6, Port: 1}}, local, false},
		{"icmp reply", vips, []ReplyKey{{netip.MustParseAddr("198.18.2.1"), 1, 0}}, local, false},
	} {
		err := p.Update(c.vips, c.replies, c.local)
		switch {
		case err == nil:
			t.Errorf("%s: Update succeeded", c.name)
		case c.capacity != errors.Is(err, ErrCapacity):
			t.Errorf("%s: %v; ErrCapacity %v, want %v", c.name, err, !c.capacity, c.capacity)
		}
		checkMaps(t, p, vips, replies, local)
	}
}

// TestUpdateFull: every map takes exactly its capacity, and emptying it
// leaves nothing.
func TestUpdateFull(t *testing.T) {
	if testing.Short() {
		t.Skip("fills 140k map entries")
	}
	p := load(t, 1)
	vips := make([]netip.Addr, MaxVIPs)
	for i := range vips {
		vips[i] = netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)})
	}
	local := make([]netip.Addr, MaxLocal)
	for i := range local {
		local[i] = netip.AddrFrom16([16]byte{0x20, 0x01, 0, 2, 14: byte(i >> 8), 15: byte(i)})
	}
	replies := make([]ReplyKey, MaxReplies)
	for i := range replies {
		replies[i] = ReplyKey{netip.AddrFrom4([4]byte{198, 19, byte(i >> 8), byte(i)}), 17, 53}
	}
	if err := p.Update(vips, replies, local); err != nil {
		t.Fatalf("Update at capacity: %v", err)
	}
	checkMaps(t, p, vips, replies, local)
	if err := p.Update(nil, nil, nil); err != nil {
		t.Fatalf("Update(nothing): %v", err)
	}
	checkMaps(t, p, nil, nil, nil)
}

// TestUpdateSwapsFullSets: full maps replaced by as many other keys. The
// old and new keys together are twice a map's capacity, which the kernel
// refuses (E2BIG) to a set that adds before it prunes; then every later
// Update failed too.
func TestUpdateSwapsFullSets(t *testing.T) {
	if testing.Short() {
		t.Skip("fills 280k map entries")
	}
	p := load(t, 1)
	sets := func(b byte) ([]netip.Addr, []ReplyKey, []netip.Addr) {
		vips := make([]netip.Addr, MaxVIPs)
		for i := range vips {
			vips[i] = netip.AddrFrom16([16]byte{0x20, 0x01, 0, 2, 1, b, 14: byte(i >> 8), 15: byte(i)})
		}
		local := make([]netip.Addr, MaxLocal)
		for i := range local {
			local[i] = netip.AddrFrom16([16]byte{0x20, 0x01, 0, 2, 2, b, 14: byte(i >> 8), 15: byte(i)})
		}
		replies := make([]ReplyKey, MaxReplies)
		for i := range replies {
			replies[i] = ReplyKey{netip.AddrFrom16([16]byte{0x20, 0x01, 0, 2, 3, b, 14: byte(i >> 8), 15: byte(i)}), 6, 443}
		}
		return vips, replies, local
	}
	for _, b := range []byte{1, 2, 1} {
		vips, replies, local := sets(b)
		if err := p.Update(vips, replies, local); err != nil {
			t.Fatalf("Update to sets %d: %v", b, err)
		}
		checkMaps(t, p, vips, replies, local)
	}
	// Half new, half kept: the kept keys are never removed, even from a
	// set pruned first.
	vips, replies, local := sets(1)
	v2, r2, l2 := sets(2)
	vips, replies, local = append(vips[:MaxVIPs/2], v2[:MaxVIPs/2]...), append(replies[:MaxReplies/2], r2[:MaxReplies/2]...), append(local[:MaxLocal/2], l2[:MaxLocal/2]...)
	if err := p.Update(vips, replies, local); err != nil {
		t.Fatalf("Update to half of each: %v", err)
	}
	checkMaps(t, p, vips, replies, local)
}

// TestReplyMapsOnDemand: the reply maps allocate entries as Update adds
// them (BPF_F_NO_PREALLOC), so that their capacity costs kernel memory
// only when a configuration uses it; the small VIP and local maps are
// preallocated.
func TestReplyMapsOnDemand(t *testing.T) {
	p := load(t, 1)
	for _, c := range []struct {
		name     string
		m        *ebpf.Map
		onDemand bool
		max      uint32
	}{
		{mapReplies, p.reply.m, true, MaxReplies},
		{mapReplyHosts, p.hosts.m, true, MaxReplies},
		{mapVIPs, p.vips.m, false, MaxVIPs},
		{mapLocal, p.local.m, false, MaxLocal},
	} {
		info, err := c.m.Info()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := info.Flags&unix.BPF_F_NO_PREALLOC != 0; got != c.onDemand || info.MaxEntries != c.max {
			t.Errorf("%s: on demand %v, %d entries; want %v, %d", c.name, got, info.MaxEntries, c.onDemand, c.max)
		}
	}
}
