package xdpprog

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// Capacities of the steering maps. Update fails with ErrCapacity beyond
// them. The VIP and local maps are preallocated (under 1 MB); the reply
// maps are not (BPF_F_NO_PREALLOC): a box with 1,000 NAT VIPs of 100
// backends needs 100,000 reply sources, and a map preallocated for
// 262,144 would pin about 23 MB more each (262,144 entries of 88 bytes)
// whatever the configuration. Unfilled, each costs its bucket array
// (4.2 MB at this size, the memlock line of its fdinfo); an entry 88
// bytes more, allocated when Update adds it.
const (
	MaxVIPs    = 4096    // distinct VIP addresses
	MaxReplies = 1 << 18 // distinct ReplyKeys (and so distinct (address, protocol) pairs)
	MaxLocal   = 256     // distinct local addresses
)

// Map names, as the kernel shows them (bpftool map); at most 15 bytes.
const (
	progName      = "vipd_steer"
	mapVIPs       = "vipd_vips"
	mapLocal      = "vipd_local"
	mapReplies    = "vipd_replies"
	mapReplyHosts = "vipd_rhosts"
	mapXSKs       = "vipd_xsks"
)

// addrKey is the key of the VIP and local maps: an IPv6 address, or an
// IPv4 address mapped into ::ffff:0:0/96, in network order.
type addrKey [16]byte

// replyKey is the key of the reply and reply-host maps:
//
//	bytes 0–15  address (as addrKey)
//	byte  16    IP protocol (6 TCP, 17 UDP)
//	byte  17    zero
//	bytes 18–19 port, network order; 0 = any port (always 0 in the host map)
type replyKey [20]byte

// present is the value of every hash map entry; only presence matters.
const present = uint8(1)

func keyOf(a netip.Addr) addrKey { return addrKey(a.Unmap().As16()) }

func replyKeyOf(addr addrKey, proto uint8, port uint16) replyKey {
	var k replyKey
	copy(k[:16], addr[:])
	k[16] = proto
	k[18], k[19] = byte(port>>8), byte(port)
	return k
}

// specs returns the maps of a program whose XSKMAP has queues slots and
// whose fast path holds fast flows (none: no fast path maps).
func specs(queues, fast, fast6 int) map[string]*ebpf.MapSpec {
	hash := func(name string, keySize, max int) *ebpf.MapSpec {
		return &ebpf.MapSpec{Name: name, Type: ebpf.Hash, KeySize: uint32(keySize), ValueSize: 1, MaxEntries: uint32(max)}
	}
	onDemand := func(m *ebpf.MapSpec) *ebpf.MapSpec {
		m.Flags |= unix.BPF_F_NO_PREALLOC
		return m
	}
	m := map[string]*ebpf.MapSpec{
		mapVIPs:       hash(mapVIPs, len(addrKey{}), MaxVIPs),
		mapLocal:      hash(mapLocal, len(addrKey{}), MaxLocal),
		mapReplies:    onDemand(hash(mapReplies, len(replyKey{}), MaxReplies)),
		mapReplyHosts: onDemand(hash(mapReplyHosts, len(replyKey{}), MaxReplies)),
		mapXSKs:       {Name: mapXSKs, Type: ebpf.XSKMap, KeySize: 4, ValueSize: 4, MaxEntries: uint32(queues)},
	}
	if fast > 0 {
		m[mapFast] = &ebpf.MapSpec{Name: mapFast, Type: ebpf.LRUHash, KeySize: uint32(len(fastKey{})), ValueSize: fastValueSize, MaxEntries: uint32(fast)}
		if fast6 > 0 {
			m[mapFast6] = &ebpf.MapSpec{Name: mapFast6, Type: ebpf.LRUHash, KeySize: uint32(len(fastKey6{})), ValueSize: fastValueSize6, MaxEntries: uint32(fast6)}
		}
		m[mapFastGen] = &ebpf.MapSpec{Name: mapFastGen, Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1}
		m[mapFastStat] = &ebpf.MapSpec{Name: mapFastStat, Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: fastStatSize, MaxEntries: 1}
		m[mapFastRef] = &ebpf.MapSpec{Name: mapFastRef, Type: ebpf.Array, KeySize: 4, ValueSize: fastRefSize, MaxEntries: MaxFastRefs, Flags: unix.BPF_F_MMAPABLE}
	}
	return m
}

// set is one hash map together with a mirror of its keys. Only this
// process writes the map, and the mirror changes only after the kernel
// accepted a change, so the mirror is always exactly the map's contents,
// even after a failed Update.
type set[K comparable] struct {
	name string
	m    *ebpf.Map
	have map[K]struct{}
}

func newSet[K comparable](name string, m *ebpf.Map) set[K] {
	return set[K]{name: name, m: m, have: make(map[K]struct{})}
}

// add puts every key of want that the map lacks.
func (s set[K]) add(want map[K]struct{}) error {
	for k := range want {
		if _, ok := s.have[k]; ok {
			continue
		}
		if err := s.m.Put(k, present); err != nil {
			return fmt.Errorf("xdpprog: add to %s: %w", s.name, err)
		}
		s.have[k] = struct{}{}
	}
	return nil
}

// crowded reports whether the map cannot hold its present keys and want's
// together, so that add must wait for prune.
func (s set[K]) crowded(want map[K]struct{}) bool {
	n := len(s.have)
	for k := range want {
		if _, ok := s.have[k]; !ok {
			n++
		}
	}
	return n > int(s.m.MaxEntries())
}

// prune deletes every key of the map that want lacks.
func (s set[K]) prune(want map[K]struct{}) error {
	for k := range s.have {
		if _, ok := want[k]; ok {
			continue
		}
		if err := s.m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("xdpprog: delete from %s: %w", s.name, err)
		}
		delete(s.have, k)
	}
	return nil
}

// contents are the new contents of all steering maps, validated.
type contents struct {
	vips, local    map[addrKey]struct{}
	replies, hosts map[replyKey]struct{}
}

// build validates the arguments of Update and turns them into keys.
func build(vips []netip.Addr, replies []ReplyKey, local []netip.Addr) (*contents, error) {
	c := &contents{
		vips:    make(map[addrKey]struct{}, len(vips)),
		local:   make(map[addrKey]struct{}, len(local)),
		replies: make(map[replyKey]struct{}, len(replies)),
		hosts:   make(map[replyKey]struct{}),
	}
	for _, a := range vips {
		if !a.IsValid() {
			return nil, fmt.Errorf("xdpprog: invalid VIP address")
		}
		c.vips[keyOf(a)] = struct{}{}
	}
	for _, a := range local {
		if !a.IsValid() {
			return nil, fmt.Errorf("xdpprog: invalid local address")
		}
		c.local[keyOf(a)] = struct{}{}
	}
	for _, r := range replies {
		if !r.Addr.IsValid() {
			return nil, fmt.Errorf("xdpprog: invalid reply address")
		}
		if int32(r.Proto) != protoTCP && int32(r.Proto) != protoUDP {
			return nil, fmt.Errorf("xdpprog: reply %v: protocol %d: only TCP (6) and UDP (17) replies can be steered", r.Addr, r.Proto)
		}
		a := keyOf(r.Addr)
		c.replies[replyKeyOf(a, r.Proto, r.Port)] = struct{}{}
		c.hosts[replyKeyOf(a, r.Proto, 0)] = struct{}{}
	}
	for _, l := range []struct {
		what   string
		n, max int
	}{
		{"VIP addresses", len(c.vips), MaxVIPs},
		{"local addresses", len(c.local), MaxLocal},
		{"NAT reply sources", len(c.replies), MaxReplies},
	} {
		if l.n > l.max {
			return nil, fmt.Errorf("%w: %d %s, at most %d", ErrCapacity, l.n, l.what, l.max)
		}
	}
	return c, nil
}
